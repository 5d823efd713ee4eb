import CHandoffPlugin
import Dispatch
import Foundation
import HandoffWire
import Logging
import Synchronization
import SwiftProtobuf

/// Why a plugin call failed.
public struct PluginError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The plugin.
    public let plugin: String
    /// The status it returned (`HANDOFF_*`).
    public let status: Int32
    /// Its message.
    public let message: String

    public var description: String { "plugin \(plugin): \(message.isEmpty ? "failed with status \(status)" : message)" }
}

/// Hosts loaded plugins on a node: initializes them with the host table, registers their activity
/// types' continuation handlers, bridges their continuation streams, and runs their commands.
///
/// C calls into plugins run on a bounded set of worker threads (``PluginWorkers``), never on Swift's
/// cooperative pool or Dispatch's shared queues, because a plugin may block (and its host calls
/// block on async work).
public final class PluginRuntime: Sendable {
    /// The node the plugins serve.
    public let node: Node
    /// The plugins initialized and serving.
    public var plugins: [LoadedPlugin] { hosts.withLock { $0.map(\.plugin) } }
    let dataDirectory: URL
    let logger: Logger
    private let hosts = Mutex<[PluginHostContext]>([])
    /// The threads plugin calls run on: enough for every stream pair one peer may hold (each
    /// holds at most two, reading and writing) several times over, bounded whatever peers do.
    let workers: PluginWorkers

    /// - Parameters:
    ///   - node: The node whose activity types the plugins extend.
    ///   - dataDirectory: Each plugin gets a folder inside it, named after the plugin.
    public init(node: Node, dataDirectory: URL) {
        self.node = node
        self.dataDirectory = dataDirectory
        workers = PluginWorkers(limit: max(16, 4 * node.configuration.maxStreamsPerPeer), name: "handoff plugin")
        var logger = Logger(label: "handoff.plugins")
        logger[metadataKey: "node"] = "\(node.configuration.name)"
        self.logger = logger
    }

    /// Initializes each plugin and registers its types. A plugin whose init fails is refused (the
    /// error names its file); the others still start.
    ///
    /// - Returns: The refusals.
    @discardableResult
    public func start(_ plugins: [LoadedPlugin]) async -> [PluginLoadError] {
        var errors: [PluginLoadError] = []
        // Calls waiting for a worker make the node end stalled stream pairs, whose calls then return.
        let workers = self.workers
        await node.addStreamPressureProbe { workers.waiting }
        for plugin in plugins {
            let folder = dataDirectory.appendingPathComponent(plugin.name, isDirectory: true)
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            } catch {
                errors.append(PluginLoadError(file: plugin.file, reason: "cannot create its data folder \(folder.path): \(error)"))
                continue
            }
            let context = PluginHostContext(runtime: self, plugin: plugin, dataDirectory: folder.path)
            let status = await context.call(locked: true) { state, error in
                plugin.descriptor.pointee.`init`(context.table, &plugin.state, error)
            }
            if case .failure(let failure) = status {
                errors.append(PluginLoadError(file: plugin.file, reason: "its init failed: \(failure.message)"))
                continue
            }
            hosts.withLock { $0.append(context) }
            for type in plugin.activityTypes {
                // The plugin's team: the node hands it only activities of that team (Configuration.teamPolicy).
                await node.setContinuationHandler(forType: type, teamID: plugin.teamID) { [context] activity in
                    try await context.restore(activity)
                }
            }
            logger.info("plugin \(plugin.name) \(plugin.version) serves \(plugin.activityTypes.joined(separator: ", "))")
        }
        return errors
    }

    /// Runs a plugin's command (`handoff plugin <name> <arguments>`).
    ///
    /// - Returns: The lines it printed.
    /// - Throws: ``PluginError``.
    public func command(plugin name: String, _ arguments: [String]) async throws(PluginError) -> [String] {
        guard let context = hosts.withLock({ $0.first { $0.plugin.name == name } }) else {
            throw PluginError(plugin: name, status: Int32(HANDOFF_NOT_FOUND.rawValue), message: "no plugin named \(name) is loaded (loaded: \(plugins.map(\.name).joined(separator: ", ")))")
        }
        return try await context.command(arguments)
    }

    /// Tells every plugin the node is shutting down.
    public func shutdown() async {
        for context in hosts.withLock({ $0 }) {
            guard let shutdown = context.plugin.descriptor.pointee.shutdown else { continue }
            _ = await context.call(locked: true) { state, _ in
                shutdown(state)
                return Int32(HANDOFF_OK.rawValue)
            }
        }
    }
}

/// One plugin's side of the host: its host table, its current activities, and the calls into it.
final class PluginHostContext: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `table` and the strings it points to are allocated in init
    // and never freed or changed (plugins keep the pointer for the process's life); `activities` is
    // guarded by its Mutex.
    let runtime: PluginRuntime
    let plugin: LoadedPlugin
    let table: UnsafeMutablePointer<handoff_host>
    let activities = Mutex<[String: UserActivity]>([:])

    init(runtime: PluginRuntime, plugin: LoadedPlugin, dataDirectory: String) {
        self.runtime = runtime
        self.plugin = plugin
        table = .allocate(capacity: 1)
        table.initialize(to: handoff_host())
        table.pointee.abi_major = UInt32(HANDOFF_PLUGIN_ABI_MAJOR)
        table.pointee.abi_minor = UInt32(HANDOFF_PLUGIN_ABI_MINOR)
        table.pointee.struct_size = UInt32(MemoryLayout<handoff_host>.size)
        table.pointee.data_directory = UnsafePointer(strdup(dataDirectory))
        table.pointee.node_name = UnsafePointer(strdup(runtime.node.info.name))
        table.pointee.node_id = UnsafePointer(strdup(runtime.node.info.id))
        table.pointee.log = hostLog
        table.pointee.become_current = hostBecomeCurrent
        table.pointee.update_activity = hostUpdateActivity
        table.pointee.end_activity = hostEndActivity
        // The context lives as long as the plugin: for the process's life.
        table.pointee.context = Unmanaged.passRetained(self).toOpaque()
    }

    /// Calls into the plugin on a thread of its own, with an error buffer; `locked` serializes the call
    /// with the plugin's other locked calls unless the plugin says it is thread-safe.
    func call(
        locked: Bool,
        _ body: @escaping @Sendable (UnsafeMutableRawPointer?, handoff_error_buffer) -> Int32
    ) async -> Result<Void, PluginError> {
        let plugin = self.plugin
        // A worker thread: plugin calls may block (stream handlers for a whole transfer), and
        // libdispatch on Linux adds workers to a blocked global queue only after a delay.
        return await runtime.workers.run {
                let serialize = locked && plugin.descriptor.pointee.flags & UInt32(HANDOFF_PLUGIN_THREAD_SAFE) == 0
                if serialize { plugin.lock.lock() }
                let message = UnsafeMutablePointer<CChar>.allocate(capacity: 1024)
                message.initialize(repeating: 0, count: 1024)
                let status = body(plugin.state, handoff_error_buffer(message: message, capacity: 1024))
                let text = String(cString: message)
                message.deallocate()
                if serialize { plugin.lock.unlock() }
                return status == Int32(HANDOFF_OK.rawValue)
                    ? .success(()) : .failure(PluginError(plugin: plugin.name, status: status, message: text))
        }
    }

    /// The continuation handler for the plugin's types: restore, then streams when the activity has them.
    func restore(_ activity: ContinuedActivity) async throws {
        let bytes: [UInt8] = try activity.wire.serializedBytes()
        let restore = plugin.descriptor.pointee.restore!
        try await call(locked: true) { state, error in
            bytes.withUnsafeBufferPointer { restore(state, $0.baseAddress, $0.count, error) }
        }.get()
        if activity.supportsContinuationStreams && plugin.handlesStreams {
            let streams = try await runtime.node.openStreams(for: activity)
            try await runStreams(streams, activity: bytes)
        }
    }

    /// Runs the plugin's stream handlers on a pair: write_stream feeds the output (finished when it
    /// returns), read_stream drains the input. A missing handler writes nothing / discards the input.
    func runStreams(_ streams: ContinuationStreams, activity bytes: [UInt8]) async throws {
        let writeHandler = plugin.descriptor.pointee.write_stream
        let readHandler = plugin.descriptor.pointee.read_stream
        let writer = StreamWriterBridge(streams.output)
        // A half the pair's direction closed costs no call (and no worker).
        async let wrote: Result<Void, PluginError> = {
            guard let writeStream = writeHandler, streams.output.enabled else { return .success(()) }
            return await call(locked: false) { state, error in
                var table = writer.table
                return bytes.withUnsafeBufferPointer { writeStream(state, $0.baseAddress, $0.count, &table, error) }
            }
        }()
        async let read: Result<Void, PluginError> = {
            guard streams.input.enabled else { return .success(()) }
            guard let readStream = readHandler else {
                do throws(HandoffError) { _ = try await streams.input.readAll() } catch {
                    return .failure(PluginError(plugin: plugin.name, status: Int32(HANDOFF_STREAM_FAILED.rawValue), message: "\(error)"))
                }
                return .success(())
            }
            let reader = StreamReaderBridge(streams.input)
            // No worker is held for a peer that has sent nothing yet (one that never sends costs none).
            await reader.untilSomethingArrives()
            let result = await call(locked: false) { state, error in
                var table = reader.table
                return bytes.withUnsafeBufferPointer { readStream(state, $0.baseAddress, $0.count, &table, error) }
            }
            await reader.close()
            return result
        }()
        let writeResult = await wrote
        switch writeResult {
        case .success: try await streams.output.finish()
        case .failure(let error): await streams.cancel(reason: error.message)
        }
        let readResult = await read
        try writeResult.get()
        try readResult.get()
    }

    func command(_ arguments: [String]) async throws(PluginError) -> [String] {
        guard let command = plugin.descriptor.pointee.command else {
            throw PluginError(plugin: plugin.name, status: Int32(HANDOFF_UNSUPPORTED.rawValue), message: "plugin \(plugin.name) takes no commands")
        }
        let output = LineCollector()
        try await call(locked: true) { state, error in
            var argv: [UnsafePointer<CChar>?] = arguments.map { UnsafePointer(strdup($0)) }
            defer { for pointer in argv { free(UnsafeMutablePointer(mutating: pointer)) } }
            var sink = output.table
            return argv.withUnsafeMutableBufferPointer { command(state, Int32(arguments.count), $0.baseAddress, &sink, error) }
        }.get()
        return output.lines
    }

    // MARK: Host functions, called by the plugin (from its own threads)

    func becomeCurrent(_ bytes: [UInt8]) async throws -> String {
        let wire = try WireActivity(serializedBytes: bytes)
        guard plugin.activityTypes.contains(wire.activityType) else {
            throw HandoffError(.invalidActivityType, "plugin \(plugin.name) does not declare \(wire.activityType)", activityType: wire.activityType)
        }
        let activity = try UserActivity(activityType: wire.activityType)
        try apply(wire, to: activity)
        // The context lives as long as the process; the activity holds its delegate weakly.
        activity.delegate = self
        try await activity.becomeCurrent(on: runtime.node)
        activities.withLock { $0[activity.id] = activity }
        return activity.id
    }

    func update(_ bytes: [UInt8]) throws {
        let wire = try WireActivity(serializedBytes: bytes)
        guard let activity = activities.withLock({ $0[wire.activityID] }) else {
            throw HandoffError(.activityNotFound, "plugin \(plugin.name) has no current activity \(wire.activityID)")
        }
        try apply(wire, to: activity)
    }

    func end(_ id: String, invalidate: Bool) async -> Bool {
        guard let activity = activities.withLock({ $0.removeValue(forKey: id) }) else { return false }
        if invalidate { await activity.invalidate() } else { await activity.resignCurrent() }
        return true
    }

    /// Copies what a plugin may set from a wire activity. Plugin activities are always eligible for
    /// handoff (end_activity withdraws them); the team defaults to the plugin's.
    private func apply(_ wire: WireActivity, to activity: UserActivity) throws {
        activity.title = wire.title
        activity.userInfo = try Handoff.userInfo(fromWire: wire.userInfo)
        activity.requiredUserInfoKeys = Set(wire.requiredUserInfoKeys)
        activity.webpageURL = wire.webpageURL.isEmpty ? nil : URL(string: wire.webpageURL)
        activity.keywords = Set(wire.keywords)
        activity.expirationDate = wire.hasExpiration ? wire.expiration.date : nil
        activity.supportsContinuationStreams = wire.supportsContinuationStreams
        activity.teamID = wire.teamID.isEmpty ? plugin.teamID : wire.teamID
    }
}

/// Hands continuation streams opened to a plugin's activity to the plugin.
extension PluginHostContext: UserActivityDelegate {
    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        guard plugin.handlesStreams else {
            await streams.cancel(reason: "plugin \(plugin.name) does not handle streams")
            return
        }
        let bytes: [UInt8] = (try? activity.wire(origin: runtime.node.info.wire, defaultTeamID: plugin.teamID).serializedBytes()) ?? []
        do {
            try await runStreams(streams, activity: bytes)
        } catch {
            runtime.logger.warning("plugin \(plugin.name) streams for \(activity.activityType): \(error)")
        }
    }
}

// MARK: - Blocking bridges for C

/// Runs async work from a plugin's (non-cooperative) thread and waits for it.
func waitFor<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
}

func write(_ message: String, to buffer: handoff_error_buffer) {
    handoff_error_set(buffer, message)
}

private func context(_ pointer: UnsafeMutableRawPointer?) -> PluginHostContext {
    Unmanaged<PluginHostContext>.fromOpaque(pointer!).takeUnretainedValue()
}

private let hostLog: @convention(c) (UnsafeMutableRawPointer?, handoff_log_level, UnsafePointer<CChar>?) -> Void = { pointer, level, message in
    let host = context(pointer)
    let text = message.map { String(cString: $0) } ?? ""
    let logLevel: Logger.Level = switch level {
    case HANDOFF_LOG_DEBUG: .debug
    case HANDOFF_LOG_WARNING: .warning
    case HANDOFF_LOG_ERROR: .error
    default: .info
    }
    host.runtime.logger.log(level: logLevel, "\(text)", metadata: ["plugin": "\(host.plugin.name)"])
}

private let hostBecomeCurrent: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<CChar>?, Int, handoff_error_buffer) -> Int32 = { pointer, bytes, length, idOut, capacity, error in
    let host = context(pointer)
    let activity = Array(UnsafeBufferPointer(start: bytes, count: length))
    switch waitFor({ try await host.becomeCurrent(activity) }) {
    case .success(let id):
        if let idOut, capacity > id.utf8.count {
            write(id, to: handoff_error_buffer(message: idOut, capacity: capacity))
        }
        return Int32(HANDOFF_OK.rawValue)
    case .failure(let failure):
        write("\(failure)", to: error)
        return Int32(failure is BinaryDecodingError ? HANDOFF_INVALID_ARGUMENT.rawValue : HANDOFF_FAILED.rawValue)
    }
}

private let hostUpdateActivity: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<UInt8>?, Int, handoff_error_buffer) -> Int32 = { pointer, bytes, length, buffer in
    let host = context(pointer)
    do {
        try host.update(Array(UnsafeBufferPointer(start: bytes, count: length)))
        return Int32(HANDOFF_OK.rawValue)
    } catch {
        write("\(error)", to: buffer)
        return Int32(HANDOFF_NOT_FOUND.rawValue)
    }
}

private let hostEndActivity: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, Int32) -> Int32 = { pointer, id, invalidate in
    let host = context(pointer)
    let activityID = id.map { String(cString: $0) } ?? ""
    let ended = (try? waitFor({ await host.end(activityID, invalidate: invalidate != 0) }).get()) ?? false
    return Int32(ended ? HANDOFF_OK.rawValue : HANDOFF_NOT_FOUND.rawValue)
}

/// Collects a command's output lines.
final class LineCollector: @unchecked Sendable {
    // Invariant: `collected` is only touched under `lock`.
    private let lock = NSLock()
    private var collected: [String] = []
    var lines: [String] { lock.withLock { collected } }

    var table: handoff_output {
        handoff_output(context: Unmanaged.passUnretained(self).toOpaque()) { pointer, text in
            let collector = Unmanaged<LineCollector>.fromOpaque(pointer!).takeUnretainedValue()
            let line = text.map { String(cString: $0) } ?? ""
            collector.lock.withLock { collector.collected.append(line) }
        }
    }
}

/// A `handoff_stream_writer` over a continuation stream's output: write blocks the plugin's thread
/// until the bytes are accepted (flow control).
final class StreamWriterBridge: @unchecked Sendable {
    // Invariant: `output` is Sendable; the bridge only forwards to it.
    let output: ContinuationOutputStream
    init(_ output: ContinuationOutputStream) { self.output = output }

    var table: handoff_stream_writer {
        handoff_stream_writer(
            context: Unmanaged.passUnretained(self).toOpaque(),
            write: { pointer, bytes, length in
                let bridge = Unmanaged<StreamWriterBridge>.fromOpaque(pointer!).takeUnretainedValue()
                // No copy of the plugin's buffer: this call blocks until every byte was taken.
                let borrowed = BorrowedBytes(UnsafeRawBufferPointer(start: bytes, count: length))
                let output = bridge.output
                switch waitFor({ try await output.write(borrowed.buffer) }) {
                case .success: return Int32(HANDOFF_OK.rawValue)
                case .failure: return Int32(HANDOFF_STREAM_FAILED.rawValue)
                }
            },
            set_expected_length: { pointer, length in
                Unmanaged<StreamWriterBridge>.fromOpaque(pointer!).takeUnretainedValue().output.expectedLength = length
            })
    }
}

/// A plugin's buffer, lent to the host for the duration of a blocking call.
struct BorrowedBytes: @unchecked Sendable {
    // Invariant for @unchecked Sendable: used only while the plugin's call that lent it blocks.
    let buffer: UnsafeRawBufferPointer
    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }
}

/// A `handoff_stream_reader` over a continuation stream's input. A task pumps chunks into a small
/// queue; read blocks the plugin's thread on it. The queue holds at most a few chunks, so the
/// stream's flow control still bounds memory.
final class StreamReaderBridge: @unchecked Sendable {
    // Invariant: `items`, `current`, `waitingProducer`, `firstArrival` are only touched with `condition` locked.
    enum Item { case chunk(Data), end, failed(String) }
    private let condition = NSCondition()
    private var items: [Item] = []
    private var current = Data()
    /// The pump, waiting for room: resumed with `true` when there is, `false` when the bridge closed.
    private var waitingProducer: CheckedContinuation<Bool, Never>?
    /// Waiting in ``untilSomethingArrives()`` for the first item.
    private var firstArrival: CheckedContinuation<Void, Never>?
    private var closed = false
    private var reachedEnd = false
    private let capacity = 4
    private let input: ContinuationInputStream

    init(_ input: ContinuationInputStream) {
        self.input = input
        Task { [self] in
            do throws(HandoffError) {
                for try await chunk in input {
                    guard await put(.chunk(chunk)) else { return }
                }
                _ = await put(.end)
            } catch {
                _ = await put(.failed(error.description))
            }
        }
    }

    /// The plugin's read handler returned: stop pumping, and cancel the stream if it was not read to
    /// the end (so the writer on the other side stops instead of waiting for credit).
    func close() async {
        let (producer, complete): (CheckedContinuation<Bool, Never>?, Bool) = {
            condition.lock()
            defer { condition.unlock() }
            closed = true
            items.removeAll()
            defer { waitingProducer = nil }
            return (waitingProducer, reachedEnd)
        }()
        producer?.resume(returning: false)
        if !complete { await input.node.cancelStream(input.key, reason: "the plugin stopped reading before the end") }
    }

    /// Returns once the first chunk, the end, or a failure has arrived.
    func untilSomethingArrives() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if items.isEmpty && !closed {
                firstArrival = continuation
                condition.unlock()
            } else {
                condition.unlock()
                continuation.resume()
            }
        }
    }

    /// Queues an item for the reader; `false` once the bridge is closed.
    private func put(_ item: Item) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            condition.lock()
            guard !closed else {
                condition.unlock()
                continuation.resume(returning: false)
                return
            }
            items.append(item)
            if let waiter = firstArrival {
                firstArrival = nil
                waiter.resume()
            }
            condition.signal()
            if items.count >= capacity {
                // Resumed by read() when space frees, or by close().
                waitingProducer = continuation
                condition.unlock()
            } else {
                condition.unlock()
                continuation.resume(returning: true)
            }
        }
    }

    /// Copies up to `capacity` bytes into `buffer`; 0 at the verified end; -1 on failure.
    func read(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int, error: handoff_error_buffer) -> Int64 {
        condition.lock()
        defer { condition.unlock() }
        while current.isEmpty {
            while items.isEmpty { condition.wait() }
            let item = items.removeFirst()
            if let producer = waitingProducer, items.count < self.capacity {
                waitingProducer = nil
                producer.resume(returning: true)
            }
            switch item {
            case .chunk(let chunk): current = chunk
            case .end:
                items.insert(.end, at: 0)
                reachedEnd = true
                return 0
            case .failed(let message):
                items.insert(.failed(message), at: 0)
                write(message, to: error)
                return -1
            }
        }
        let count = min(capacity, current.count)
        current.copyBytes(to: buffer, count: count)
        current = current.dropFirst(count)
        if current.isEmpty { current = Data() }
        return Int64(count)
    }

    var table: handoff_stream_reader {
        handoff_stream_reader(context: Unmanaged.passUnretained(self).toOpaque()) { pointer, buffer, capacity, error in
            Unmanaged<StreamReaderBridge>.fromOpaque(pointer!).takeUnretainedValue().read(into: buffer!, capacity: capacity, error: error)
        }
    }
}
