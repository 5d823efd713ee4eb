import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff

/// A real broker's snapshot answers under a flood of requests (``SnapshotAnswers``): in slices
/// between the bus's bursts, at most 64 under way, a reply alone past them.
@Suite("Broker snapshot answers under a flood, over real sockets", .serialized)
struct BrokerSnapshotFloodTests {
    private static let prefix = "org.handoff.flood."

    /// A broker whose cache holds `count` activities of ``prefix``, and the publisher that sent them.
    private static func cachedBroker(_ count: Int, context: Context) async throws -> (Broker, Socket) {
        let broker = try Broker.start(.ephemeral(cacheCapacity: count + 100, perOrigin: count + 100), context: context)
        let publisher = try await connectPublisher(to: broker, context: context)
        for index in 0..<count { try await publish(try .advertisement(id: "f\(index)", type: prefix + "view"), on: publisher) }
        try await waitUntil(within: .seconds(30)) { broker.counters.cachedActivities == count }
        return (broker, publisher)
    }

    private static func freshTopic() -> String { Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: prefix) }

    @Test("past 64 answers under way a broker answers a snapshot request at once with a reply alone that counts what matches; every other answer arrives whole, its reply counting exactly what it sent")
    func busyReplyAlone() async throws {
        let context = try Context()
        let (broker, publisher) = try await Self.cachedBroker(1_500, context: context)
        let topics = (0..<(SnapshotAnswers.maxUnderWay + 32)).map { _ in Self.freshTopic() }
        let (advertisements, replies) = try await snapshotAnswers(from: broker.backendEndpoint, in: context, to: topics) { broker.counters.subscriptions }
        publisher.close()
        #expect(replies.count == topics.count, "\(replies.count) of \(topics.count) replies")
        let busy = topics.filter { advertisements[$0] == nil }
        #expect(!busy.isEmpty && topics.count - busy.count >= SnapshotAnswers.maxUnderWay, "\(busy.count) busy")
        #expect(busy.allSatisfy { replies[$0] == 1_500 }, "a reply alone counts what matches")
        for topic in topics where advertisements[topic] != nil {
            #expect(advertisements[topic] == 1_500 && replies[topic] == 1_500, "\(topic): \(advertisements[topic] ?? 0) sent, \(replies[topic] ?? -1) in the reply")
        }
        // A request answered twice (CI once saw 25 topics with 3,000 advertisements and the broker
        // count 63 busy against the taps' 32) means a tap's connection was made again: what the
        // broker counted says whether it cut one.
        let counters = broker.counters
        #expect(counters.snapshotsBusy == busy.count, """
            \(counters.snapshots) answered and \(counters.snapshotsBusy) busy for \(topics.count) requests; \(counters.subscriptions) \
            subscriptions; cut: \(counters.subscribersCut) over their bounds, \(counters.unfinishedMessagesCut) for an unfinished message
            """)
        await broker.stop()
    }

    @Test("the bus's live messages pass between the slices of a flood's answers: one published after 64 large answers began arrives while most are still under way, not after them all")
    func liveMessagesOvertakeAnswers() async throws {
        let context = try Context()
        let count = 20_000
        let (broker, publisher) = try await Self.cachedBroker(count, context: context)
        let live = try context.socket(.sub)
        try live.subscribe("A:org.handoff.live.")
        try live.connect(broker.backendEndpoint)
        try await awaitDelivery(from: publisher, to: live, probe: try .advertisement(id: "probe", type: "org.handoff.live.probe"))
        // The flood: 64 answers of 20,000 advertisements each (a second or more of the broker's
        // thread), to a tap that reads none of them.
        let tap = try context.socket(.sub)
        try tap.set(.receiveHighWaterMark, 1)
        for _ in 0..<SnapshotAnswers.maxUnderWay { try tap.subscribe(Self.freshTopic()) }
        let subscribed = broker.counters.subscriptions
        try tap.connect(broker.backendEndpoint)
        try await waitUntil(within: .seconds(10)) { broker.counters.subscriptions >= subscribed + SnapshotAnswers.maxUnderWay }
        let message = try BusMessage.advertisement(id: "during", type: "org.handoff.live.edit")
        try await publish(message, on: publisher)
        var arrived = false
        while let frames = try await receiveMessage(live, timeout: .seconds(20)) {
            guard frames.count == 2, frames[0].bytes == message.topic, frames[1].bytes == message.envelope else { continue }
            arrived = true
            break
        }
        let answered = broker.counters.snapshots
        #expect(arrived)
        // Answered whole before the bus's next burst (as before), all 64 would be.
        #expect(answered < SnapshotAnswers.maxUnderWay / 2, "\(answered) of 64 answers had ended when the live message arrived")
        tap.close()
        live.close()
        publisher.close()
        await broker.stop()
    }

    @Test("a node that joins while a flood holds the broker's answers is answered busy, asks again after its backoff, and once the flood is over learns every activity and is synchronized, with no refresh")
    func joinerDuringFlood() async throws {
        let context = try Context()
        let broker = try Broker.start(.ephemeral(perOrigin: 2_000), context: context)
        var origin = nodeOnBroker("origin", broker: broker, security: nil)
        origin.advertiseInterval = .seconds(60)
        origin.lease = .seconds(180)
        try await withNodes([origin]) { nodes in
            let activities = try await viewContacts(1_500, currentOn: nodes[0])
            try await waitUntil(within: .seconds(10)) { broker.counters.cachedActivities == activities.count }
            let tap = try context.socket(.sub)
            let fresh = { Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.handoff.contacts.") }
            for _ in 0..<SnapshotAnswers.maxUnderWay { try tap.subscribe(fresh()) }
            try tap.connect(broker.backendEndpoint)
            _ = try await tap.receive(timeout: .seconds(5))  // answers under way
            defer { tap.close() }
            var late = nodeOnBroker("late", broker: broker, security: nil)
            late.advertiseInterval = .seconds(60)
            late.lease = .seconds(180)
            late.maxKnownActivitiesPerNode = activities.count
            try await withNodes([late]) { joined in
                // Four fresh requests every 2 ms for 800 ms: each answer that ends frees a place
                // the flood takes again at once.
                let floodEnds = ContinuousClock.now + .milliseconds(800)
                while ContinuousClock.now < floodEnds {
                    for _ in 0..<4 { try tap.subscribe(fresh()) }
                    try await Task.sleep(for: .milliseconds(2))
                }
                #expect(broker.counters.snapshotsBusy > 0, "the flood kept 64 answers under way")
                #expect(await joined[0].untilSynchronized(timeout: .seconds(15)))
                #expect(Set(await joined[0].activities().map(\.id)) == Set(activities.map(\.id)), "every activity, from an answer after the flood")
            }
        }
        await broker.stop()
    }
}
