import CHandoffPlugin
import Foundation
import Glibc

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

    /// The host's copy of the plugin's descriptor (see ``PluginLoader``): kept for the process's life.
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
    /// - Throws: ``HandoffError`` with ``HandoffError/Code-swift.struct/pluginRefused``, naming the file: not a shared object, no entry point, a wrong
    ///   ABI major version or a newer minor one, a struct smaller than ABI 1.0's fields, a reserved
    ///   field set, a missing required field or an invalid activity type.
    public static func load(file: String) throws(HandoffError) -> LoadedPlugin {
        func refuse(_ reason: String) -> HandoffError { .pluginRefused(file: file, reason: reason) }
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

    /// Checks a plugin's descriptor — ABI version, size, reserved fields, required fields, activity
    /// types — and keeps a copy of it: min(struct_size, this host's size) bytes of the plugin's, the
    /// rest NULL, so that a plugin built against an older (smaller, or same-sized with fields still
    /// reserved) descriptor reads as one without the newer callbacks.
    ///
    /// Trusts what C cannot check: that the strings are NUL-terminated and that
    /// `activity_types` holds `activity_type_count` entries.
    static func check(_ original: UnsafePointer<handoff_plugin_descriptor>, file: String) throws(HandoffError) -> LoadedPlugin {
        func refuse(_ reason: String) -> HandoffError { .pluginRefused(file: file, reason: reason) }
        // Only the three leading fields are read before the plugin's size is known: every version has them.
        let raw = UnsafeRawPointer(original)
        let major = raw.load(fromByteOffset: 0, as: UInt32.self)
        let minor = raw.load(fromByteOffset: 4, as: UInt32.self)
        let size = Int(raw.load(fromByteOffset: 8, as: UInt32.self))
        guard major == abiVersion.major else {
            throw refuse("built for plugin ABI \(major).\(minor); this host speaks \(abiVersion.major).\(abiVersion.minor) (the major version must match)")
        }
        guard minor <= abiVersion.minor else {
            throw refuse("built for plugin ABI \(major).\(minor), newer than this host's \(abiVersion.major).\(abiVersion.minor); upgrade Handoff")
        }
        let hostSize = MemoryLayout<handoff_plugin_descriptor>.size
        guard size >= minimumDescriptorSize else {
            throw refuse("its descriptor is \(size) bytes, smaller than the fields of ABI \(major).0 (\(minimumDescriptorSize) bytes)")
        }
        let copy = UnsafeMutablePointer<handoff_plugin_descriptor>.allocate(capacity: 1)
        UnsafeMutableRawPointer(copy).initializeMemory(as: UInt8.self, repeating: 0, count: hostSize)
        UnsafeMutableRawPointer(copy).copyMemory(from: raw, byteCount: min(size, hostSize))
        do throws(HandoffError) {
            let plugin = try checkFields(copy, major: major, minor: minor, file: file)
            return plugin
        } catch {
            copy.deallocate()
            throw error
        }
    }

    /// The smallest descriptor accepted: every field of ABI 1.0, up to its `reserved` entries.
    static let minimumDescriptorSize = MemoryLayout<handoff_plugin_descriptor>.offset(of: \handoff_plugin_descriptor.will_save)!

    /// Checks the copied descriptor's fields; the plugin keeps `descriptor`.
    private static func checkFields(
        _ descriptor: UnsafeMutablePointer<handoff_plugin_descriptor>, major: UInt32, minor: UInt32, file: String
    ) throws(HandoffError) -> LoadedPlugin {
        func refuse(_ reason: String) -> HandoffError { .pluginRefused(file: file, reason: reason) }
        let d = descriptor.pointee
        let reservedSet = withUnsafeBytes(of: d.reserved) { bytes in
            stride(from: 0, to: bytes.count, by: MemoryLayout<UnsafeRawPointer?>.stride).filter { bytes.load(fromByteOffset: $0, as: UInt.self) != 0 }
                .map { $0 / MemoryLayout<UnsafeRawPointer?>.stride }
        }
        guard reservedSet.isEmpty else {
            throw refuse("reserved descriptor field\(reservedSet.count == 1 ? "" : "s") \(reservedSet.map(String.init).joined(separator: ", ")) \(reservedSet.count == 1 ? "is" : "are") set; reserved fields must be NULL (zero-initialize the descriptor)")
        }
        if minor == 0, d.will_save != nil || d.was_continued != nil || d.did_update != nil {
            throw refuse("built for plugin ABI 1.0 but sets will_save, was_continued or did_update, which 1.0 reserves (they must be NULL); declare ABI 1.1 to use them")
        }
        if minor < 2, d.activity_changed != nil {
            throw refuse("built for plugin ABI 1.\(minor) but sets activity_changed, which 1.\(minor) reserves (it must be NULL); declare ABI 1.2 to use it")
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
        return LoadedPlugin(file: file, descriptor: UnsafePointer(descriptor))
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
    ) -> (plugins: [LoadedPlugin], errors: [HandoffError]) {
        var plugins: [LoadedPlugin] = []
        var errors: [HandoffError] = []
        var claimed: [String: LoadedPlugin] = [:]
        var names: [String: LoadedPlugin] = [:]
        for folder in folders {
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
                errors.append(.pluginRefused(file: folder, reason: "plugin folder cannot be read"))
                continue
            }
            for entry in entries.sorted() where accept(folder, entry) {
                let file = (folder as NSString).appendingPathComponent(entry)
                do {
                    let plugin = try load(file: file)
                    if let other = plugin.activityTypes.lazy.compactMap({ claimed[$0] }).first {
                        let type = plugin.activityTypes.first { claimed[$0] === other }!
                        errors.append(.pluginRefused(file: file, reason: "activity type \(type) is already handled by plugin \(other.name) (\(other.file))"))
                        continue
                    }
                    if let other = names[plugin.name] {
                        errors.append(.pluginRefused(file: file, reason: "a plugin named \(plugin.name) is already loaded from \(other.file)"))
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
