import Foundation
import HandoffWire
import SwiftProtobuf
import Synchronization
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

@Suite("Broker", .exclusive)
struct BrokerTests {
    @Test("forwards messages by topic prefix; subscriptions go upstream only without the cache", arguments: [true, false])
    func forwardsWithPrefixFiltering(lastValueCache: Bool) async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(lastValueCache: lastValueCache), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("A:org.handoff.contacts.")
        try subscriber.connect(broker.backendEndpoint)
        try await awaitDelivery(
            from: publisher, to: subscriber, probe: .presence(node: "probe", topic: "A:org.handoff.contacts.probe"))

        // Without the cache the subscription reaches the publisher through the broker; with it, the
        // frontend subscribes to everything and publishers hear nothing of subscribers.
        let forwarded = try await receiveUntil(publisher, within: .milliseconds(lastValueCache ? 300 : 5_000)) {
            $0.bytes == subscription("A:org.handoff.contacts.")
        }
        #expect(forwarded == !lastValueCache)

        let edit = try BusMessage.advertisement(id: "1", type: "org.handoff.contacts.edit")
        let pattern = [
            edit,
            try .advertisement(id: "2", type: "org.handoff.notes.edit"),
            try .advertisement(id: "3", type: "org.handoff.contacts.view"),
            try .advertisement(id: "4", type: "org.handoff.contactsX.edit"),
            try .presence(node: "node-1"),
        ]
        for message in pattern { try await publish(message, on: publisher) }
        let marker = try BusMessage.presence(node: "end", topic: "A:org.handoff.contacts.~end")
        try await publish(marker, on: publisher)

        var received: [[Frame]] = []
        while let frames = try await receiveMessage(subscriber, timeout: .seconds(5)) {
            received.append(frames)
            if frames[0].bytes == marker.topic { break }
        }
        #expect(received.map { $0[0].string } == [
            "A:org.handoff.contacts.edit", "A:org.handoff.contacts.view", "A:org.handoff.contacts.~end",
        ])
        // Frames arrive exactly as sent.
        #expect(received.first.map { $0.map(\.bytes) } == [edit.topic, edit.envelope])

        // When the last subscriber of the prefix leaves, the unsubscription goes upstream too.
        subscriber.close()
        if !lastValueCache {
            #expect(try await receiveUntil(publisher, within: .seconds(5)) { $0.bytes == unsubscription("A:org.handoff.contacts.") })
        }
        try await waitUntil(within: .seconds(5)) { broker.counters.unsubscriptions == 1 }
        await broker.stop()
    }

    @Test("a late joiner's snapshot holds every cached advertisement, once; a narrower prefix only the matching ones")
    func lateJoinerSnapshot() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let types = [
            "org.handoff.contacts.edit", "org.handoff.contacts.view", "org.handoff.notes.edit", "com.example.mail.compose",
        ]
        var all: Set<String> = []
        var contacts: Set<String> = []
        for index in 0..<1_000 {
            let id = "activity-\(index)"
            let type = types[index % types.count]
            all.insert(id)
            if type.hasPrefix("org.handoff.contacts.") { contacts.insert(id) }
            try await publish(.advertisement(id: id, type: type), on: publisher)
        }
        try await waitUntil(within: .seconds(10)) { broker.counters.cachedActivities == 1_000 }
        let sentBeforeJoining = broker.counters.messagesIn

        let joined = ContinuousClock.now
        let everything = try await takeSnapshot(of: "", at: broker, context: context)
        #expect(everything.advertisements.map(\.activityID).sorted() == all.sorted())
        #expect(everything.reply.count == 1_000)
        #expect(everything.reply.typePrefix == "")
        #expect(ContinuousClock.now - joined < .seconds(1))
        #expect(everything.advertisements.allSatisfy { ad in
            types.contains(ad.activityType) && ad.activityID.hasPrefix("activity-")
        })

        let narrow = try await takeSnapshot(of: "org.handoff.contacts.", at: broker, context: context)
        #expect(narrow.advertisements.map(\.activityID).sorted() == contacts.sorted())
        #expect(narrow.reply.count == contacts.count)

        // The first joiner heard nothing of the second one's snapshot.
        #expect(try await receiveMessage(everything.socket, timeout: .milliseconds(200)) == nil)
        // Nobody published anything after the joiners came: it all came from the cache.
        #expect(broker.counters.messagesIn == sentBeforeJoining)
        #expect(broker.counters.snapshots == 2)
        #expect(broker.counters.snapshotAdvertisements == 1_000 + contacts.count)
        await broker.stop()
    }

    @Test("joiners one after another: each gets each activity once, and nobody hears another's snapshot")
    func joinStorm() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let activities = 200
        for index in 0..<activities {
            try await publish(.advertisement(id: "activity-\(index)", type: "org.handoff.notes.edit"), on: publisher)
        }
        try await waitUntil(within: .seconds(10)) { broker.counters.cachedActivities == activities }
        let before = broker.counters.messagesOut
        var joiners: [Socket] = []
        for _ in 0..<20 {
            let joiner = try await takeSnapshot(of: "org.handoff.", at: broker, context: context)
            #expect(joiner.advertisements.count == activities)
            #expect(Set(joiner.advertisements.map(\.activityID)).count == activities)
            joiners.append(joiner.socket)
        }
        // Exactly the ideal: each joiner's advertisements and its one SnapshotReply, nothing else.
        #expect(broker.counters.messagesOut - before == 20 * (activities + 1))
        for joiner in joiners {
            #expect(try await receiveMessage(joiner, timeout: .milliseconds(20)) == nil)
        }
        await broker.stop()
    }

    @Test("a withdrawal empties the cache; a newer version replaces an older one, never the reverse")
    func withdrawalAndVersions() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let type = "org.handoff.notes.edit"
        let messages: [BusMessage] = [
            try .advertisement(id: "kept", type: type, version: 1),
            try .advertisement(id: "withdrawn", type: type, version: 1),
            try .advertisement(id: "newer-first", type: type, version: 2),
            try .withdrawal(id: "withdrawn", type: type),
            try .advertisement(id: "newer-first", type: type, version: 1),
            try .advertisement(id: "upgraded", type: type, version: 1),
            try .advertisement(id: "upgraded", type: type, version: 3),
        ]
        for message in messages { try await publish(message, on: publisher) }
        try await waitUntil(within: .seconds(5)) { broker.counters.messagesIn == messages.count }
        #expect(broker.counters.cachedActivities == 3)

        let seen = try await takeSnapshot(of: "", at: broker, context: context).advertisements
        #expect(seen.map(\.activityID).sorted() == ["kept", "newer-first", "upgraded"])
        #expect(seen.filter { $0.activityID == "newer-first" }.map(\.version) == [2])
        #expect(seen.filter { $0.activityID == "upgraded" }.map(\.version) == [3])
        await broker.stop()
    }

    @Test("an advertisement is not replayed after its lease or its expiration date; a renewed one is")
    func expiry() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let type = "org.handoff.notes.edit"
        try await publish(.advertisement(id: "short-lease", type: type, leaseMs: 200), on: publisher)
        try await publish(
            .advertisement(id: "expiring", type: type, leaseMs: 60_000, expiresAt: Date().addingTimeInterval(0.2)),
            on: publisher)
        try await publish(.advertisement(id: "long-lease", type: type, leaseMs: 60_000), on: publisher)
        let renewed = try BusMessage.advertisement(id: "renewed", type: type, leaseMs: 400)
        try await publish(renewed, on: publisher)
        try await waitUntil(within: .seconds(5)) { broker.counters.messagesIn == 4 }

        // Renew one of them (same version) for 600 ms; the other short ones lapse meanwhile.
        for _ in 0..<6 {
            try await Task.sleep(for: .milliseconds(100))
            try await publish(renewed, on: publisher)
        }
        try await waitUntil(within: .seconds(5)) { broker.counters.messagesIn == 10 }
        // Expired entries leave the cache on their own, with nobody subscribing.
        #expect(broker.counters.cachedActivities == 2)

        let seen = try await takeSnapshot(of: "", at: broker, context: context).advertisements
        #expect(seen.map(\.activityID).sorted() == ["long-lease", "renewed"])
        await broker.stop()
    }

    @Test("malformed messages are forwarded, counted and not cached; counters are exact")
    func malformedAndCounters() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("")
        try subscriber.connect(broker.backendEndpoint)
        try await awaitDelivery(from: publisher, to: subscriber, probe: .presence(node: "probe"))
        let before = broker.counters
        #expect(before.subscriptions == 1)
        #expect(before.malformed == 0)

        let advertisement = try BusMessage.advertisement(id: "good", type: "org.handoff.contacts.edit")
        let pattern: [[[UInt8]]] = [
            [advertisement.topic, advertisement.envelope],
            // Not a protobuf message at all, under an advertisement topic.
            [Array("A:org.handoff.contacts.edit".utf8), [0xFF, 0xFF, 0xFF]],
            // A valid advertisement envelope, but only one frame.
            [advertisement.envelope],
            [Array("P:end".utf8), try BusMessage.presence(node: "end").envelope],
        ]
        for frames in pattern {
            for (index, frame) in frames.enumerated() {
                try await publisher.send(frame, more: index < frames.count - 1)
            }
        }
        var received: [[[UInt8]]] = []
        while received.count < pattern.count, let frames = try await receiveMessage(subscriber, timeout: .seconds(5)) {
            received.append(frames.map(\.bytes))
        }
        #expect(received == pattern)

        let bytes = pattern.reduce(0) { $0 + $1.reduce(0) { $0 + $1.count } }
        let after = broker.counters
        #expect(after.messagesIn - before.messagesIn == 4)
        #expect(after.bytesIn - before.bytesIn == bytes)
        #expect(after.messagesOut - before.messagesOut == 4)
        #expect(after.bytesOut - before.bytesOut == bytes)
        #expect(after.malformed == 2)
        #expect(after.cachedActivities == 1)
        #expect(after.snapshots == 0)
        #expect(after.subscriptions == 1)

        // A late joiner's snapshot holds the good advertisement only, in its own envelope: the
        // malformed one was not cached.
        let joiner = try await takeSnapshot(of: "", at: broker, context: context)
        #expect(joiner.frames.map { $0[1] } == [advertisement.envelope])
        let final = broker.counters
        #expect(final.subscriptions == 3)  // "A:" and the snapshot's topic
        #expect(final.snapshots == 1)
        #expect(final.snapshotAdvertisements == 1)
        #expect(final.messagesOut - after.messagesOut == 2)  // the advertisement and the SnapshotReply
        #expect(final.messagesIn == after.messagesIn)
        await broker.stop()
    }

    @Test("a frame over the contract's 64 KiB reaches nobody and costs its sender the connection; the others keep flowing")
    func oversizedFrame() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let honest = try await connectPublisher(to: broker, context: context)
        let hostile = try await connectPublisher(to: broker, context: context)
        let monitor = try hostile.monitor(.disconnected)
        defer { monitor.stop() }
        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("")
        try subscriber.connect(broker.backendEndpoint)
        try await awaitDelivery(from: honest, to: subscriber, probe: .presence(node: "probe"))
        let before = broker.counters

        // An advertisement padded to one byte over the limit (libzmq drops it before anyone parses it).
        var big = try BusMessage.advertisement(id: "big", type: "org.handoff.contacts.edit")
        big.envelope += [UInt8](repeating: 0, count: WireLimits.maxBusFrame - big.envelope.count + 1)
        try await publish(big, on: hostile)
        #expect(try await monitor.next(timeout: .seconds(5))?.kind == .disconnected, "the broker must hang up on the sender")

        let fine = try BusMessage.advertisement(id: "fine", type: "org.handoff.contacts.edit")
        try await publish(fine, on: honest)
        let frames = try #require(try await receiveMessage(subscriber, timeout: .seconds(5)))
        #expect(frames.map(\.bytes) == [fine.topic, fine.envelope])
        #expect(try await receiveMessage(subscriber, timeout: .milliseconds(300)) == nil)
        let after = broker.counters
        #expect(after.messagesIn - before.messagesIn == 1)
        #expect(after.cachedActivities == 1)
        await broker.stop()
    }

    @Test("a full cache drops the advertisement that expires soonest; a renewal takes no room")
    func capacity() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(cacheCapacity: 3), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let type = "org.handoff.notes.edit"
        let fill: [BusMessage] = [
            try .advertisement(id: "10s", type: type, leaseMs: 10_000),
            try .advertisement(id: "40s", type: type, leaseMs: 40_000),
            try .advertisement(id: "20s", type: type, leaseMs: 20_000),
            try .advertisement(id: "40s", type: type, leaseMs: 40_000),
        ]
        for message in fill { try await publish(message, on: publisher) }
        try await waitUntil(within: .seconds(5)) { broker.counters.messagesIn == fill.count }
        #expect(broker.counters.cachedActivities == 3)
        try await publish(.advertisement(id: "30s", type: type, leaseMs: 30_000), on: publisher)
        try await waitUntil(within: .seconds(5)) { broker.counters.messagesIn == fill.count + 1 }
        #expect(broker.counters.cachedActivities == 3)

        let seen = try await takeSnapshot(of: "", at: broker, context: context).advertisements
        #expect(seen.map(\.activityID).sorted() == ["20s", "30s", "40s"])
        await broker.stop()
    }

    @Test("one node's activities beyond its quota are dropped and counted; its updates, and other nodes, pass")
    func perOriginQuota() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(perOrigin: 10), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        let subscriber = try context.socket(.sub)
        try subscriber.set(.receiveHighWaterMark, 0)
        try subscriber.subscribe("A:")
        try subscriber.connect(broker.backendEndpoint)
        try await awaitDelivery(from: publisher, to: subscriber, probe: .presence(node: "probe", topic: "A:probe"))
        let probes = broker.counters.messagesIn
        var flooder = BusMessage.node
        flooder.nodeID = "flooder"
        let type = "org.handoff.notes.edit"
        for index in 0..<50 {
            try await publish(.advertisement(id: "flood-\(index)", type: type, origin: flooder), on: publisher)
        }
        // Updates of a cached one, and another node's activity, still pass.
        try await publish(.advertisement(id: "flood-3", type: type, version: 2, origin: flooder), on: publisher)
        try await publish(.advertisement(id: "other", type: type), on: publisher)
        try await waitUntil(within: .seconds(5)) { broker.counters.messagesIn == probes + 52 }
        #expect(broker.counters.overQuota == 40)
        #expect(broker.counters.cachedActivities == 11)
        var forwarded: [String] = []
        while let frames = try await receiveMessage(subscriber, timeout: .milliseconds(300)) {
            guard case .advertisement(let ad) = try WireEnvelope.decode(frames[1].bytes).body else { continue }
            forwarded.append("\(ad.activityID) v\(ad.version)")
        }
        #expect(forwarded == (0..<10).map { "flood-\($0) v1" } + ["flood-3 v2", "other v1"])
        let snapshot = try await takeSnapshot(of: "", at: broker, context: context)
        #expect(snapshot.advertisements.count == 11)
        // A withdrawal frees room for one more.
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = "flood-0"
        withdrawal.activityType = type
        withdrawal.origin = flooder
        try await publish(.make(topic: "A:" + type, body: .withdrawal(withdrawal), sender: flooder), on: publisher)
        try await publish(.advertisement(id: "flood-late", type: type, origin: flooder), on: publisher)
        try await waitUntil(within: .seconds(5)) { broker.counters.messagesIn == probes + 54 }
        #expect(broker.counters.overQuota == 40)
        #expect(broker.counters.cachedActivities == 11)
        await broker.stop()
    }

    @Test("the capture socket sees forwarded messages and subscriptions")
    func capture() async throws {
        let context = try Context()
        var configuration = Broker.Configuration.ephemeral()
        configuration.capture = "tcp://127.0.0.1:*"
        let broker = try Broker.start(configuration, context: context)
        let captureEndpoint = try #require(broker.captureEndpoint)
        #expect(captureEndpoint.hasPrefix("tcp://127.0.0.1:") && !captureEndpoint.hasSuffix(":*"))
        let publisher = try await connectPublisher(to: broker, context: context)
        let tap = try context.socket(.sub)
        try tap.subscribe("")
        try tap.connect(captureEndpoint)
        try await awaitDelivery(from: publisher, to: tap, probe: .presence(node: "probe"))

        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("A:org.handoff.")
        try subscriber.connect(broker.backendEndpoint)
        #expect(try await receiveUntil(tap, within: .seconds(5)) { $0.bytes == subscription("A:org.handoff.") })

        let advertisement = try BusMessage.advertisement(id: "captured", type: "org.handoff.notes.edit")
        try await publish(advertisement, on: publisher)
        var captured: [[UInt8]]?
        while let frames = try await receiveMessage(tap, timeout: .seconds(5)) {
            if frames[0].bytes == advertisement.topic {
                captured = frames.map(\.bytes)
                break
            }
        }
        #expect(captured == [advertisement.topic, advertisement.envelope])
        await broker.stop()
    }

    @Test("start fails on an address in use with every socket closed; stop is idempotent and frees the ports")
    func startFailureAndStop() async throws {
        let context = try Context()
        let occupant = try context.socket(.pub)
        try occupant.bind("tcp://127.0.0.1:*")
        let taken = try occupant.lastEndpoint

        let loopEnded = Flag()
        var configuration = Broker.Configuration.ephemeral()
        configuration.backend = taken
        configuration.capture = "tcp://127.0.0.1:*"
        let error = #expect(throws: HandoffError.self) {
            try Broker.start(configuration, context: context, onLoopExit: {
                loopEnded.set()
            })
        }
        #expect(error?.code == .invalidConfiguration)
        #expect((error?.cause as? ZMQError)?.code == .addressInUse, "\(String(describing: error))")
        #expect(error?.message.contains(taken) == true, "\(String(describing: error))")
        #expect(loopEnded.isSet, "start threw before closing what it had opened")

        let badEndpoint = #expect(throws: HandoffError.self) {
            try Broker.start(.init(frontend: "bogus://x", backend: "tcp://127.0.0.1:*"), context: context)
        }
        #expect((badEndpoint?.cause as? ZMQError)?.code == .protocolNotSupported)
        let badCapacity = #expect(throws: HandoffError.self) {
            try Broker.start(Broker.Configuration.ephemeral(cacheCapacity: 0), context: context)
        }
        #expect(badCapacity?.code == .invalidConfiguration)
        #expect(badCapacity?.message.contains("cacheCapacity") == true)

        let broker = try Broker.start(.ephemeral(), context: context)
        #expect(broker.isRunning)
        await broker.stop()
        await broker.stop()
        #expect(!broker.isRunning)
        // Closed sockets release their ports (libzmq does it on its I/O thread, so allow a moment).
        let again = Broker.Configuration(frontend: broker.frontendEndpoint, backend: broker.backendEndpoint)
        var restarted: Broker?
        let deadline = ContinuousClock.now + .seconds(5)
        while restarted == nil && ContinuousClock.now < deadline {
            do {
                restarted = try Broker.start(again, context: context)
            } catch {
                #expect((error.cause as? ZMQError)?.code == .addressInUse, "\(error)")
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(restarted?.frontendEndpoint == broker.frontendEndpoint)
        await restarted?.stop()
    }

    @Test("run() keeps the broker up until its task is cancelled, then stops it")
    func serviceRun() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(), context: context)
        let task = Task { try await broker.run() }
        try await Task.sleep(for: .milliseconds(100))
        #expect(broker.isRunning)
        task.cancel()
        try await task.value
        #expect(!broker.isRunning)
    }
}

// MARK: - Helpers

extension Broker.Configuration {
    /// Every endpoint on a free loopback port.
    fileprivate static func ephemeral(lastValueCache: Bool = true, cacheCapacity: Int = 100_000, perOrigin: Int = 1_000) -> Self {
        .init(
            frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*",
            lastValueCache: lastValueCache, cacheCapacity: cacheCapacity, maxActivitiesPerOrigin: perOrigin)
    }
}

private let sequenceNumbers = Atomic<UInt64>(0)

/// A flag one thread sets and another reads.
private final class Flag: Sendable {
    private let value = Atomic(false)
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
}

/// One bus message: the topic frame and the serialized envelope.
private struct BusMessage {
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
        origin: WireNodeRef = node
    ) throws -> BusMessage {
        var advertisement = WireAdvertisement()
        advertisement.activityID = id
        advertisement.activityType = type
        advertisement.title = "Activity \(id)"
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
private func subscription(_ prefix: String) -> [UInt8] { [1] + Array(prefix.utf8) }

/// An unsubscription message: 0, then the prefix.
private func unsubscription(_ prefix: String) -> [UInt8] { [0] + Array(prefix.utf8) }

/// Connects a node-style publisher to the broker's frontend.
///
/// It is an XPUB rather than a PUB so that it can see subscriptions arrive: with the cache on, the
/// broker subscribes to everything, and once that subscription is here nothing published is lost.
private func connectPublisher(to broker: Broker, context: Context) async throws -> Socket {
    let publisher = try context.socket(.xpub)
    try publisher.set(.sendHighWaterMark, 0)
    try publisher.connect(broker.frontendEndpoint)
    if broker.configuration.lastValueCache {
        let ready = try await receiveUntil(publisher, within: .seconds(5)) { $0.bytes == subscription("") }
        try #require(ready, "the broker never subscribed its frontend")
    }
    return publisher
}

private func publish(_ message: BusMessage, on publisher: Socket) async throws {
    try await publisher.send(message.topic, more: true)
    try await publisher.send(message.envelope)
}

/// What a joiner received: its snapshot's advertisements (as frames and decoded), and the reply.
private struct Snapshot {
    let socket: Socket
    var frames: [[[UInt8]]] = []
    var advertisements: [WireAdvertisement] = []
    var reply = WireSnapshotReply()
}

/// Joins as wire.proto says a joiner does: subscribes to "A:" + `typePrefix`, then to a snapshot
/// topic, connects, and collects what arrives on the snapshot topic until its SnapshotReply.
private func takeSnapshot(of typePrefix: String, at broker: Broker, context: Context) async throws -> Snapshot {
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
private func receiveMessage(_ socket: Socket, timeout: Duration) async throws -> [Frame]? {
    guard let first = try await socket.receive(timeout: timeout) else { return nil }
    var frames = [first]
    while frames.last!.hasMore { frames.append(try await socket.receive()) }
    return frames
}

/// Receives single frames until one satisfies `match`; false when `within` passes first.
private func receiveUntil(_ socket: Socket, within timeout: Duration, _ match: (Frame) -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero, let frame = try await socket.receive(timeout: remaining) else { return false }
        if match(frame) { return true }
    }
}

/// The slow joiner: a subscriber misses what is published before its subscription arrives.
/// Publishes `probe` until `subscriber` receives it.
private func awaitDelivery(from publisher: Socket, to subscriber: Socket, probe: BusMessage) async throws {
    let deadline = ContinuousClock.now + .seconds(5)
    while ContinuousClock.now < deadline {
        try await publish(probe, on: publisher)
        if let frames = try await receiveMessage(subscriber, timeout: .milliseconds(20)) {
            #expect(frames.map(\.bytes) == [probe.topic, probe.envelope])
            return
        }
    }
    Issue.record("the subscription never propagated")
    throw CancellationError()
}

/// Polls `condition` until it holds; records an issue and throws when `within` passes first.
private func waitUntil(
    within timeout: Duration, sourceLocation: SourceLocation = #_sourceLocation, _ condition: () -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within \(timeout)", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(5))
    }
}

