import Foundation
import HandoffExecutor
import Handoff
import Logging
import ServiceLifecycle
import UnixSignals
import ZeroMQ

/// A program the end-to-end tests start as a separate process.
///
///     HandoffTestNode broker
///         Runs a broker on ephemeral loopback ports; prints `READY <frontend> <backend>`.
///     HandoffTestNode advertise <frontend> <backend> <interval-ms> <activity-type> <count>
///         Joins the bus through the broker and makes <count> activities current (userInfo:
///         everyKindOfUserInfo); prints `READY <id> ...`.
///     HandoffTestNode stream-source <frontend> <backend> <bytes> [<bytes-per-second>]
///         Makes a streaming activity current; its delegate writes <bytes> of BulkPattern to every
///         stream opened to it (no faster than <bytes-per-second>, if given). Prints
///         `READY <id> <continuation-endpoint>`.
///     HandoffTestNode stream-sink <frontend> <backend> <activity-id>
///         Continues the activity, opens streams, reads to the end checking every byte against
///         BulkPattern; prints `PROGRESS <bytes>` every 8 MiB, then `DONE <bytes> <peak-RSS-KiB>
///         <seconds>` (exit 0) or `FAILED <code>: <message>` (exit 1).
///     HandoffTestNode agent <frontend> <backend> <plugin-folder> <data-folder>
///         Hosts the plugins in <plugin-folder>; prints `LOADED <name>` / `REFUSED <error>` per
///         plugin, then `READY <node-id>`. Then reads commands on standard input, one a line, and
///         answers each with output lines and a last line `OK` or `ERR <message>`:
///           plugin <name> <args...>   runs a plugin command
///           continue <type>           continues the newest known activity of <type>
///           wait <type>               waits (up to 5 s) until an activity of <type> is known
///
///     HandoffTestNode broker-stop-race <rounds>
///         Stops a broker as a subscriber that reads nothing drops its connection, <rounds> times;
///         prints `NO ABORT <rounds>` if libzmq did not abort the process (BrokerStopRace).
///
///     HandoffTestNode watch -- <program> <arguments...>
///         Runs a program that ends with the test process, whatever ends that (WatchedChild).
///
/// All but stream-sink, agent and watch run until SIGTERM or SIGINT (graceful: activities are withdrawn) or until killed.
@main
struct HandoffTestNode {
    /// Runs as the `handoff` command does: its tasks on the event loops (task executor preference).
    static func main() async throws {
        // Before anything else, on the main thread (the program's parent-death signal is tied to it).
        if CommandLine.arguments.count > 2, CommandLine.arguments[1] == "watch", CommandLine.arguments[2] == "--" {
            WatchedChild.run(Array(CommandLine.arguments.dropFirst(3)))
        }
        ParentWatch.exitWithParentIfAsked()
        try await withTaskExecutorPreference(EventLoops.shared) { try await run() }
    }

    static func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        let arguments = Array(CommandLine.arguments.dropFirst())
        let logger = Logger(label: "handoff.test-node")
        switch arguments.first {
        case "broker" where arguments.count == 1 || arguments.count == 3:
            let context = try Context()
            let (frontend, backend) = arguments.count == 3 ? (arguments[1], arguments[2]) : ("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
            let broker = try Broker.start(Broker.Configuration(frontend: frontend, backend: backend), context: context)
            announce("READY \(broker.frontendEndpoint) \(broker.backendEndpoint)")
            let group = ServiceGroup(services: [broker], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            try await group.run()
        case "advertise" where arguments.count == 6:
            let interval = Duration.milliseconds(Int(arguments[3]) ?? 200)
            var configuration = Node.Configuration(
                name: "advertiser-\(getpid())", bus: brokerBus(arguments[1], arguments[2]),
                advertiseInterval: interval)
            configuration.lease = interval * 3
            let node = try Node(configuration: configuration)
            var ids: [String] = []
            for index in 0..<(Int(arguments[5]) ?? 1) {
                let activity = try UserActivity(activityType: arguments[4])
                activity.title = "Activity \(index) of \(getpid())"
                activity.userInfo = everyKindOfUserInfo
                activity.requiredUserInfoKeys = ["string"]
                try await activity.becomeCurrent(on: node)
                ids.append(activity.id)
            }
            try await runAnnouncingReady(node, "READY " + ids.joined(separator: " "), logger: logger)
        case "stream-source" where arguments.count == 4 || arguments.count == 5:
            let node = try Node(configuration: Node.Configuration(
                name: "source-\(getpid())", bus: brokerBus(arguments[1], arguments[2])))
            let activity = try UserActivity(activityType: "org.handoff.test.bulk")
            activity.supportsContinuationStreams = true
            let source = BulkSource(bytes: Int(arguments[3]) ?? 0, bytesPerSecond: arguments.count == 5 ? Int(arguments[4]) : nil)
            activity.delegate = source
            try await activity.becomeCurrent(on: node)
            try await runAnnouncingReady(node, "READY \(activity.id) \(node.continuationEndpoint)", logger: logger)
        case "stream-sink" where arguments.count == 4:
            let configuration = Node.Configuration(
                name: "sink-\(getpid())", bus: brokerBus(arguments[1], arguments[2]))
            let outcome = try await Node.withRunning(configuration) { node in
                await node.setContinuationHandler(forType: "org.handoff.test.bulk") { _ in }
                return await sink(node: node, activityID: arguments[3])
            }
            announce(outcome)
            exit(outcome.hasPrefix("DONE") ? 0 : 1)
        case "usable-processors" where arguments.count == 1:
            // What the event loops and reply polling size themselves by, in this process's cgroups.
            announce("\(UsableProcessors.count)")
        case "broker-stop-race" where arguments.count == 2:
            try await brokerStopRace(rounds: Int(arguments[1]) ?? 1)
        case "agent" where arguments.count == 5:
            try await agent(frontend: arguments[1], backend: arguments[2], pluginFolder: arguments[3], dataFolder: arguments[4])
        default:
            FileHandle.standardError.write(Data("usage: HandoffTestNode broker | advertise <frontend> <backend> <interval-ms> <type> <count> | stream-source <frontend> <backend> <bytes> | stream-sink <frontend> <backend> <id>\n".utf8))
            exit(2)
        }
    }
}

/// The bus of a frontend and a backend argument; comma-separated lists of them name a broker pair.
func brokerBus(_ frontends: String, _ backends: String) -> Node.Configuration.Bus {
    let pairs = zip(frontends.split(separator: ","), backends.split(separator: ",")).map {
        Node.Configuration.BrokerEndpoints(frontend: String($0), backend: String($1))
    }
    return pairs.count == 1 ? .broker(frontend: pairs[0].frontend, backend: pairs[0].backend) : .brokers(pairs)
}

/// Runs `node` until SIGTERM or SIGINT, and says `ready` once it runs: the group's signal
/// handlers are in place by then, so a test that signals on seeing the line stops it gracefully
/// (said earlier, a SIGTERM could kill the process before the handlers exist).
func runAnnouncingReady(_ node: Node, _ ready: String, logger: Logger) async throws {
    let group = ServiceGroup(services: [node], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        await node.untilRunning()
        announce(ready)
        try await tasks.waitForAll()
    }
}

/// Writes a line to standard output at once (the tests read it through a pipe).
func announce(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Writes BulkPattern to every stream opened to the activity.
final class BulkSource: UserActivityDelegate {
    let bytes: Int
    let bytesPerSecond: Int?
    let pattern = BulkPattern()
    init(bytes: Int, bytesPerSecond: Int? = nil) {
        self.bytes = bytes
        self.bytesPerSecond = bytesPerSecond
    }

    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        streams.output.expectedLength = UInt64(bytes)
        var written = 0
        var index = 0
        let started = ContinuousClock.now
        do {
            while written < bytes {
                let block = pattern.block(index)
                let count = min(block.count, bytes - written)
                try await streams.output.write(block[0..<count])
                written += count
                index += 1
                if let bytesPerSecond {
                    // Paced: block until the time these bytes may have taken at the rate.
                    let due = started + .seconds(Double(written) / Double(bytesPerSecond))
                    if due > .now { try? await Task.sleep(until: due) }
                }
            }
            try await streams.output.finish()
        } catch {
            FileHandle.standardError.write(Data("source: \(error)\n".utf8))
        }
    }
}

/// Continues the activity and reads its stream to the end, checking every byte.
func sink(node: Node, activityID: String) async -> String {
    let pattern = BulkPattern()
    do throws(HandoffError) {
        var found: DiscoveredActivity?
        for _ in 0..<500 where found == nil {
            found = await node.activities().first { $0.id == activityID }
            if found == nil { try? await Task.sleep(for: .milliseconds(10)) }
        }
        guard let found else { return "FAILED not found: activity \(activityID) never appeared" }
        guard case .restored(let continued) = try await node.continueActivity(found) else { return "FAILED no handler" }
        let started = ContinuousClock.now
        let streams = try await node.openStreams(for: continued)
        var received = 0
        var nextReport = 8 << 20
        for try await chunk in streams.input {
            guard pattern.matches(chunk, at: received) else {
                return "FAILED corrupted: bytes at offset \(received) differ from the pattern"
            }
            received += chunk.count
            if received >= nextReport {
                announce("PROGRESS \(received)")
                nextReport += 8 << 20
            }
        }
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return "DONE \(received) \(peakResidentKiB()) \(seconds)"
    } catch {
        return "FAILED \(error.code): \(error.message)"
    }
}

/// Hosts plugins and takes commands on standard input (see the usage above).
func agent(frontend: String, backend: String, pluginFolder: String, dataFolder: String) async throws {
    let configuration = Node.Configuration(name: "agent-\(getpid())", bus: .broker(frontend: frontend, backend: backend))
    try await Node.withRunning(configuration) { node in
        let (plugins, refused) = PluginLoader.loadAll(from: [pluginFolder])
        let runtime = PluginRuntime(node: node, dataDirectory: URL(fileURLWithPath: dataFolder))
        let failed = await runtime.start(plugins)
        for plugin in runtime.plugins { announce("LOADED \(plugin.name)") }
        for error in refused + failed { announce("REFUSED \(error)") }
        announce("READY \(node.id)")
        for await line in standardInputLines() {
            let words = line.split(separator: " ").map(String.init)
            guard let verb = words.first else { continue }
            do {
                switch verb {
                case "plugin" where words.count >= 3:
                    for output in try await runtime.command(plugin: words[1], Array(words.dropFirst(2))) { announce(output) }
                case "continue" where words.count == 2:
                    switch try await node.continueActivity(type: words[1]) {
                    case .restored(let activity): announce("CONTINUED \(activity.title)")
                    case .webpage(let url): announce("WEBPAGE \(url)")
                    }
                case "known" where words.count == 2:
                    for title in await node.activities().filter({ $0.activityType == words[1] }).map(\.title).sorted() { announce(title) }
                case "wait" where words.count == 2:
                    var known = false
                    for _ in 0..<250 where !known {
                        known = await node.activities().contains { $0.activityType == words[1] }
                        if !known { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    if !known { throw HandoffError(.activityNotFound, "no \(words[1]) appeared") }
                default:
                    throw HandoffError(.invalidConfiguration, "unknown command: \(line)")
                }
                announce("OK")
            } catch {
                announce("ERR \(error)")
            }
        }
        await runtime.shutdown()
    }
}

/// Standard input, line by line, read on a thread of its own: `readLine()` blocks, and called from
/// a task it would hold one of the process's event loops for as long as the agent runs.
func standardInputLines() -> AsyncStream<String> {
    AsyncStream { continuation in
        let thread = Thread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
        thread.name = "stdin"
        thread.start()
    }
}
