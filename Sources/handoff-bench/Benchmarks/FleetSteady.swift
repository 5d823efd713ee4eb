import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

// `handoff-bench fleet` (second part): a fleet at rest. Thousands of simulated nodes, each an XPUB
// socket of its own connected to a real `handoff broker`, each with a few current activities, keep
// them alive for a while: as nodes do now (one NodePresence per node per interval), and as they did
// before presence (every activity re-advertised every interval). A few watchers subscribe to
// everything and count what reaches them, and one real node (its own process) follows them all;
// the broker's and that node's CPU are read from /proc.

/// One simulated node: its socket, identity and activities.
private struct SimulatedNode {
    let socket: Socket
    var origin: WireNodeRef
    var advertisements: [WireAdvertisement]
    var sequence: UInt64 = 0

    mutating func send(_ topic: String, _ body: WireEnvelope.OneOf_Body) throws {
        sequence += 1
        let envelope: [UInt8] = try WireEnvelope(body: body, sender: origin, sequence: sequence).serializedBytes()
        try socket.send(Array(topic.utf8), more: true)
        try socket.send(envelope)
    }

    mutating func advertiseAll() throws {
        for advertisement in advertisements { try send("A:" + advertisement.activityType, .advertisement(advertisement)) }
    }

    mutating func sendPresence(leaseMs: UInt32) throws {
        var presence = WireNodePresence()
        presence.node = origin
        presence.continueEndpoint = "tcp://127.0.0.1:1"
        presence.leaseMs = leaseMs
        presence.activityIds = advertisements.map(\.activityID)
        try send("P:" + origin.nodeID, .nodePresence(presence))
    }
}

/// What one steady-state run measured.
struct SteadyFigures {
    var messagesInPerSecond: Double
    var deliveredPerSecond: Double
    var brokerCPU: Double
    var activitiesAlive: Int
    /// The CPU share of a real node (its own process) that knows every activity of the fleet.
    var watcherCPU: Double
    var watcherKnown: Int
}

/// Runs `nodes` simulated nodes with `perNode` activities each for `duration` seconds, keeping them alive by
/// presence or by re-advertising every activity, every `interval`.
func fleetSteadyState(nodes count: Int, perNode: Int, for duration: Double, interval: Double, presence: Bool) throws -> SteadyFigures {
    let context = try Context(maxSockets: count + 64)
    let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
    let broker = try startHandoff(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"], output: FileHandle.nullDevice)
    defer { kill(broker.processIdentifier, SIGKILL); broker.waitUntilExit() }
    let leaseMs = UInt32(interval * 3000)

    var nodes: [SimulatedNode] = []
    for index in 0..<count {
        let socket = try context.socket(.xpub)
        try socket.set(.sendHighWaterMark, 0)
        try socket.set(.receiveTimeout, 10_000)
        try socket.connect(frontend)
        var origin = WireNodeRef()
        origin.nodeID = UUID().uuidString
        origin.name = "simulated \(index)"
        origin.host = "fleet"
        let advertisements = (0..<perNode).map { activity in
            var advertisement = WireAdvertisement()
            advertisement.activityID = UUID().uuidString
            advertisement.activityType = "org.fleet.type-\(activity)"
            advertisement.title = "activity \(activity) of node \(index)"
            advertisement.origin = origin
            advertisement.continueEndpoint = "tcp://127.0.0.1:1"
            advertisement.version = 1
            advertisement.leaseMs = leaseMs
            return advertisement
        }
        nodes.append(SimulatedNode(socket: socket, origin: origin, advertisements: advertisements))
    }
    // Every node connected (the broker's subscribe-all reached it), then each advertises once.
    for node in nodes { while try node.socket.receive().bytes != [1] {} }
    let watchers = try (0..<10).map { _ in
        let socket = try context.socket(.sub)
        try socket.set(.receiveHighWaterMark, 0)
        try socket.subscribe("A:")
        try socket.subscribe("P:")
        try socket.connect(backend)
        return socket
    }
    // A real node as well, in a process of its own, following every activity of the fleet.
    let watcher = try Child(["fleet-watcher", "--frontend", frontend, "--backend", backend, "--expect", "\(count * perNode)"])
    defer { if watcher.process.isRunning { watcher.process.terminate() }; watcher.wait() }
    _ = try watcher.line(startingWith: "READY")
    Thread.sleep(forTimeInterval: 0.3)
    for index in nodes.indices { try nodes[index].advertiseAll() }
    _ = try watcher.line(startingWith: "KNOWN", within: .seconds(60))
    Thread.sleep(forTimeInterval: 0.5)
    func drain() throws -> Int {
        var messages = 0
        for watcher in watchers { while let frame = try watcher.tryReceive() { if !frame.hasMore { messages += 1 } } }
        return messages
    }
    _ = try drain()

    let cpuBefore = cpuSeconds(broker.processIdentifier)
    let watcherBefore = cpuSeconds(watcher.process.processIdentifier)
    let started = ContinuousClock.now
    var sent = 0, delivered = 0
    var next = started
    while ContinuousClock.now - started < .milliseconds(Int(duration * 1000)) {
        // One interval: every node keeps its activities alive once, spread over the interval.
        let slice = interval / Double(nodes.count)
        for index in nodes.indices {
            if presence {
                try nodes[index].sendPresence(leaseMs: leaseMs)
                sent += 1
            } else {
                try nodes[index].advertiseAll()
                sent += perNode
            }
            next = next + .nanoseconds(Int64(slice * 1e9))
            let wait = seconds(ContinuousClock.now.duration(to: next))
            if wait > 0.001 { Thread.sleep(forTimeInterval: wait) }
            if index % 200 == 0 { delivered += try drain() }
        }
    }
    Thread.sleep(forTimeInterval: 0.2)
    delivered += try drain()
    let elapsed = seconds(ContinuousClock.now - started)
    let cpu = cpuSeconds(broker.processIdentifier) - cpuBefore
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
    for node in nodes { node.socket.close() }
    for watcher in watchers { watcher.close() }
    probe.close()
    return SteadyFigures(messagesInPerSecond: Double(sent) / elapsed, deliveredPerSecond: Double(delivered) / elapsed,
                         brokerCPU: cpu / elapsed, activitiesAlive: alive,
                         watcherCPU: watcherCPU / elapsed, watcherKnown: watcherKnown)
}


func benchFleetSteady(nodes count: Int, perNode: Int, steadySeconds: Double) throws {
    let interval = 2.0
    let withPresence = try fleetSteadyState(nodes: count, perNode: perNode, for: steadySeconds, interval: interval, presence: true)
    let readvertising = try fleetSteadyState(nodes: count, perNode: perNode, for: steadySeconds, interval: interval, presence: false)
    print("")
    print("Fleet at rest: \(count) simulated nodes (an XPUB each) with \(perNode) activities each, kept alive every \(Int(interval)) s for \(Int(steadySeconds)) s; 10 watchers subscribe to everything")
    row("", "presence", "each activity re-advertised (before)")
    row("messages into the broker per second", String(format: "%.0f", withPresence.messagesInPerSecond), String(format: "%.0f", readvertising.messagesInPerSecond))
    row("delivered to the 10 watchers per second", String(format: "%.0f", withPresence.deliveredPerSecond), String(format: "%.0f", readvertising.deliveredPerSecond))
    row("broker CPU", String(format: "%.1f %%", withPresence.brokerCPU * 100), String(format: "%.1f %%", readvertising.brokerCPU * 100))
    row("a node following them all: CPU", String(format: "%.1f %%", withPresence.watcherCPU * 100), String(format: "%.1f %%", readvertising.watcherCPU * 100))
    row("activities that node knows at the end", "\(withPresence.watcherKnown)", "\(readvertising.watcherKnown)")
    row("activities alive at the end", "\(withPresence.activitiesAlive)", "\(readvertising.activitiesAlive)")
    compare("fleet at rest: bus messages/s (\(count) nodes × \(perNode))", handoff: String(format: "%.0f", withPresence.messagesInPerSecond),
            baseline: "per-activity re-advertisement", String(format: "%.0f", readvertising.messagesInPerSecond),
            ratio: String(format: "%.2f x", withPresence.messagesInPerSecond / readvertising.messagesInPerSecond),
            target: "1 per node", met: withPresence.activitiesAlive == count * perNode)
}
