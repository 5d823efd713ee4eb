import Foundation
@testable import Handoff
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("Node presence", .exclusive, .serialized)
struct PresenceTests {
    @Test("a quiet bus carries one presence per node per interval, not one advertisement per activity")
    func quietBus() async throws {
        let context = try Context()
        let broker = try Broker.start(Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        var configuration = nodeOnBroker("quiet", broker: broker, security: nil)
        configuration.advertiseInterval = .milliseconds(100)
        try await withNodes([configuration, nodeOnBroker("watcher", broker: broker, security: nil)]) { nodes in
            let (a, watcher) = (nodes[0], nodes[1])
            let activities = try await viewContacts(20, currentOn: a)
            #expect(await eventually { await watcher.activities().count == 20 })
            // Started before the tap: a stall that began before the quiet second counted makes its
            // presence late within it. (On one loop per process, the loop the node shares with every
            // test running beside it.)
            let probe = StallProbe.start(alsoOn: EventLoops.shared)
            let tap = try context.socket(.sub)
            try tap.subscribe("A:")
            try tap.subscribe("P:" + a.id)
            try tap.connect(broker.backendEndpoint)
            // Subscribed once a presence arrives (one comes every 100 ms); what came before is passed over.
            #expect(try await tap.receive(timeout: .seconds(5)) != nil, "no presence reached the tap")
            try await Task.sleep(for: .milliseconds(50))
            while try tap.tryReceive() != nil {}
            // One second of a quiet bus: 10 presence intervals, and each lease (300 ms) three times over.
            var advertisements = 0, presences = 0
            let until = ContinuousClock.now + .seconds(1)
            while ContinuousClock.now < until {
                guard let topic = try await tap.receive(timeout: ContinuousClock.now.duration(to: until)) else { break }
                let envelope = try WireEnvelope.decode(try await tap.receive().bytes)
                if topic.string?.hasPrefix("A:") == true { advertisements += 1 }
                if case .nodePresence(let presence) = envelope.body {
                    presences += 1
                    #expect(Set(presence.activityIds) == Set(activities.map(\.id)))
                    #expect(!presence.partial)
                }
            }
            // A machine that held the node or this task back for a while has that many intervals
            // fewer; a node held past its lease (a presence 300 ms after the last: the loop held
            // 200 ms or more) rightly advertises every activity again, once per such stall.
            let stall = probe.stop(), missed = Int(stall / .milliseconds(100))
            let passes = probe.stalls(longerThan: .milliseconds(150))
            #expect(advertisements <= 20 * passes, "re-advertised \(advertisements) times (\(passes) stalls of the loop past the lease)")
            #expect((max(1, 7 - missed)...13).contains(presences), "\(presences) presences (stalled \(stall))")
            // And presence alone kept every activity alive, at the watcher and at the broker.
            #expect(await watcher.activities().count == 20)
            #expect(broker.counters.cachedActivities == 20)
        }
        await broker.stop()
    }

    @Test("presence renews what it lists, drops what it does not; silence lets it lapse")
    func renewsAndDrops() async throws {
        let context = try Context()
        let publisher = try context.socket(.xpub)
        try publisher.bind("tcp://127.0.0.1:*")
        try await withNodes([testConfiguration("observer", peers: [try publisher.lastEndpoint])]) { nodes in
            let observer = nodes[0]
            let events = await observer.discover()
            // The observer's subscriptions: presence, then activities (PUB drops what nobody asked for).
            while try await publisher.receive().bytes != [1] + Array("A:".utf8) {}

            let origin = NodeInfo(id: "origin-node", name: "origin", host: "h").wire
            var sequence: UInt64 = 0
            func send(_ topic: String, _ body: WireEnvelope.OneOf_Body) async throws {
                sequence += 1
                try await publisher.send(Array(topic.utf8), more: true)
                try await publisher.send(try WireEnvelope(body: body, sender: origin, sequence: sequence).serializedBytes() as [UInt8])
            }
            func advertise(_ id: String) async throws {
                var advertisement = WireAdvertisement()
                advertisement.activityID = id
                advertisement.activityType = "org.handoff.test.presence"
                advertisement.origin = origin
                advertisement.continueEndpoint = "tcp://127.0.0.1:1"
                advertisement.version = 1
                advertisement.leaseMs = 300
                try await send("A:org.handoff.test.presence", .advertisement(advertisement))
            }
            func presence(_ ids: [String]) async throws {
                var presence = WireNodePresence()
                presence.node = origin
                // Five times the activity's own lease: renewed every 100 ms by this task, it holds
                // through a stall of more than a second on a loaded machine.
                presence.leaseMs = 1_500
                presence.activityIds = ids
                try await send("P:origin-node", .nodePresence(presence))
            }
            try await advertise("kept")
            try await advertise("dropped")
            #expect(await eventually { await observer.activities().count == 2 })
            // A second of presence listing only one: it outlives its own 300 ms lease three times
            // over; the other is dropped at the first presence, as withdrawn.
            for _ in 0..<10 {
                try await presence(["kept"])
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(await observer.activities().map(\.id) == ["kept"])
            let dropped = await firstEvent(in: events) {
                if case .removed(let activity, .lost) = $0 { activity.id == "dropped" } else { false }
            }
            #expect(dropped != nil)
            // Silence: the node is gone, and its activity with it, within its presence's lease
            // (1.5 s) and the observer's expiry tick, and what the machine held it back.
            let silent = ContinuousClock.now
            let probe = StallProbe.start(alsoOn: EventLoops.shared)
            #expect(await eventually(within: .seconds(6)) { await observer.activities().isEmpty })
            let gone = ContinuousClock.now - silent, stall = probe.stop()
            #expect(gone < .milliseconds(2_500) + stall, "gone after \(gone) (stalled \(stall))")
        }
    }
}
