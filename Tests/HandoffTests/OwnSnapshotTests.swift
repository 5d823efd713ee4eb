import Foundation
import Testing
import ZeroMQ
@testable import Handoff

/// A node's own activities in a broker's snapshot: the node drops its own advertisements that come
/// back through the broker before decoding them, but one answering its snapshot is counted.
@Suite("A node's own activities in a broker's snapshot")
struct OwnSnapshotTests {
    @Test("rule: a node's own echo is dropped unread on a live topic, read on a snapshot topic (the broker's reply counts it); with its own activities counted, nothing is dropped")
    func ownEchoRule() {
        let settings = Follower.Settings(nodeID: "me", defaultLease: .seconds(6), maxKnownPerNode: 10, maxKnown: 10,
                                         replayWindow: .seconds(30), secure: false, snapshotAnswerers: 1)
        let follower = Follower(settings)
        let live = Topic.activity("org.handoff.test.edit")
        let snapshot = Array(Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.handoff.test.").utf8)
        #expect(follower.dropsUnread(topic: live) { true })
        #expect(!follower.dropsUnread(topic: snapshot) { true })
        #expect(!follower.dropsUnread(topic: live) { false })
        var counting = settings
        counting.includeOwnActivities = true
        var asked = false
        #expect(!Follower(counting).dropsUnread(topic: live) { asked = true; return true })
        #expect(!asked, "the envelope is not read when nothing would be dropped")
    }

    @Test("a broker's snapshot that holds the asking node's own activities is complete at once: asked once, not five times (its own echoes were dropped before the snapshot counted them)")
    func ownActivitiesCounted() async throws {
        let context = try Context()
        let broker = try Broker.start(Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        try await withNodes([nodeOnBroker("own", broker: broker, security: nil)]) { nodes in
            let node = nodes[0]
            let activity = try UserActivity(activityType: "org.handoff.test.own.edit")
            activity.title = "its own"
            try await activity.becomeCurrent(on: node)
            #expect(await eventually { broker.counters.cachedActivities == 1 })
            let asked = broker.counters.snapshots
            // A new type prefix followed: the node asks the broker for its snapshot, which holds
            // the node's own activity alone.
            let events = await node.discover(.type(prefix: "org.handoff.test.own."))
            #expect(await eventually { broker.counters.snapshots > asked })
            // Short, it would be asked again after 0.25–0.4 s, then 0.5–0.75 s, 1–1.5 s and 2–3 s.
            try await Task.sleep(for: .milliseconds(1_500))
            #expect(broker.counters.snapshots - asked == 1, "the broker answered \(broker.counters.snapshots - asked) snapshots")
            #expect(await eventually { await node.snapshotsSettled })
            withExtendedLifetime(events) {}
        }
    }
}

extension Node {
    /// Whether every snapshot this node asked for arrived whole (none under way or to be asked again).
    fileprivate var snapshotsSettled: Bool { follower.snapshots.requests.isEmpty }
}
