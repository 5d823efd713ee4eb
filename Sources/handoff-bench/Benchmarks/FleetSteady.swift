import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

// `handoff-bench fleet` (second part): a fleet at rest. Thousands of simulated nodes, each an XPUB
// socket of its own connected to a real `handoff broker` (in `fleet-nodes` processes, 4,000 each), each with a few current activities, keep
// them alive for a while: as nodes do now (one NodePresence per node per interval), and as they did
// before presence (every activity re-advertised every interval). A few watchers subscribe to
// everything and count what reaches them, and one real node (its own process) follows them all;
// the broker's and that node's CPU are read from /proc.

/// What one steady-state run measured.
struct SteadyFigures {
    var messagesInPerSecond: Double
    var deliveredPerSecond: Double
    var brokerCPU: Double
    var activitiesAlive: Int
    /// The CPU share of a real node (its own process) that knows every activity of the fleet.
    var watcherCPU: Double
    var watcherKnown: Int
    /// From the first node's connect to the last one's (the broker's subscription reached each).
    var connectSeconds: Double
    /// From every node advertising to the real node knowing every activity.
    var knownSeconds: Double
    /// The broker's resident memory with no node connected, and at the end of the rest.
    var brokerEmptyRSS: Int
    var brokerRSS: Int
    /// The pair's second broker, when the nodes are on a pair.
    var secondBrokerCPU: Double?
    var secondBrokerRSS: Int?
}

/// Runs `nodes` simulated nodes with `perNode` activities each for `duration` seconds, keeping them alive by
/// presence or by re-advertising every activity, every `interval`.
func fleetSteadyState(nodes count: Int, perNode: Int, for duration: Double, interval: Double, presence: Bool, pair: Bool = false,
                      nodesPerProcess: Int = 4_000) throws -> SteadyFigures {
    // The simulated nodes live in processes of their own, at most `nodesPerProcess` each: a node
    // costs its process two descriptors (its TCP connection, its socket's mailbox), the broker one,
    // and a process may hold 20,000 here (a container's hard limit, which root cannot raise).
    try raiseDescriptorLimit(to: count + 1_024)
    let context = try Context(maxSockets: 64)
    let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
    let broker = try startHandoff(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"], output: FileHandle.nullDevice)
    defer { kill(broker.processIdentifier, SIGKILL); broker.waitUntilExit() }
    // A pair: a second, independent broker; every node publishes to both and the real node
    // subscribes to both (Node.Configuration.Bus.brokers), as a deployment with a pair runs.
    var second: (process: SpawnedProcess, frontend: String, backend: String)?
    if pair {
        let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
        second = (try startHandoff(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"], output: FileHandle.nullDevice), frontend, backend)
    }
    defer { if let second { kill(second.process.processIdentifier, SIGKILL); second.process.waitUntilExit() } }
    let leaseMs = UInt32(interval * 3000)
    Thread.sleep(forTimeInterval: 0.5)
    let brokerEmptyRSS = residentBytes(broker.processIdentifier)

    let connecting = ContinuousClock.now
    let groups = try stride(from: 0, to: count, by: nodesPerProcess).map { first in
        try Child(["fleet-nodes", "--frontend", frontend, "--first", "\(first)", "--nodes", "\(min(nodesPerProcess, count - first))",
                   "--per-node", "\(perNode)", "--lease-ms", "\(leaseMs)", "--interval-ms", "\(Int(interval * 1000))",
                   "--seconds", "\(duration)", "--keep-alive", presence ? "presence" : "readvertise"]
                  + (second.map { ["--second-frontend", $0.frontend] } ?? []))
    }
    defer { for group in groups { if group.process.isRunning { group.process.terminate() }; group.wait() } }
    // Every node connected (the broker's subscribe-all reached it).
    for group in groups { _ = try group.line(startingWith: "CONNECTED", within: .seconds(120)) }
    let connectSeconds = seconds(ContinuousClock.now - connecting)
    let watchers = try (0..<10).map { _ in
        let socket = try context.socket(.sub)
        try socket.set(.receiveHighWaterMark, 0)
        try socket.subscribe("A:")
        try socket.subscribe("P:")
        try socket.connect(backend)
        return socket
    }
    // A real node as well, in a process of its own, following every activity of the fleet.
    let watcher = try Child(["fleet-watcher", "--frontend", frontend, "--backend", backend, "--expect", "\(count * perNode)"]
                            + (second.map { ["--second-frontend", $0.frontend, "--second-backend", $0.backend] } ?? []))
    defer { if watcher.process.isRunning { watcher.process.terminate() }; watcher.wait() }
    _ = try watcher.line(startingWith: "READY")
    Thread.sleep(forTimeInterval: 0.3)
    let advertising = ContinuousClock.now
    for group in groups { try group.send("ADVERTISE") }
    _ = try watcher.line(startingWith: "KNOWN", within: .seconds(120))
    let knownSeconds = seconds(ContinuousClock.now - advertising)
    Thread.sleep(forTimeInterval: 0.5)
    func drain() throws -> Int {
        var messages = 0
        for watcher in watchers { while let frame = try watcher.tryReceive() { if !frame.hasMore { messages += 1 } } }
        return messages
    }
    _ = try drain()

    let cpuBefore = cpuSeconds(broker.processIdentifier)
    let secondCPUBefore = second.map { cpuSeconds($0.process.processIdentifier) }
    let watcherBefore = cpuSeconds(watcher.process.processIdentifier)
    let started = ContinuousClock.now
    var sent = 0, delivered = 0
    // Each group keeps its nodes' activities alive, spread over the interval, for `duration`.
    for group in groups { try group.send("REST") }
    while ContinuousClock.now - started < .milliseconds(Int(duration * 1000)) {
        Thread.sleep(forTimeInterval: 0.02)
        delivered += try drain()
    }
    for group in groups { sent += Int(try group.line(startingWith: "SENT", within: .seconds(60))[1]) ?? 0 }
    Thread.sleep(forTimeInterval: 0.2)
    delivered += try drain()
    let elapsed = seconds(ContinuousClock.now - started)
    let cpu = cpuSeconds(broker.processIdentifier) - cpuBefore
    let brokerRSS = residentBytes(broker.processIdentifier)
    let secondCPU = second.map { cpuSeconds($0.process.processIdentifier) - (secondCPUBefore ?? 0) }
    let secondRSS = second.map { residentBytes($0.process.processIdentifier) }
    let watcherCPU = cpuSeconds(watcher.process.processIdentifier) - watcherBefore
    watcher.closeInput()
    let watcherKnown = Int(try watcher.line(startingWith: "COUNT")[1]) ?? -1

    // Still alive, by a snapshot of what the broker holds.
    let probe = try context.socket(.sub)
    try probe.set(.receiveTimeout, 10_000)
    let topic = snapshotTopic(typePrefix: "")
    try probe.subscribe(topic)
    try probe.connect(backend)
    let alive = try readSnapshot(probe, topic: Array(topic.utf8)).promised
    for group in groups { group.closeInput() }
    for watcher in watchers { watcher.close() }
    probe.close()
    return SteadyFigures(messagesInPerSecond: Double(sent) / elapsed, deliveredPerSecond: Double(delivered) / elapsed,
                         brokerCPU: cpu / elapsed, activitiesAlive: alive,
                         watcherCPU: watcherCPU / elapsed, watcherKnown: watcherKnown,
                         connectSeconds: connectSeconds, knownSeconds: knownSeconds, brokerEmptyRSS: brokerEmptyRSS, brokerRSS: brokerRSS,
                         secondBrokerCPU: secondCPU.map { $0 / elapsed }, secondBrokerRSS: secondRSS)
}

/// Raises this process's descriptor limit (its children inherit it) to at least `needed`: the soft
/// limit up to the hard one, and the hard one too where the process may (root: up to the
/// kernel's fs.nr_open). Throws, saying what to raise, when it cannot.
func raiseDescriptorLimit(to needed: Int) throws {
    var limit = rlimit()
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    guard getrlimit(resource, &limit) == 0 else { return }
    guard limit.rlim_cur < rlim_t(needed) else { return }
    limit.rlim_cur = rlim_t(needed)
    limit.rlim_max = max(limit.rlim_max, rlim_t(needed))
    guard setrlimit(resource, &limit) == 0 else {
        throw HandoffError(.handoffFailed, "the fleet needs \(needed) open files and this process may not raise its limit (ulimit -n): \(String(cString: strerror(errno)))")
    }
}


func benchFleetSteady(nodes count: Int, perNode: Int, steadySeconds: Double, pair: Bool = false) throws {
    let interval = 2.0
    let withPresence = try fleetSteadyState(nodes: count, perNode: perNode, for: steadySeconds, interval: interval, presence: true, pair: pair)
    let readvertising = try fleetSteadyState(nodes: count, perNode: perNode, for: steadySeconds, interval: interval, presence: false, pair: pair)
    print("")
    print("Fleet at rest: \(count) simulated nodes (an XPUB each) with \(perNode) activities each\(pair ? ", on a broker pair (each node publishes to both; the figures are the first broker's unless said)" : ""), "
        + "kept alive every \(Int(interval)) s for \(Int(steadySeconds)) s; 10 watchers subscribe to everything")
    row("", "presence", "each activity re-advertised (before)")
    row("messages into the broker per second", String(format: "%.0f", withPresence.messagesInPerSecond), String(format: "%.0f", readvertising.messagesInPerSecond))
    row("delivered to the 10 watchers per second", String(format: "%.0f", withPresence.deliveredPerSecond), String(format: "%.0f", readvertising.deliveredPerSecond))
    row("broker CPU", String(format: "%.1f %%", withPresence.brokerCPU * 100), String(format: "%.1f %%", readvertising.brokerCPU * 100))
    row("a node following them all: CPU", String(format: "%.1f %%", withPresence.watcherCPU * 100), String(format: "%.1f %%", readvertising.watcherCPU * 100))
    row("activities that node knows at the end", "\(withPresence.watcherKnown)", "\(readvertising.watcherKnown)")
    row("activities alive at the end", "\(withPresence.activitiesAlive)", "\(readvertising.activitiesAlive)")
    row("all nodes connected, s", String(format: "%.2f", withPresence.connectSeconds), String(format: "%.2f", readvertising.connectSeconds))
    row("every activity known to the real node, s", String(format: "%.2f", withPresence.knownSeconds), String(format: "%.2f", readvertising.knownSeconds))
    row("broker RSS empty / at rest", "\(Int(Double(withPresence.brokerEmptyRSS) / 1_048_576)) / \(Int(Double(withPresence.brokerRSS) / 1_048_576)) MiB",
        "\(Int(Double(readvertising.brokerEmptyRSS) / 1_048_576)) / \(Int(Double(readvertising.brokerRSS) / 1_048_576)) MiB")
    row("broker memory per node at rest, KiB", String(format: "%.1f", Double(withPresence.brokerRSS - withPresence.brokerEmptyRSS) / 1024 / Double(count)),
        String(format: "%.1f", Double(readvertising.brokerRSS - readvertising.brokerEmptyRSS) / 1024 / Double(count)))
    if let first = withPresence.secondBrokerCPU, let second = readvertising.secondBrokerCPU {
        row("the second broker's CPU", String(format: "%.1f %%", first * 100), String(format: "%.1f %%", second * 100))
    }
    if let first = withPresence.secondBrokerRSS, let second = readvertising.secondBrokerRSS {
        row("the second broker's RSS at rest", "\(Int(Double(first) / 1_048_576)) MiB", "\(Int(Double(second) / 1_048_576)) MiB")
    }
    compare("fleet at rest: bus messages/s (\(count) nodes × \(perNode))", handoff: String(format: "%.0f", withPresence.messagesInPerSecond),
            baseline: "per-activity re-advertisement", String(format: "%.0f", readvertising.messagesInPerSecond),
            ratio: String(format: "%.2f x", withPresence.messagesInPerSecond / readvertising.messagesInPerSecond),
            target: "1 per node", met: withPresence.activitiesAlive == count * perNode)
}
