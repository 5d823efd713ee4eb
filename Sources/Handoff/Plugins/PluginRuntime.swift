import CHandoffPlugin
import Dispatch
import Foundation
import HandoffWire
import Logging
import Synchronization
import SwiftProtobuf
import ZeroMQ

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
    let hosts = Mutex<[PluginHostContext]>([])
    /// The tasks that tell plugins of their types' activities on the bus (activity_changed).
    let watches = Mutex<[Task<Void, Never>]>([])
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
    public func start(_ plugins: [LoadedPlugin]) async -> [HandoffError] {
        var errors: [HandoffError] = []
        // did-update goes to the plugin that restored the activity (unless the node has a delegate).
        await node.setDelegateIfNone(self)
        // Calls waiting for a worker make the node end stalled stream pairs, whose calls then return.
        let workers = self.workers
        await node.addStreamPressureProbe { workers.waiting }
        for plugin in plugins {
            let folder = dataDirectory.appendingPathComponent(plugin.name, isDirectory: true)
            do {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            } catch {
                errors.append(.pluginRefused(file: plugin.file, reason: "cannot create its data folder \(folder.path): \(error)", cause: error))
                continue
            }
            let context = PluginHostContext(runtime: self, plugin: plugin, dataDirectory: folder.path)
            let status = await context.call(locked: true) { state, error in
                plugin.descriptor.pointee.`init`(context.table, &plugin.state, error)
            }
            if case .failure(let failure) = status {
                errors.append(.pluginRefused(file: plugin.file, reason: "its init failed: \(failure.message)", cause: failure))
                continue
            }
            hosts.withLock { $0.append(context) }
            for type in plugin.activityTypes {
                // The plugin's team: the node hands it only activities of that team (Configuration.teamPolicy).
                await node.setContinuationHandler(forType: type, teamID: plugin.teamID) { [context] activity in
                    try await context.restore(activity)
                }
            }
            if plugin.descriptor.pointee.activity_changed != nil { watchActivities(for: context) }
            logger.info("plugin \(plugin.name) \(plugin.version) serves \(plugin.activityTypes.joined(separator: ", "))")
        }
        return errors
    }

    /// Runs a plugin's command (`handoff plugin <name> <arguments>`).
    ///
    /// - Returns: The lines it printed.
    /// - Throws: ``HandoffError`` with ``HandoffError/Code-swift.struct/pluginFailed``.
    public func command(plugin name: String, _ arguments: [String]) async throws(HandoffError) -> [String] {
        guard let context = hosts.withLock({ $0.first { $0.plugin.name == name } }) else {
            throw .pluginFailed(plugin: name, status: Int32(HANDOFF_NOT_FOUND.rawValue), message: "no plugin named \(name) is loaded (loaded: \(plugins.map(\.name).joined(separator: ", ")))")
        }
        return try await context.command(arguments)
    }

    /// activity_changed (ABI 1.2): the activities of the plugin's types, as they appear, change and
    /// go on the bus, one call at a time, in order.
    private func watchActivities(for context: PluginHostContext) {
        let node = self.node
        let types = Set(context.plugin.activityTypes)
        let task = Task(executorPreference: EventLoops.shared) {
            // A plugin slower than the bus can fall more than the node's discover backlog behind:
            // its stream then ends, and a new one starts over with every activity known (each
            // appeared again), until the node stops.
            while !Task.isCancelled {
                for await event in await node.discover(ActivityFilter(typePrefixes: Array(types))) where types.contains(event.activity.activityType) {
                    await context.activityChanged(event)
                }
                if await node.hasStopped { return }
            }
        }
        watches.withLock { $0.append(task) }
    }

    /// Tells every plugin the node is shutting down: its `shutdown` is its last call, made once
    /// every other call into it has returned. From then on calls into it are refused (a
    /// ``HandoffError/Code-swift.struct/pluginFailed`` error) and never reach it.
    ///
    /// Stop the node first: its stream pairs then end, and the stream handlers blocked on them
    /// return.
    ///
    /// - Parameter grace: How long to wait for a plugin's calls still running. A plugin whose
    ///   calls outlive it is not shut down (its state would be freed under them): the host logs a
    ///   warning and leaves it as it is until the process exits.
    public func shutdown(grace: Duration = .seconds(5)) async {
        for watch in watches.withLock({ $0 }) { watch.cancel() }
        for context in hosts.withLock({ $0 }) {
            await context.shutDown(grace: grace)
        }
    }
}

/// One plugin's side of the host: its host table, its current activities, and the calls into it.
final class PluginHostContext: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `table` and the strings it points to are allocated in init
    // and never freed or changed (plugins keep the pointer for the process's life); `activities` is
    // guarded by its Mutex, as is `streamFailureLog`.
    let runtime: PluginRuntime
    let plugin: LoadedPlugin
    let table: UnsafeMutablePointer<handoff_host>
    let activities = Mutex<[String: UserActivity]>([:])
    /// The calls inside the plugin, and whether shutdown closed it to new ones.
    let gate = Mutex(PluginCallGate())
    /// Which of its streams' failures are logged (``RefusalLog``'s once a minute per kind).
    let streamFailureLog = Mutex(RefusalLog())
    /// The plugin's data folder; continued documents are kept in its `documents` folder.
    let dataDirectory: String

    init(runtime: PluginRuntime, plugin: LoadedPlugin, dataDirectory: String) {
        self.runtime = runtime
        self.plugin = plugin
        self.dataDirectory = dataDirectory
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
        table.pointee.needs_save = hostNeedsSave
        table.pointee.continue_activity = hostContinueActivity
        // The context lives as long as the plugin: for the process's life.
        table.pointee.context = Unmanaged.passRetained(self).toOpaque()
    }

    /// Calls into the plugin on a thread of its own, with an error buffer; `locked` serializes the call
    /// with the plugin's other locked calls unless the plugin says it is thread-safe.
    func call(
        locked: Bool,
        _ body: @escaping @Sendable (UnsafeMutableRawPointer?, handoff_error_buffer) -> Int32
    ) async -> Result<Void, HandoffError> {
        let plugin = self.plugin
        // A worker thread: plugin calls may block (stream handlers for a whole transfer), and
        // libdispatch on Linux adds workers to a blocked global queue only after a delay.
        return await runtime.workers.run { [self] in
            // Entered on the worker, just before the plugin: a call that waited for a worker
            // while shutdown began never reaches a plugin whose state is freed.
            guard gate.withLock({ $0.enter() }) else {
                return .failure(.pluginFailed(plugin: plugin.name, status: Int32(HANDOFF_FAILED.rawValue), message: "the plugin has shut down"))
            }
            defer { gate.withLock { $0.leave() } }
            return Self.callNow(plugin, locked: locked, body)
        }
    }

    /// Makes the call on this thread: `locked` takes the plugin's lock unless it is thread-safe.
    private static func callNow(
        _ plugin: LoadedPlugin, locked: Bool,
        _ body: (UnsafeMutableRawPointer?, handoff_error_buffer) -> Int32
    ) -> Result<Void, HandoffError> {
        let serialize = locked && plugin.descriptor.pointee.flags & UInt32(HANDOFF_PLUGIN_THREAD_SAFE) == 0
        if serialize { plugin.lock.lock() }
        let message = UnsafeMutablePointer<CChar>.allocate(capacity: 1024)
        message.initialize(repeating: 0, count: 1024)
        let status = body(plugin.state, handoff_error_buffer(message: message, capacity: 1024))
        let text = String(cString: message)
        message.deallocate()
        if serialize { plugin.lock.unlock() }
        return status == Int32(HANDOFF_OK.rawValue)
            ? .success(()) : .failure(.pluginFailed(plugin: plugin.name, status: status, message: text))
    }

    /// Closes the plugin to new calls, waits up to `grace` for those running to return, then
    /// calls its `shutdown` (the last call). Calls still running after `grace` keep the plugin as
    /// it is: freeing its state under them would be worse than leaving it until the process exits.
    func shutDown(grace: Duration) async {
        guard gate.withLock({ $0.close() }) else { return }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: grace)
        // Polled: shutdown happens once in a process's life, and a few milliseconds late is nothing.
        // Not Task.sleep: a shutdown in a cancelled task (a command interrupted) still waits.
        var running = gate.withLock { $0.running }
        while running > 0, clock.now < deadline {
            await withCheckedContinuation { resumed in
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(5)) { resumed.resume() }
            }
            running = gate.withLock { $0.running }
        }
        guard running == 0 else {
            runtime.logger.warning("plugin \(plugin.name) still has \(running) call(s) running \(grace) after shutdown began; it is not shut down (its state stays until the process exits)")
            return
        }
        guard let shutdown = plugin.descriptor.pointee.shutdown else { return }
        let plugin = self.plugin
        _ = await runtime.workers.run {
            Self.callNow(plugin, locked: true) { state, _ in
                shutdown(state)
                return Int32(HANDOFF_OK.rawValue)
            }
        }
    }

    /// The continuation handler for the plugin's types: restore, then streams when the activity has them.
    func restore(_ activity: ContinuedActivity) async throws {
        // A document activity: the plugin gets the document opened here (in place on shared
        // storage, or this node's copy), its URL in place of the originator's.
        let bytes: [UInt8]
        if activity.document != nil {
            let folder = URL(fileURLWithPath: dataDirectory).appendingPathComponent("documents", isDirectory: true)
            let opened = try await runtime.node.openDocument(of: activity, into: folder)
            var wire = activity.wire
            wire.document.url = opened.url.absoluteString
            bytes = try wire.serializedBytes()
        } else {
            bytes = activity.wireBytes
        }
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
        async let wrote: Result<Void, HandoffError> = {
            guard let writeStream = writeHandler, streams.output.enabled else { return .success(()) }
            return await call(locked: false) { state, error in
                var table = writer.table
                return bytes.withUnsafeBufferPointer { writeStream(state, $0.baseAddress, $0.count, &table, error) }
            }
        }()
        async let read: Result<Void, HandoffError> = {
            guard streams.input.enabled else { return .success(()) }
            guard let readStream = readHandler else {
                do throws(HandoffError) { _ = try await streams.input.readAll() } catch {
                    return .failure(.pluginFailed(plugin: plugin.name, status: Int32(HANDOFF_STREAM_FAILED.rawValue), message: "\(error)"))
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

    func command(_ arguments: [String]) async throws(HandoffError) -> [String] {
        guard let command = plugin.descriptor.pointee.command else {
            throw .pluginFailed(plugin: plugin.name, status: Int32(HANDOFF_UNSUPPORTED.rawValue), message: "it takes no commands")
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

    /// Copies what a plugin may set from a wire activity (become_current, update_activity).
    /// Plugin activities are always eligible for handoff (end_activity withdraws them); the team
    /// defaults to the plugin's.
    func apply(_ wire: WireActivity, to activity: UserActivity) throws {
        try applySaved(wire, to: activity)
        activity.supportsContinuationStreams = wire.supportsContinuationStreams
        activity.teamID = wire.teamID.isEmpty ? plugin.teamID : wire.teamID
        // A document: the plugin names the file (and its version); the host hashes it when the
        // plugin leaves the hash out.
        if wire.hasDocument {
            guard let url = URL(string: wire.document.url), url.isFileURL else {
                throw HandoffError(.invalidConfiguration, "plugin \(plugin.name): the document is not a file:// URL: \(wire.document.url)", activityType: wire.activityType)
            }
            activity.document = wire.document.sha256.isEmpty
                ? try DocumentReference.file(at: url, version: wire.document.version)
                : try DocumentReference(wire: wire.document, activityType: wire.activityType)
        } else {
            activity.document = nil
        }
    }

    /// Copies what will_save may change (docs/plugin-abi.md): the title, userInfo, required keys,
    /// keywords, webpage URL and expiration. The rest stays as it was: a plugin that hands back an
    /// activity it built anew, with only those, does not take its document or streams away.
    func applySaved(_ wire: WireActivity, to activity: UserActivity) throws {
        activity.title = wire.title
        activity.userInfo = try Handoff.userInfo(fromWire: wire.userInfo)
        activity.requiredUserInfoKeys = Set(wire.requiredUserInfoKeys)
        activity.webpageURL = wire.webpageURL.isEmpty ? nil : URL(string: wire.webpageURL)
        activity.keywords = Set(wire.keywords)
        activity.expirationDate = wire.hasExpiration ? wire.expiration.date : nil
    }
}
