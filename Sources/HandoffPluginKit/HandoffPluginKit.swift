// What a Swift plugin author imports. Conform a class to `HandoffPlugin` and add one export line:
//
//     @_cdecl("handoff_plugin_entry")
//     public func handoffPluginEntry() -> UnsafeRawPointer {
//         HandoffPluginExport.descriptor(for: MyPlugin.self)
//     }
//
// The kit builds the C descriptor of handoff_plugin.h and bridges its handlers to the class. Only C
// types and protobuf bytes cross into the host: activities arrive as `WireActivity` decoded by the
// plugin's own copy of SwiftProtobuf.

@_exported import CHandoffPlugin
import Foundation
@_exported import HandoffWire
import SwiftProtobuf

/// A failure a plugin reports to the host: a status (`HANDOFF_*`) and a message.
public struct PluginFailure: Error, CustomStringConvertible {
    public let status: handoff_status
    public let message: String
    public init(_ status: handoff_status, _ message: String) {
        self.status = status
        self.message = message
    }
    public static func notFound(_ message: String) -> PluginFailure { PluginFailure(HANDOFF_NOT_FOUND, message) }
    public static func invalidArgument(_ message: String) -> PluginFailure { PluginFailure(HANDOFF_INVALID_ARGUMENT, message) }
    public static func failed(_ message: String) -> PluginFailure { PluginFailure(HANDOFF_FAILED, message) }
    public var description: String { message }
}

/// A Handoff plugin written in Swift.
///
/// The host calls `restore` and `command` one at a time (unless ``threadSafe``); `writeStream` and
/// `readStream` run on threads of their own, possibly while other calls run, and may block as long
/// as the transfer takes.
public protocol HandoffPlugin: AnyObject {
    /// Short, unique name, e.g. `contacts`.
    static var name: String { get }
    /// Version, e.g. `1.0.0`.
    static var version: String { get }
    /// The team whose activities the plugin restores, if any.
    static var teamID: String? { get }
    /// The activity types the plugin handles: its `NSUserActivityTypes`.
    static var activityTypes: [String] { get }
    /// Whether the plugin handles continuation streams (then implement the stream methods).
    static var handlesStreams: Bool { get }
    /// Whether the host may call `restore`, `command` and the rest at the same time (the plugin
    /// guards its own state). Needed for ``PluginHost/continueActivity(type:id:timeout:)``, whose
    /// restore runs while the command that asked waits. Default: false (one call at a time).
    static var threadSafe: Bool { get }

    /// Sets the plugin up. Keep `host` to make activities current later.
    init(host: PluginHost) throws
    /// Continuing side: restores an activity of one of the plugin's types.
    func restore(_ activity: WireActivity) throws
    /// Sends bytes on a continuation stream of `activity`. Return when done; the host then ends the stream.
    func writeStream(for activity: WireActivity, to writer: StreamWriter) throws
    /// Reads the bytes sent by the other side on a continuation stream of `activity`.
    func readStream(for activity: WireActivity, from reader: StreamReader) throws
    /// Runs a command (`handoff plugin <name> ...`); `arguments[0]` is the subcommand.
    func command(_ arguments: [String], output: (String) -> Void) throws
    /// The node is shutting down.
    func shutdown()

    // ABI 1.1: the app delegate's will-save, was-continued and did-update.

    /// Originating side, will-save: an activity marked with ``PluginHost/needsSave(_:)`` is about
    /// to be sent to a continuing node. Return it refreshed (same id and type), or nil to send it
    /// as it is.
    func willSave(_ activity: WireActivity) throws -> WireActivity?
    /// Originating side: node `node` (its name) continued `activity`.
    func wasContinued(_ activity: WireActivity, by node: String)
    /// Continuing side: the originator changed an activity this node continued (the newer version).
    func didUpdate(_ activity: WireActivity)

    // ABI 1.2

    /// Whether the host tells ``activityChanged(_:change:)`` of the activities of the plugin's
    /// types on the bus. Default: false.
    static var watchesActivities: Bool { get }
    /// Continuing side: an activity of one of the plugin's types appeared, changed or went on the
    /// bus (what its advertisement says: no userInfo). Keep it short; never continue from here.
    func activityChanged(_ activity: WireActivity, change: ActivityChange)
}

/// What happened to an activity on the bus, for ``HandoffPlugin/activityChanged(_:change:)``.
public enum ActivityChange: Sendable {
    case appeared, updated, removed
}

extension HandoffPlugin {
    public static var teamID: String? { nil }
    public static var handlesStreams: Bool { false }
    public static var threadSafe: Bool { false }
    public func writeStream(for activity: WireActivity, to writer: StreamWriter) throws {}
    public func readStream(for activity: WireActivity, from reader: StreamReader) throws {}
    public func command(_ arguments: [String], output: (String) -> Void) throws {
        throw PluginFailure(HANDOFF_UNSUPPORTED, "\(Self.name) takes no commands")
    }
    public func shutdown() {}
    public func willSave(_ activity: WireActivity) throws -> WireActivity? { nil }
    public func wasContinued(_ activity: WireActivity, by node: String) {}
    public func didUpdate(_ activity: WireActivity) {}
    public static var watchesActivities: Bool { false }
    public func activityChanged(_ activity: WireActivity, change: ActivityChange) {}
}

/// The host, as a plugin sees it.
public struct PluginHost: @unchecked Sendable {
    // Invariant for @unchecked Sendable: the host table is immutable and lives for the process.
    let table: UnsafePointer<handoff_host>

    /// A folder for this plugin's data (it exists).
    public var dataDirectory: URL { URL(fileURLWithPath: String(cString: table.pointee.data_directory), isDirectory: true) }
    /// The node's name.
    public var nodeName: String { String(cString: table.pointee.node_name) }
    /// The node's id: an activity whose origin has it was made current here.
    public var nodeID: String { String(cString: table.pointee.node_id) }

    /// Logs through the node's logger.
    public func log(_ message: String, level: handoff_log_level = HANDOFF_LOG_INFO) {
        table.pointee.log(table.pointee.context, level, message)
    }

    /// Makes an activity current on the node; returns the id the host gave it.
    public func becomeCurrent(_ activity: WireActivity) throws -> String {
        let bytes: [UInt8] = try activity.serializedBytes()
        var id = [CChar](repeating: 0, count: 128)
        var message = [CChar](repeating: 0, count: 1024)
        let status = bytes.withUnsafeBufferPointer { bytes in
            message.withUnsafeMutableBufferPointer { message in
                table.pointee.become_current(table.pointee.context, bytes.baseAddress, bytes.count, &id, id.count,
                                             handoff_error_buffer(message: message.baseAddress, capacity: message.count))
            }
        }
        guard status == Int32(HANDOFF_OK.rawValue) else { throw PluginFailure(handoff_status(UInt32(status)), text(message)) }
        return text(id)
    }

    /// Replaces a current activity's state (same `activityID`).
    public func update(_ activity: WireActivity) throws {
        let bytes: [UInt8] = try activity.serializedBytes()
        var message = [CChar](repeating: 0, count: 1024)
        let status = bytes.withUnsafeBufferPointer { bytes in
            message.withUnsafeMutableBufferPointer { message in
                table.pointee.update_activity(table.pointee.context, bytes.baseAddress, bytes.count,
                                              handoff_error_buffer(message: message.baseAddress, capacity: message.count))
            }
        }
        guard status == Int32(HANDOFF_OK.rawValue) else { throw PluginFailure(handoff_status(UInt32(status)), text(message)) }
    }

    /// Marks a current activity as needing save (Apple's `needsSave`): before it is next sent to a
    /// continuing node, the host calls ``HandoffPlugin/willSave(_:)``. Needs a host of ABI 1.1.
    public func needsSave(_ activityID: String) throws {
        guard table.pointee.abi_minor >= 1, let needsSave = table.pointee.needs_save else {
            throw PluginFailure(HANDOFF_UNSUPPORTED, "this host speaks plugin ABI \(table.pointee.abi_major).\(table.pointee.abi_minor): needs_save came in 1.1")
        }
        guard needsSave(table.pointee.context, activityID) == Int32(HANDOFF_OK.rawValue) else {
            throw PluginFailure.notFound("no current activity \(activityID)")
        }
    }

    /// Continues an activity of one of the plugin's types, as `handoff continue` does: `id`, or the
    /// newest of `type` this node knows (waiting up to `timeout` for one). Returns once the
    /// plugin's ``HandoffPlugin/restore(_:)`` (and ``HandoffPlugin/readStream(for:from:)``) returned:
    /// call it from a command (e.g. a paste), never from those. Needs a host of ABI 1.2 and a
    /// ``HandoffPlugin/threadSafe`` plugin.
    public func continueActivity(type: String, id: String? = nil, timeout: Duration = .seconds(5)) throws {
        guard table.pointee.abi_minor >= 2, let continueActivity = table.pointee.continue_activity else {
            throw PluginFailure(HANDOFF_UNSUPPORTED, "this host speaks plugin ABI \(table.pointee.abi_major).\(table.pointee.abi_minor): continue_activity came in 1.2")
        }
        var message = [CChar](repeating: 0, count: 1024)
        let milliseconds = UInt32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let status = message.withUnsafeMutableBufferPointer { message in
            continueActivity(table.pointee.context, type, id ?? "", milliseconds,
                             handoff_error_buffer(message: message.baseAddress, capacity: message.count))
        }
        guard status == Int32(HANDOFF_OK.rawValue) else { throw PluginFailure(handoff_status(UInt32(status)), text(message)) }
    }

    /// Resigns or invalidates a current activity.
    public func end(_ activityID: String, invalidate: Bool = false) throws {
        let status = table.pointee.end_activity(table.pointee.context, activityID, invalidate ? 1 : 0)
        guard status == Int32(HANDOFF_OK.rawValue) else { throw PluginFailure.notFound("no current activity \(activityID)") }
    }
}

/// Bytes to the other side of a continuation stream; `write` blocks while the reader is behind.
public struct StreamWriter {
    let table: UnsafePointer<handoff_stream_writer>

    public func write(_ bytes: some ContiguousBytes) throws {
        let status = bytes.withUnsafeBytes { raw in
            table.pointee.write(table.pointee.context, raw.bindMemory(to: UInt8.self).baseAddress, raw.count)
        }
        guard status == Int32(HANDOFF_OK.rawValue) else { throw PluginFailure(HANDOFF_STREAM_FAILED, "the stream failed while writing") }
    }

    /// Tells the reader the total length in advance.
    public func setExpectedLength(_ length: UInt64) {
        table.pointee.set_expected_length(table.pointee.context, length)
    }
}

/// Bytes from the other side of a continuation stream.
public struct StreamReader {
    let table: UnsafePointer<handoff_stream_reader>

    /// Up to `maxLength` bytes; `nil` at the verified end of the stream.
    public func read(maxLength: Int = 256 * 1024) throws -> Data? {
        var buffer = [UInt8](repeating: 0, count: maxLength)
        var message = [CChar](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBufferPointer { buffer in
            message.withUnsafeMutableBufferPointer { message in
                table.pointee.read(table.pointee.context, buffer.baseAddress, buffer.count,
                                   handoff_error_buffer(message: message.baseAddress, capacity: message.count))
            }
        }
        if count < 0 { throw PluginFailure(HANDOFF_STREAM_FAILED, text(message)) }
        return count == 0 ? nil : Data(buffer.prefix(Int(count)))
    }

    /// Everything up to the verified end.
    public func readAll() throws -> Data {
        var all = Data()
        while let chunk = try read() { all.append(chunk) }
        return all
    }
}

private func text(_ characters: [CChar]) -> String {
    String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Builds the C descriptor for a plugin type. One plugin per shared object.
public enum HandoffPluginExport {
    // Invariant for nonisolated(unsafe): written once, by the first call of the entry point, before
    // the host calls any handler; `instance` is written once by init. The host serializes calls.
    nonisolated(unsafe) static var pluginType: (any HandoffPlugin.Type)?
    nonisolated(unsafe) static var instance: (any HandoffPlugin)?
    nonisolated(unsafe) static var descriptorStorage: UnsafeMutablePointer<handoff_plugin_descriptor>?

    /// The descriptor for `type`, built on first use and kept for the process's life.
    public static func descriptor<Plugin: HandoffPlugin>(for type: Plugin.Type) -> UnsafeRawPointer {
        if let descriptorStorage { return UnsafeRawPointer(descriptorStorage) }
        pluginType = type
        let descriptor = UnsafeMutablePointer<handoff_plugin_descriptor>.allocate(capacity: 1)
        descriptor.initialize(to: handoff_plugin_descriptor())
        descriptor.pointee.abi_major = UInt32(HANDOFF_PLUGIN_ABI_MAJOR)
        // The oldest minor that has every field the plugin sets (docs/plugin-abi.md: build for the
        // oldest host you can): 1.1 for will_save, was_continued and did_update, 1.2 only for a
        // plugin that watches activities. continue_activity, a host function, is checked when called.
        descriptor.pointee.abi_minor = type.watchesActivities ? 2 : 1
        descriptor.pointee.struct_size = UInt32(MemoryLayout<handoff_plugin_descriptor>.size)
        descriptor.pointee.name = UnsafePointer(strdup(type.name))
        descriptor.pointee.version = UnsafePointer(strdup(type.version))
        descriptor.pointee.team_id = type.teamID.map { UnsafePointer(strdup($0)) }
        let types = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: type.activityTypes.count)
        for (index, activityType) in type.activityTypes.enumerated() { types[index] = UnsafePointer(strdup(activityType)) }
        descriptor.pointee.activity_types = UnsafePointer(types)
        descriptor.pointee.activity_type_count = type.activityTypes.count
        descriptor.pointee.`init` = initHandler
        descriptor.pointee.shutdown = shutdownHandler
        descriptor.pointee.restore = restoreHandler
        if type.handlesStreams {
            descriptor.pointee.write_stream = writeStreamHandler
            descriptor.pointee.read_stream = readStreamHandler
        }
        descriptor.pointee.command = commandHandler
        if type.threadSafe { descriptor.pointee.flags |= UInt32(HANDOFF_PLUGIN_THREAD_SAFE) }
        descriptor.pointee.will_save = willSaveHandler
        descriptor.pointee.was_continued = wasContinuedHandler
        descriptor.pointee.did_update = didUpdateHandler
        if type.watchesActivities { descriptor.pointee.activity_changed = activityChangedHandler }
        descriptorStorage = descriptor
        return UnsafeRawPointer(descriptor)
    }

    // The C handlers: non-generic, capturing nothing, reaching the plugin through `instance`.
    private static let initHandler: @convention(c) (UnsafePointer<handoff_host>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?, handoff_error_buffer) -> Int32 = { host, _, error in
        guarded(error) {
            guard host!.pointee.abi_major == UInt32(HANDOFF_PLUGIN_ABI_MAJOR) else {
                throw PluginFailure(HANDOFF_UNSUPPORTED, "this plugin is built for plugin ABI \(HANDOFF_PLUGIN_ABI_MAJOR), the host speaks \(host!.pointee.abi_major)")
            }
            instance = try pluginType!.init(host: PluginHost(table: host!))
        }
    }
    private static let shutdownHandler: @convention(c) (UnsafeMutableRawPointer?) -> Void = { _ in instance?.shutdown() }
    private static let restoreHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, handoff_error_buffer) -> Int32 = { _, bytes, length, error in
        guarded(error) { try instance!.restore(try activity(bytes, length)) }
    }
    private static let writeStreamHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, UnsafePointer<handoff_stream_writer>?, handoff_error_buffer) -> Int32 = { _, bytes, length, writer, error in
        guarded(error) { try instance!.writeStream(for: try activity(bytes, length), to: StreamWriter(table: writer!)) }
    }
    private static let readStreamHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, UnsafePointer<handoff_stream_reader>?, handoff_error_buffer) -> Int32 = { _, bytes, length, reader, error in
        guarded(error) { try instance!.readStream(for: try activity(bytes, length), from: StreamReader(table: reader!)) }
    }
    private static let commandHandler: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<handoff_output>?, handoff_error_buffer) -> Int32 = { _, argc, argv, output, error in
        let arguments = (0..<Int(argc)).map { String(cString: argv![$0]!) }
        return guarded(error) {
            try instance!.command(arguments) { line in output!.pointee.line(output!.pointee.context, line) }
        }
    }

    private static let willSaveHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, UnsafePointer<handoff_activity_sink>?, handoff_error_buffer) -> Int32 = { _, bytes, length, sink, error in
        guarded(error) {
            guard let refreshed = try instance!.willSave(try activity(bytes, length)) else { return }
            let encoded: [UInt8] = try refreshed.serializedBytes()
            let status = encoded.withUnsafeBufferPointer { sink!.pointee.set(sink!.pointee.context, $0.baseAddress, $0.count) }
            guard status == Int32(HANDOFF_OK.rawValue) else { throw PluginFailure.invalidArgument("the host refused the refreshed activity") }
        }
    }
    private static let wasContinuedHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, UnsafePointer<CChar>?) -> Void = { _, bytes, length, node in
        guard let continued = try? activity(bytes, length) else { return }
        instance!.wasContinued(continued, by: node.map { String(cString: $0) } ?? "")
    }
    private static let didUpdateHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int) -> Void = { _, bytes, length in
        guard let updated = try? activity(bytes, length) else { return }
        instance!.didUpdate(updated)
    }

    private static let activityChangedHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, Int32) -> Void = { _, bytes, length, change in
        guard let changed = try? activity(bytes, length) else { return }
        let kind: ActivityChange = switch UInt32(change) {
        case HANDOFF_ACTIVITY_APPEARED.rawValue: .appeared
        case HANDOFF_ACTIVITY_UPDATED.rawValue: .updated
        default: .removed
        }
        instance!.activityChanged(changed, change: kind)
    }

    private static func activity(_ bytes: UnsafePointer<UInt8>?, _ length: Int) throws -> WireActivity {
        do {
            return try WireActivity(serializedBytes: Data(bytes: bytes!, count: length))
        } catch {
            throw PluginFailure.invalidArgument("the activity is not a valid handoff.v1.Activity: \(error)")
        }
    }

    /// Runs a handler, turning a thrown error into a status and a message.
    private static func guarded(_ error: handoff_error_buffer, _ body: () throws -> Void) -> Int32 {
        do {
            try body()
            return Int32(HANDOFF_OK.rawValue)
        } catch let failure as PluginFailure {
            copy(failure.message, to: error)
            return Int32(failure.status.rawValue)
        } catch let other {
            copy("\(other)", to: error)
            return Int32(HANDOFF_FAILED.rawValue)
        }
    }

    private static func copy(_ message: String, to buffer: handoff_error_buffer) {
        handoff_error_set(buffer, message)
    }
}
