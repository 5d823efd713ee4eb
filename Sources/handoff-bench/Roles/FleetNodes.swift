import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// `fleet-nodes`: simulated nodes of `handoff-bench fleet` in a process of their own (a process
/// may hold 20,000 descriptors here, two a node). Each is an XPUB socket connected to the broker's
/// `--frontend` (and to `--second-frontend` too, a broker pair), with `--per-node` activities. Steps, each on the parent's word (standard input):
/// CONNECTED once the broker's subscription reached every node; on ADVERTISE each advertises its
/// activities once (ADVERTISED); on REST they keep them alive every `--interval-ms`, spread over
/// it, by presence or by re-advertising every activity (`--keep-alive`), for `--seconds`, then say
/// SENT with the messages sent. Standard input closing ends it.
func runFleetNodes(_ arguments: [String]) throws {
    guard let frontend = stringOption("--frontend", in: arguments) else {
        throw HandoffError(.invalidConfiguration, "fleet-nodes needs --frontend")
    }
    let count = intOption("--nodes", 1_000, in: arguments), first = intOption("--first", 0, in: arguments)
    let perNode = intOption("--per-node", 5, in: arguments)
    let leaseMs = UInt32(intOption("--lease-ms", 6_000, in: arguments))
    let interval = Double(intOption("--interval-ms", 2_000, in: arguments)) / 1000
    let duration = Double(stringOption("--seconds", in: arguments) ?? "10") ?? 10
    let presence = stringOption("--keep-alive", in: arguments) != "readvertise"
    let frontends = [frontend] + (stringOption("--second-frontend", in: arguments).map { [$0] } ?? [])
    try raiseDescriptorLimit(to: (1 + frontends.count) * count + 1_024)
    let context = try Context(maxSockets: count + 64)
    var nodes: [SimulatedNode] = []
    for index in first..<first + count {
        let socket = try context.socket(.xpub)
        try socket.set(.sendHighWaterMark, 0)
        try socket.set(.receiveTimeout, 10_000)
        // Each broker's subscribe-all, the second one too (an XPUB passes a duplicate up only so).
        try socket.set(.xpubVerbose, true)
        for frontend in frontends { try socket.connect(frontend) }
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
    defer { for node in nodes { node.socket.close() } }
    for node in nodes {
        for _ in frontends { while try node.socket.receive().bytes != [1] {} }
    }
    tell("CONNECTED")

    guard readLine() == "ADVERTISE" else { return }
    for index in nodes.indices { try nodes[index].advertiseAll() }
    tell("ADVERTISED")

    guard readLine() == "REST" else { return }
    let started = ContinuousClock.now
    var sent = 0
    var next = started
    while ContinuousClock.now - started < .milliseconds(Int(duration * 1000)) {
        // One interval: every node keeps its activities alive once, spread over the interval.
        let slice = interval / Double(nodes.count)
        for index in nodes.indices {
            // As a node does: a broker's subscribe-all (it restarted, or asks everyone) or its
            // "R:" + this node's id (its cache lacks what the presence lists) is answered by
            // advertising every activity again.
            if try nodes[index].askedToAdvertiseAgain() {
                try nodes[index].advertiseAll()
                sent += perNode
            }
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
        }
    }
    tell("SENT \(sent)")
    while readLine() != nil {}
}

/// One simulated node: its socket, identity and activities.
struct SimulatedNode {
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

    /// Whether a subscription that asks this node to advertise again came since it last looked.
    func askedToAdvertiseAgain() throws -> Bool {
        var asked = false
        let readvertise = [UInt8(1)] + Array(("R:" + origin.nodeID).utf8)
        while let frame = try socket.tryReceive() {
            let bytes = frame.bytes
            if bytes == [1] || bytes == readvertise { asked = true }
        }
        return asked
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

