import Foundation
import HandoffWire
import SwiftProtobuf
import Synchronization
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

// The broker suite's helpers (BrokerTests.swift, BrokerTests+Lifecycle.swift).

extension Broker.Configuration {
    /// Every endpoint on a free loopback port.
    static func ephemeral(lastValueCache: Bool = true, cacheCapacity: Int = 100_000, perOrigin: Int = 1_000) -> Self {
        .init(
            frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*",
            lastValueCache: lastValueCache, cacheCapacity: cacheCapacity, maxActivitiesPerOrigin: perOrigin)
    }
}

let sequenceNumbers = Atomic<UInt64>(0)

/// A flag one thread sets and another reads.
final class Flag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
}

/// One bus message: the topic frame and the serialized envelope.
struct BusMessage {
    var topic: [UInt8]
    var envelope: [UInt8]

    static let node: WireNodeRef = {
        var node = WireNodeRef()
        node.nodeID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
        node.name = "broker tests"
        node.host = "localhost"
        return node
    }()

    static func make(topic: String, body: WireEnvelope.OneOf_Body, sender: WireNodeRef = node) throws -> BusMessage {
        let sequence = sequenceNumbers.add(1, ordering: .relaxed).newValue
        let envelope = WireEnvelope(body: body, sender: sender, sequence: sequence)
        return BusMessage(topic: Array(topic.utf8), envelope: try envelope.serializedBytes())
    }

    static func advertisement(
        id: String, type: String, version: UInt64 = 1, leaseMs: UInt32 = 60_000, expiresAt: Date? = nil,
        origin: WireNodeRef = node, title: String? = nil
    ) throws -> BusMessage {
        var advertisement = WireAdvertisement()
        advertisement.activityID = id
        advertisement.activityType = type
        advertisement.title = title ?? "Activity \(id)"
        advertisement.origin = origin
        advertisement.continueEndpoint = "tcp://127.0.0.1:5571"
        advertisement.version = version
        advertisement.leaseMs = leaseMs
        if let expiresAt { advertisement.expiresAt = WireTimestamp(expiresAt) }
        return try make(topic: "A:" + type, body: .advertisement(advertisement), sender: origin)
    }

    static func withdrawal(id: String, type: String) throws -> BusMessage {
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = id
        withdrawal.activityType = type
        withdrawal.origin = node
        withdrawal.reason = .resigned
        return try make(topic: "A:" + type, body: .withdrawal(withdrawal))
    }

    /// A node presence, on its own topic or (for probes) on another one.
    static func presence(node nodeID: String, topic: String? = nil) throws -> BusMessage {
        var presence = WireNodePresence()
        presence.node = node
        presence.node.nodeID = nodeID
        presence.leaseMs = 5_000
        return try make(topic: topic ?? "P:" + nodeID, body: .nodePresence(presence))
    }
}

/// A subscription message as an XPUB reports it: 1, then the prefix.
func subscription(_ prefix: String) -> [UInt8] { [1] + Array(prefix.utf8) }

/// An unsubscription message: 0, then the prefix.
func unsubscription(_ prefix: String) -> [UInt8] { [0] + Array(prefix.utf8) }

/// Connects a node-style publisher to the broker's frontend.
///
/// It is an XPUB rather than a PUB so that it can see subscriptions arrive: with the cache on, the
/// broker subscribes to everything, and once that subscription is here nothing published is lost.
/// `secure`: a member's security and the broker's key, for a secure broker.
func connectPublisher(to broker: Broker, context: Context, secure: (Security, CurveKey)? = nil) async throws -> Socket {
    let publisher = try context.socket(.xpub)
    if let (security, brokerKey) = secure { try security.secureClient(publisher, serverKey: brokerKey) }
    try publisher.set(.sendHighWaterMark, 0)
    try publisher.connect(broker.frontendEndpoint)
    if broker.configuration.lastValueCache {
        // A wait for readiness, not a latency: the parallel pass starts hundreds of tests at once,
        // and with a CPU hog beside it on this 2-core VM, unit tests with no I/O took 6 s to pass
        // and three tests' brokers were not heard within 5 s.
        let ready = try await receiveUntil(publisher, within: .seconds(20)) { $0.bytes == subscription("") }
        try #require(ready, "the broker never subscribed its frontend")
    }
    return publisher
}

func publish(_ message: BusMessage, on publisher: Socket) async throws {
    try await publisher.send(message.topic, more: true)
    try await publisher.send(message.envelope)
}

/// What a joiner received: its snapshot's advertisements (as frames and decoded), and the reply.
struct Snapshot {
    let socket: Socket
    var frames: [[[UInt8]]] = []
    var advertisements: [WireAdvertisement] = []
    var reply = WireSnapshotReply()
}

/// Joins as wire.proto says a joiner does: subscribes to "A:" + `typePrefix`, then to a snapshot
/// topic, connects, and collects what arrives on the snapshot topic until its SnapshotReply.
func takeSnapshot(of typePrefix: String, at broker: Broker, context: Context) async throws -> Snapshot {
    let socket = try context.socket(.sub)
    try socket.set(.receiveHighWaterMark, 0)
    let topic = Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: typePrefix)
    try socket.subscribe("A:" + typePrefix)
    try socket.subscribe(topic)
    try socket.connect(broker.backendEndpoint)
    var snapshot = Snapshot(socket: socket)
    while let frames = try await receiveMessage(socket, timeout: .seconds(5)) {
        try #require(frames.count == 2)
        guard frames[0].string == topic else { continue }  // live traffic on "A:"
        let envelope = try WireEnvelope.decode(frames[1].bytes)
        switch envelope.body {
        case .advertisement(let advertisement):
            #expect(advertisement.activityType.hasPrefix(typePrefix))
            snapshot.frames.append(frames.map(\.bytes))
            snapshot.advertisements.append(advertisement)
        case .snapshotReply(let reply):
            snapshot.reply = reply
            #expect(Int(reply.count) == snapshot.advertisements.count)
            try socket.unsubscribe(topic)
            return snapshot
        default:
            Issue.record("unexpected \(envelope) on a snapshot topic")
        }
    }
    Issue.record("no SnapshotReply within 5 s")
    throw CancellationError()
}

/// Receives one multipart message, or `nil` when none starts within `timeout`.
func receiveMessage(_ socket: Socket, timeout: Duration) async throws -> [Frame]? {
    guard let first = try await socket.receive(timeout: timeout) else { return nil }
    var frames = [first]
    while frames.last!.hasMore { frames.append(try await socket.receive()) }
    return frames
}

/// Receives messages, each handed to `take`, until `complete` says all a test waits for have come
/// (at most `within`, plus what the machine held the process back meanwhile), then until `quiet`
/// passes without another: what comes past those waited for is taken too, for the test to find
/// what it did not expect.
func receiveMessages(
    _ socket: Socket, within: Duration, quiet: Duration, until complete: () -> Bool, _ take: ([Frame]) throws -> Void
) async throws {
    let deadline = WaitDeadline(within)
    while true {
        let wait = complete() ? quiet : deadline.remaining
        guard wait > .zero, let frames = try await receiveMessage(socket, timeout: wait) else { return }
        try take(frames)
    }
}

/// Receives single frames until one satisfies `match`; false when `within` (plus what the machine
/// held the process back meanwhile) passes first.
func receiveUntil(_ socket: Socket, within timeout: Duration, _ match: (Frame) -> Bool) async throws -> Bool {
    let deadline = WaitDeadline(timeout)
    while true {
        let remaining = deadline.remaining
        guard remaining > .zero, let frame = try await socket.receive(timeout: remaining) else { return false }
        if match(frame) { return true }
    }
}

/// The slow joiner: a subscriber misses what is published before its subscription arrives.
/// Publishes `probe` until `subscriber` receives it. A probe published again while the first was
/// on its way arrives too: the copies are read up to a marker published after them (the probe's
/// envelope under its topic + ".drained", which the subscriber's subscription matches too), which
/// comes after every one of them on the connection, so that none is left to be taken for what the
/// test sends next, or counted in the broker's counters after this returns. (Reading until 50 ms
/// passed without one let a late copy through in the one-loop pass of a fresh-clone CI.) Copies
/// of an earlier probe on another topic are passed over.
///
/// Gives up after 20 s: it returns as soon as the probe arrives, and as a parallel pass began (every
/// test at once on two pool threads) a broker test's subscription once took longer than 5 s.
func awaitDelivery(from publisher: Socket, to subscriber: Socket, probe: BusMessage) async throws {
    let deadline = WaitDeadline(.seconds(20))
    while !deadline.passed {
        try await publish(probe, on: publisher)
        while let frames = try await receiveMessage(subscriber, timeout: .milliseconds(20)) {
            guard frames.first?.bytes == probe.topic else { continue }
            #expect(frames.map(\.bytes) == [probe.topic, probe.envelope])
            let marker = BusMessage(topic: probe.topic + Array(".drained".utf8), envelope: probe.envelope)
            try await publish(marker, on: publisher)
            var drained = false
            while !drained, let copy = try await receiveMessage(subscriber, timeout: .seconds(5)) {
                drained = copy.first?.bytes == marker.topic
                #expect(drained || copy.first?.bytes == probe.topic, "a message other than the probe arrived while its copies were read")
            }
            #expect(drained, "the marker published after the probe never arrived")
            return
        }
    }
    Issue.record("the subscription never propagated")
    throw CancellationError()
}

/// Polls `condition` until it holds; records an issue and throws when `within` (plus what the
/// machine held the process back meanwhile) passes first.
func waitUntil(
    within timeout: Duration, sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool
) async throws {
    let deadline = WaitDeadline(timeout)
    while !condition() {
        guard !deadline.passed else {
            Issue.record("condition not met: \(deadline.account)", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// Asks a peer or broker at `endpoint` for a snapshot on each of `topics`, each from a connection
/// of its own, all at once. Returns what each connection received until its reply came (or nothing
/// came for 20 s): how many advertisements on each topic, and the count each reply gave.
///
/// Why a connection each: a node's publisher takes one subscription at a time from a connection
/// (``Node``'s `publisherSubscriptionQueue`; a broker ten), and while it sends an answer's slices
/// it looks for the next one at most every 10 ms (it coalesces its readings after sends). Asked
/// on one connection, 96 requests were read more slowly than the answers ended, and in a one-loop
/// pass every request found a place free: no busy reply to test. From a connection each, every
/// request waits to be read as the first answers begin.
///
/// With `subscriptionsSeen` (a broker's count of the subscriptions its backend read), every
/// connection is made first, with a subscription to nothing on the bus, and each asks once the
/// broker has read them all: the requests then leave within a millisecond or so. Connections made
/// one after another took longer than a broker's answers of 1,500 (CI of d50de44: every one of 96
/// requests found a place free).
func snapshotAnswers(
    from endpoint: String, in context: Context, to topics: [String], subscriptionsSeen: (@Sendable () -> Int)? = nil
) async throws -> (advertisements: [String: Int], replies: [String: Int]) {
    var taps: [Socket] = []
    defer { for tap in taps { tap.close() } }
    let seenBefore = subscriptionsSeen?() ?? 0
    for (index, topic) in topics.enumerated() {
        let tap = try context.socket(.sub)
        try tap.set(.receiveHighWaterMark, 0)
        try tap.subscribe(subscriptionsSeen == nil ? topic : "W:connected \(index)")
        taps.append(tap)
    }
    for tap in taps { try tap.connect(endpoint) }
    if let subscriptionsSeen {
        try await waitUntil(within: .seconds(20)) { subscriptionsSeen() - seenBefore >= topics.count }
        for (tap, topic) in zip(taps, topics) { try tap.subscribe(topic) }
    }
    var answers = SnapshotAnswersSeen()
    for (tap, topic) in zip(taps, topics) {
        while answers.replies[topic] == nil {
            guard try await answers.receiveOne(from: tap, within: .seconds(20)) else { break }
        }
    }
    return (answers.advertisements, answers.replies)
}

/// Snapshot answers as a tap receives them: advertisements counted and replies' counts, by topic.
private struct SnapshotAnswersSeen {
    var advertisements: [String: Int] = [:]
    var replies: [String: Int] = [:]

    /// Takes the next message (topic and envelope) from `tap`; false when none came in time.
    mutating func receiveOne(from tap: Socket, within timeout: Duration) async throws -> Bool {
        guard let topic = try await tap.receive(timeout: timeout)?.string else { return false }
        let envelope = try WireEnvelope.decode(try await tap.receive().bytes)
        switch envelope.body {
        case .advertisement: advertisements[topic, default: 0] += 1
        case .snapshotReply(let reply): replies[topic] = Int(reply.count)
        default: Issue.record("a \(String(describing: envelope.body)) on a snapshot topic")
        }
        return true
    }
}

/// A SUB at `endpoint` following `topics`, returned once they are in place at the publisher: it
/// follows the presence of the node `nodeID` as well until one arrives (a publisher applies a
/// connection's subscriptions in the order they were sent, so `topics` are in place by then), then
/// no longer; what arrived before is passed over.
func subscribedTap(_ context: Context, at endpoint: String, following topics: [String], presenceOf nodeID: String) async throws -> Socket {
    let tap = try context.socket(.sub)
    for topic in topics { try tap.subscribe(topic) }
    try await untilPresence(of: nodeID, reaches: tap) { try tap.connect(endpoint) }
    return tap
}

/// Follows `nodeID`'s presence on `tap` (after its other subscriptions) until one arrives, which
/// shows that those subscriptions reached the node, through a broker too; then follows it no more
/// and drops what came meanwhile. `connect` connects the tap, once the presence is followed (none
/// when it is connected already).
func untilPresence(of nodeID: String, reaches tap: Socket, connect: () throws -> Void = {}) async throws {
    let presence = "P:" + nodeID
    try tap.subscribe(presence)
    try connect()
    let arrived = try await receiveUntil(tap, within: .seconds(10)) { $0.string == presence }
    try #require(arrived, "no presence of \(nodeID) reached the tap within 10 s")
    try tap.unsubscribe(presence)
    try await Task.sleep(for: .milliseconds(50))
    while try tap.tryReceive() != nil {}
}
