import CHandoffPlugin
import Foundation
import Glibc

/// Why a plugin file was refused. Always names the file.
public struct PluginLoadError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The plugin file.
    public let file: String
    /// What is wrong with it.
    public let reason: String

    public var description: String { "\(file): \(reason)" }
}

/// A plugin loaded into this process: a shared object whose descriptor passed every check.
///
/// Plugins are never unloaded: a Swift plugin's type metadata cannot survive `dlclose`, and a C
/// plugin gains nothing from it. The handle is kept for the life of the process.
public final class LoadedPlugin: @unchecked Sendable, CustomStringConvertible {
    // Invariant for @unchecked Sendable: every stored property is set in init and never changes,
    // except `state`, which is written once by the plugin's init (under `lock`) before any other call.
    /// The shared object's path.
    public let file: String
    /// The plugin's name, e.g. `contacts`.
    public let name: String
    /// The plugin's version.
    public let version: String
    /// The team whose activities the plugin may restore, if it says.
    public let teamID: String?
    /// The activity types it handles (its `NSUserActivityTypes`).
    public let activityTypes: [String]
    /// The ABI version the plugin was built with.
    public let abiVersion: (major: UInt32, minor: UInt32)

    let descriptor: UnsafePointer<handoff_plugin_descriptor>
    /// Serializes calls into a plugin that is not marked thread-safe.
    let lock = NSLock()
    var state: UnsafeMutableRawPointer?

    init(file: String, descriptor: UnsafePointer<handoff_plugin_descriptor>) {
        self.file = file
        self.descriptor = descriptor
        let d = descriptor.pointee
        name = String(cString: d.name)
        version = String(cString: d.version)
        teamID = d.team_id.map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 }
        activityTypes = (0..<d.activity_type_count).map { String(cString: d.activity_types[$0]!) }
        abiVersion = (d.abi_major, d.abi_minor)
    }

    /// Whether the plugin handles continuation streams.
    public var handlesStreams: Bool { descriptor.pointee.write_stream != nil || descriptor.pointee.read_stream != nil }
    /// Whether the plugin takes commands.
    public var takesCommands: Bool { descriptor.pointee.command != nil }

    public var description: String { "\(name) \(version) (\(activityTypes.joined(separator: ", "))) from \(file)" }
}

/// Finds, opens and checks plugins.
public enum PluginLoader {
    /// The environment variable with extra plugin folders, separated by `:`.
    public static let pathVariable = "HANDOFF_PLUGIN_PATH"
    /// The ABI this host speaks.
    public static let abiVersion = (major: UInt32(HANDOFF_PLUGIN_ABI_MAJOR), minor: UInt32(HANDOFF_PLUGIN_ABI_MINOR))

    /// Loads one plugin file and checks its descriptor.
    ///
    /// - Throws: ``PluginLoadError`` naming the file: not a shared object, no entry point, a wrong
    ///   ABI major version or a newer minor one, a struct smaller than the ABI needs, a missing
    ///   required field or an invalid activity type.
    public static func load(file: String) throws(PluginLoadError) -> LoadedPlugin {
        func refuse(_ reason: String) -> PluginLoadError { PluginLoadError(file: file, reason: reason) }
        guard FileManager.default.fileExists(atPath: file) else { throw refuse("no such file") }
        // RTLD_NODELETE: even if someone closes the handle, the code stays mapped.
        guard let handle = dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
            let detail = dlerror().map { String(cString: $0) } ?? "unknown error"
            throw refuse("not a loadable shared object (\(detail))")
        }
        guard let symbol = dlsym(handle, HANDOFF_PLUGIN_ENTRY_SYMBOL) else {
            throw refuse("no \(HANDOFF_PLUGIN_ENTRY_SYMBOL) entry point: not a Handoff plugin")
        }
        let entry = unsafeBitCast(symbol, to: handoff_plugin_entry_fn.self)
        guard let descriptor = entry() else { throw refuse("its entry point returned no descriptor") }
        return try check(descriptor, file: file)
    }

    /// Checks a plugin's descriptor: ABI version, size, required fields, activity types.
    ///
    /// Trusts what C cannot check: that the strings are NUL-terminated and that
    /// `activity_types` holds `activity_type_count` entries.
    static func check(_ descriptor: UnsafePointer<handoff_plugin_descriptor>, file: String) throws(PluginLoadError) -> LoadedPlugin {
        func refuse(_ reason: String) -> PluginLoadError { PluginLoadError(file: file, reason: reason) }
        let d = descriptor.pointee
        guard d.abi_major == abiVersion.major else {
            throw refuse("built for plugin ABI \(d.abi_major).\(d.abi_minor); this host speaks \(abiVersion.major).\(abiVersion.minor) (the major version must match)")
        }
        guard d.abi_minor <= abiVersion.minor else {
            throw refuse("built for plugin ABI \(d.abi_major).\(d.abi_minor), newer than this host's \(abiVersion.major).\(abiVersion.minor); upgrade Handoff")
        }
        guard Int(d.struct_size) >= MemoryLayout<handoff_plugin_descriptor>.size else {
            throw refuse("its descriptor is \(d.struct_size) bytes, smaller than ABI \(d.abi_major).\(d.abi_minor) requires (\(MemoryLayout<handoff_plugin_descriptor>.size))")
        }
        guard let name = d.name.map({ String(cString: $0) }), !name.isEmpty else { throw refuse("the descriptor has no name") }
        guard d.version != nil else { throw refuse("the descriptor has no version") }
        guard d.activity_type_count > 0, d.activity_types != nil else { throw refuse("plugin \(name) declares no activity types") }
        for index in 0..<d.activity_type_count {
            guard let type = d.activity_types[index] else { throw refuse("activity type \(index) is NULL") }
            do {
                try UserActivity.validate(activityType: String(cString: type))
            } catch {
                throw refuse(error.message)
            }
        }
        guard d.`init` != nil else { throw refuse("plugin \(name) has no init handler") }
        guard d.restore != nil else { throw refuse("plugin \(name) has no restore handler") }
        return LoadedPlugin(file: file, descriptor: descriptor)
    }

    /// The plugin folders to scan: `folders`, then those in `HANDOFF_PLUGIN_PATH`.
    public static func folders(configured folders: [String], environment: [String: String] = ProcessInfo.processInfo.environment) -> [String] {
        folders + (environment[pathVariable]?.split(separator: ":").map(String.init) ?? [])
    }

    /// Loads every `*.so` in the folders, in name order. A broken plugin, or one claiming a type an
    /// earlier plugin already claimed, is refused with an error naming its file; the others still load.
    ///
    /// - Parameters:
    ///   - folders: The folders to scan.
    ///   - accept: Which files of a folder to try, given the folder and the file name (every `.so` by default).
    /// - Returns: The loaded plugins and the refusals.
    public static func loadAll(
        from folders: [String],
        accept: (_ folder: String, _ name: String) -> Bool = { _, name in name.hasSuffix(".so") }
    ) -> (plugins: [LoadedPlugin], errors: [PluginLoadError]) {
        var plugins: [LoadedPlugin] = []
        var errors: [PluginLoadError] = []
        var claimed: [String: LoadedPlugin] = [:]
        var names: [String: LoadedPlugin] = [:]
        for folder in folders {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
                errors.append(PluginLoadError(file: folder, reason: "plugin folder cannot be read"))
                continue
            }
            for entry in entries.sorted() where accept(folder, entry) {
                let file = (folder as NSString).appendingPathComponent(entry)
                do {
                    let plugin = try load(file: file)
                    if let other = plugin.activityTypes.lazy.compactMap({ claimed[$0] }).first {
                        let type = plugin.activityTypes.first { claimed[$0] === other }!
                        errors.append(PluginLoadError(file: file, reason: "activity type \(type) is already handled by plugin \(other.name) (\(other.file))"))
                        continue
                    }
                    if let other = names[plugin.name] {
                        errors.append(PluginLoadError(file: file, reason: "a plugin named \(plugin.name) is already loaded from \(other.file)"))
                        continue
                    }
                    for type in plugin.activityTypes { claimed[type] = plugin }
                    names[plugin.name] = plugin
                    plugins.append(plugin)
                } catch {
                    errors.append(error)
                }
            }
        }
        return (plugins, errors)
    }
}
