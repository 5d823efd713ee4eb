import CHandoffPlugin
import Foundation
@testable import Handoff
import HandoffFuzz
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

/// Seeded fuzzing of every decoder and socket entry point (the budget and seed: ``FuzzBudget``).
/// A crash fails the run; each target then checks that the thing fuzzed still works for everyone.
/// An input that once crashed something becomes a test of its own here.
@Suite("Fuzzing", .exclusive, .serialized)
struct FuzzTests {
    /// A well-formed advertisement of activity "after-the-fuzz-1" from a node of its own.
    static func advertisementAfterTheFuzz(type: String) throws -> [UInt8] {
        var origin = WireNodeRef()
        origin.nodeID = "after-the-fuzz"
        var advertisement = WireAdvertisement()
        advertisement.activityID = "after-the-fuzz-1"
        advertisement.activityType = type
        advertisement.origin = origin
        advertisement.continueEndpoint = "tcp://127.0.0.1:1"
        advertisement.version = 1
        advertisement.leaseMs = 60_000
        return try WireEnvelope(body: .advertisement(advertisement), sender: origin, sequence: 1).serializedBytes()
    }

    @Test("the decoders: envelopes of every kind and what the node makes of them")
    func decoders() {
        var mutator = Mutator(seed: FuzzBudget.seed)
        var decoded = 0
        for _ in 0..<FuzzBudget.inputs {
            let input = mutator.next()
            guard let envelope = try? WireEnvelope.decode(Data(input)) else { continue }
            decoded += 1
            switch envelope.body {
            case .advertisement(let advertisement): _ = DiscoveredActivity(wire: advertisement)
            case .continueReply(let reply):
                if case .activity(let activity) = reply.result { _ = try? ContinuedActivity(wire: activity, continueEndpoint: "tcp://h:1") }
                if case .error(let error) = reply.result { _ = HandoffError(wire: error, activityType: "t") }
            case .nodePresence(let presence):
                var directory = NodeDirectory(capacity: 4)
                directory.heard(presence, lease: .milliseconds(presence.leaseMs), now: .now)
            default: break
            }
            _ = Topic.snapshotTypePrefix(input)
        }
        // A mutator that no longer reaches the decoders' depth, or one that never breaks an
        // envelope, would pass as "no crash" while testing nothing.
        #expect(decoded > 0 && decoded < FuzzBudget.inputs, "\(decoded) of \(FuzzBudget.inputs) inputs decoded as envelopes")
        print("fuzz decoders: \(FuzzBudget.inputs) inputs (seed \(FuzzBudget.seed)), \(decoded) decoded as envelopes, 0 crashes")
    }

    @Test("the plugin descriptor check: fuzzed versions, sizes, names, types and handlers")
    func pluginDescriptors() {
        var mutator = Mutator(seed: FuzzBudget.seed &+ 4)
        var generator = SeededGenerator(seed: FuzzBudget.seed &+ 4)
        func fakeFunction<T>(_: T?.Type) -> T { unsafeBitCast(UnsafeRawPointer(bitPattern: 0x10)!, to: T.self) }
        let count = FuzzBudget.inputs / 10
        var accepted = 0
        for _ in 0..<count {
            // Strings are NUL-terminated and arrays as long as their counts: what C cannot check,
            // the host trusts. Everything else is fair game.
            let texts = (0..<4).map { _ in mutator.int(0..<3) == 0 ? "org.handoff.notes.edit" : String(decoding: mutator.next().prefix(300).map { $0 == 0 ? 0x2E : $0 }, as: UTF8.self) }
            let storage = texts.map { strdup($0) }
            defer { storage.forEach { free($0) } }
            let typeCount = mutator.int(0..<4)
            let types: [UnsafePointer<CChar>?] = (0..<typeCount).map { index in
                mutator.int(0..<8) == 0 ? nil : UnsafePointer(storage[(index + 1) % storage.count])
            }
            types.withUnsafeBufferPointer { typesBuffer in
                var d = handoff_plugin_descriptor()
                d.abi_major = mutator.int(0..<8) == 0 ? UInt32.random(in: 0...3, using: &generator) : PluginLoader.abiVersion.major
                d.abi_minor = mutator.int(0..<8) == 0 ? UInt32.random(in: 0...9, using: &generator) : PluginLoader.abiVersion.minor
                d.struct_size = mutator.int(0..<8) == 0 ? UInt32.random(in: 0...4096, using: &generator) : UInt32(MemoryLayout<handoff_plugin_descriptor>.size)
                d.flags = UInt32.random(in: 0...UInt32.max, using: &generator)
                d.name = mutator.int(0..<8) == 0 ? nil : UnsafePointer(storage[0])
                d.version = mutator.int(0..<8) == 0 ? nil : UnsafePointer(storage[1])
                d.team_id = mutator.int(0..<2) == 0 ? nil : UnsafePointer(storage[2])
                d.activity_types = mutator.int(0..<8) == 0 ? nil : typesBuffer.baseAddress
                d.activity_type_count = d.activity_types == nil ? Int(mutator.int(0..<3)) : typesBuffer.count
                if mutator.int(0..<8) != 0 { d.`init` = fakeFunction(type(of: d.`init`)) }
                if mutator.int(0..<8) != 0 { d.restore = fakeFunction(type(of: d.restore)) }
                if d.activity_types == nil { d.activity_type_count = 0 }
                withUnsafePointer(to: &d) { pointer in
                    if (try? PluginLoader.check(pointer, file: "fuzzed.so")) != nil { accepted += 1 }
                }
            }
        }
        #expect(accepted > 0 && accepted < count, "\(accepted) of \(count) fuzzed descriptors accepted")
        print("fuzz plugin descriptors: \(count) inputs (seed \(FuzzBudget.seed &+ 4)), \(accepted) accepted, 0 crashes")
    }

    @Test("a node's continuation endpoint: mutated requests and stream frames, then a real continue")
    func continuationEndpoint() async throws {
        try await Node.withRunning(testConfiguration("fuzzed")) { node in
            let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
            activity.userInfo = ["draft": "Ada"]
            try await activity.becomeCurrent(on: node)
            let peer = try WirePeer(connectingTo: node.continuationEndpoint)
            var mutator = Mutator(seed: FuzzBudget.seed &+ 1)
            let count = FuzzBudget.inputs / 10
            for _ in 0..<count {
                var frames = [mutator.next()]
                if mutator.int(0..<4) == 0 { frames.append(mutator.next()) }
                try peer.send(frames: frames)
                if mutator.int(0..<64) == 0 { while try await peer.receive(within: .milliseconds(1)) != nil {} }
            }
            var request = WireContinueRequest()
            request.activityID = activity.id
            request.activityType = activity.activityType
            let good = try WirePeer(connectingTo: node.continuationEndpoint)
            try good.send(.continueRequest(request), correlationID: 1)
            let reply = try #require(try await good.receive(within: .seconds(10)))
            guard case .continueReply(let answer) = reply.envelope.body, case .activity = answer.result else {
                Issue.record("after the fuzz, a continue got \(reply.envelope.body as Any)")
                return
            }
            let counters = await node.securityCounters
            print("fuzz continuation endpoint: \(count) inputs (seed \(FuzzBudget.seed &+ 1)), \(counters.malformedContinuation) counted malformed, 0 crashes")
        }
    }

    @Test("a node's bus subscriber: mutated topics and envelopes from a peer, then a real advertisement")
    func busSubscriber() async throws {
        let context = try Context()
        let publisher = try context.socket(.xpub)
        try publisher.set(.sendHighWaterMark, 0)
        try publisher.bind("tcp://127.0.0.1:*")
        try await withNodes([testConfiguration("listener", peers: [try publisher.lastEndpoint])]) { nodes in
            let node = nodes[0]
            while try await publisher.receive().bytes != [1] + Array("A:".utf8) {}
            var mutator = Mutator(seed: FuzzBudget.seed &+ 2)
            let topics = ["A:org.handoff.contacts.edit-contact", "P:6F9619FF-8B86-D011-B42D-00C04FC964FF", "S:", "A:"]
            let count = FuzzBudget.inputs / 10
            for index in 0..<count {
                let topic = Array(topics[index % topics.count].utf8)
                try await publisher.send(mutator.int(0..<8) == 0 ? mutator.next() : topic, more: true)
                try await publisher.send(mutator.next())
            }
            // A real advertisement of a node of its own still gets through.
            try await publisher.send(Array("A:org.handoff.contacts.edit-contact".utf8), more: true)
            try await publisher.send(try Self.advertisementAfterTheFuzz(type: "org.handoff.contacts.edit-contact"))
            #expect(await eventually(within: .seconds(10)) { await node.activities().contains { $0.id == "after-the-fuzz-1" } })
            let counters = await node.securityCounters
            print("fuzz bus subscriber: \(count) inputs (seed \(FuzzBudget.seed &+ 2)), \(counters.malformedBus) counted malformed, 0 crashes")
        }
    }

    @Test("a broker's frontend and backend: mutated publications and subscriptions, then real traffic")
    func broker() async throws {
        let context = try Context()
        let broker = try Broker.start(Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        let publisher = try context.socket(.xpub)
        try publisher.set(.sendHighWaterMark, 0)
        try publisher.connect(broker.frontendEndpoint)
        #expect(try await publisher.receive(timeout: .seconds(5))?.bytes == [1])
        // Upstream: an XSUB may send the backend anything, not only subscriptions.
        let upstream = try context.socket(.xsub)
        try upstream.set(.sendHighWaterMark, 0)
        try upstream.connect(broker.backendEndpoint)
        var mutator = Mutator(seed: FuzzBudget.seed &+ 3)
        let count = FuzzBudget.inputs / 10
        for _ in 0..<count {
            let topic = Array("A:org.handoff.contacts.edit-contact".utf8)
            try await publisher.send(mutator.int(0..<8) == 0 ? mutator.next() : topic, more: true)
            try await publisher.send(mutator.next())
            var subscription = mutator.next()
            if subscription.isEmpty { subscription = [1] }
            subscription[0] = [0, 1, 2][mutator.int(0..<3)]
            try await upstream.send(Array(subscription.prefix(64)))
        }
        // The broker has read everything (it counts each message it reads, dropped ones too).
        let consumed = ContinuousClock.now + .seconds(max(10, count / 10_000))
        while broker.counters.messagesIn < count, ContinuousClock.now < consumed { try await Task.sleep(for: .milliseconds(20)) }
        #expect(broker.counters.messagesIn >= count)
        // Real traffic still flows.
        let subscriber = try context.socket(.sub)
        try subscriber.subscribe("A:org.handoff.notes.")
        try subscriber.connect(broker.backendEndpoint)
        let good = try Self.advertisementAfterTheFuzz(type: "org.handoff.notes.edit")
        var delivered = false
        let deadline = ContinuousClock.now + .seconds(10)
        while !delivered, ContinuousClock.now < deadline {
            try await publisher.send(Array("A:org.handoff.notes.edit".utf8), more: true)
            try await publisher.send(good)
            if let topic = try await subscriber.receive(timeout: .milliseconds(50)) {
                let body = try await subscriber.receive().bytes
                delivered = topic.string == "A:org.handoff.notes.edit" && body == good
            }
        }
        #expect(delivered)
        let counters = broker.counters
        print("fuzz broker: \(count) publications and \(count) upstream messages (seed \(FuzzBudget.seed &+ 3)), \(counters.malformed) counted malformed, \(counters.cachedActivities) cached, 0 crashes")
        await broker.stop()
    }
}
