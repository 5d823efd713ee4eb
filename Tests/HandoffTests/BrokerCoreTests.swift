import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
@testable import Handoff

/// The broker's decisions with no socket and no clock: messages and times in, verdicts and counters
/// out. (BrokerTests and SecurityTests run the same rules through a real broker.)
@Suite("Broker core (state, no sockets)")
struct BrokerCoreTests {
    private static let start = ContinuousClock.now

    /// The machine in a box, so that a verdict can be asked for inside `#expect`.
    private final class Core {
        var state: BrokerCore
        init(_ state: BrokerCore) { self.state = state }
        var counters: Broker.Counters { state.counters }
        func publisherMessage(_ frames: [Frame], connectionKey: [UInt8]?, now: ContinuousClock.Instant) -> BrokerCore.PublisherVerdict {
            state.publisherMessage(frames, connectionKey: connectionKey, now: now)
        }
        func subscriberMessage(_ frames: [Frame]) -> BrokerCore.SubscriberVerdict { state.subscriberMessage(frames, key: nil, relay: false, now: .now) }
        func snapshot(typePrefix: String, now: ContinuousClock.Instant) -> [[UInt8]] { state.snapshot(typePrefix: typePrefix, now: now) }
        func snapshotReply(typePrefix: String, topicSize: Int, sent: Int, sentBytes: Int) -> [UInt8] {
            state.snapshotReply(typePrefix: typePrefix, topicSize: topicSize, sent: sent, sentBytes: sentBytes)
        }
        func expire(now: ContinuousClock.Instant) -> Bool { state.expire(now: now) }
        func droppedOverlong(fromPublisher: Bool) { state.droppedOverlong(fromPublisher: fromPublisher) }
    }

    private func core(quota: Int = 1_000, cache: Bool = true) -> Core {
        Core(BrokerCore(
            cacheEnabled: cache,
            cache: LastValueCache(capacity: 100, perOriginQuota: quota, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@test", name: "broker", host: "test", publicKey: nil).wire))
    }

    @Test("a valid advertisement is cached and forwarded, counted before it is passed on")
    func forwardsAndCaches() {
        let core = core()
        let frames = Self.advertisement("a1", from: "n1")
        #expect(core.publisherMessage(frames, connectionKey: nil, now: Self.start) == .forward(askToReadvertise: nil))
        let counters = core.counters
        #expect(counters.messagesIn == 1 && counters.messagesOut == 1 && counters.cachedActivities == 1)
        #expect(counters.bytesIn == frames[0].count + frames[1].count && counters.bytesOut == counters.bytesIn)
        // The cache's own copy: the envelope byte for byte.
        #expect(core.snapshot(typePrefix: "org.test.", now: Self.start) == [frames[1].bytes])
        #expect(core.snapshot(typePrefix: "org.other.", now: Self.start).isEmpty)
        // Past its lease (60 s), it expires.
        #expect(core.expire(now: Self.start + .seconds(61)))
        #expect(core.counters.cachedActivities == 0)
    }

    @Test("garbage is forwarded and counted malformed, never cached; a message too long is dropped and counted")
    func malformed() {
        let core = core()
        #expect(core.publisherMessage([Frame(Array("A:x".utf8)), Frame([0xFF, 0x01])], connectionKey: nil, now: Self.start) == .forward(askToReadvertise: nil))
        core.droppedOverlong(fromPublisher: true)
        #expect(core.counters.malformed == 2 && core.counters.messagesIn == 2 && core.counters.messagesOut == 1)
        #expect(core.counters.cachedActivities == 0)
    }

    @Test("a message naming an activity id past 128 bytes (or none), or a node id past 128, is dropped and counted malformed, never cached")
    func pastContractLengths() {
        let core = core()
        let longest = String(repeating: "i", count: WireLimits.maxActivityID)
        #expect(core.publisherMessage(Self.advertisement(longest, from: "n1"), connectionKey: nil, now: Self.start) == .forward(askToReadvertise: nil))
        for frames in [Self.advertisement(longest + "i", from: "n1"), Self.advertisement("", from: "n1"),
                       Self.advertisement("a2", from: String(repeating: "n", count: WireLimits.maxNodeID + 1))] {
            let verdict = core.publisherMessage(frames, connectionKey: nil, now: Self.start)
            guard case .pastLengths(let reason) = verdict else {
                Issue.record("taken: \(verdict)")
                continue
            }
            #expect(reason.contains("bytes"))
        }
        #expect(core.counters.malformed == 3 && core.counters.messagesIn == 4 && core.counters.messagesOut == 1)
        #expect(core.counters.cachedActivities == 1)
    }

    @Test("only the broker publishes on snapshot topics")
    func snapshotTopicIsTheBrokers() {
        let core = core()
        let verdict = core.publisherMessage([Frame(Array("S:0123/org.".utf8)), Self.advertisement("a1", from: "n1")[1]], connectionKey: nil, now: Self.start)
        guard case .forged = verdict else { Issue.record("\(verdict)"); return }
        #expect(core.counters.forged == 1 && core.counters.messagesOut == 0 && core.counters.cachedActivities == 0)
    }

    @Test("with CURVE, a message must name its connection's key, speak for itself, and not touch another key's activity")
    func senderCheck() {
        let core = core()
        let alice: [UInt8] = Array(repeating: 1, count: 32), mallory: [UInt8] = Array(repeating: 2, count: 32)
        #expect(core.publisherMessage(Self.advertisement("a1", from: "alice", key: alice), connectionKey: alice, now: Self.start) == .forward(askToReadvertise: nil))
        // Mallory's connection, an envelope naming Alice's key.
        guard case .forged = core.publisherMessage(Self.advertisement("a2", from: "alice", key: alice), connectionKey: mallory, now: Self.start) else {
            Issue.record("a message naming another key was forwarded"); return
        }
        // Mallory under her own key, about Alice's activity.
        guard case .forged = core.publisherMessage(Self.advertisement("a1", from: "mallory", key: mallory, version: 2), connectionKey: mallory, now: Self.start) else {
            Issue.record("a message about another key's activity was forwarded"); return
        }
        #expect(core.counters.forged == 2 && core.counters.cachedActivities == 1)
    }

    @Test("an origin over its quota is refused its new activities, not its updates")
    func quota() {
        let core = core(quota: 2)
        for id in ["a1", "a2"] { #expect(core.publisherMessage(Self.advertisement(id, from: "n1"), connectionKey: nil, now: Self.start) == .forward(askToReadvertise: nil)) }
        #expect(core.publisherMessage(Self.advertisement("a3", from: "n1"), connectionKey: nil, now: Self.start) == .overQuota(activityID: "a3", origin: "n1"))
        #expect(core.publisherMessage(Self.advertisement("a1", from: "n1", version: 2), connectionKey: nil, now: Self.start) == .forward(askToReadvertise: nil))
        #expect(core.counters.overQuota == 1 && core.counters.cachedActivities == 2)
    }

    @Test("a presence listing what the cache lacks asks its origin to advertise again, at most once a second")
    func readvertise() {
        let core = core()
        _ = core.publisherMessage(Self.advertisement("a1", from: "n1"), connectionKey: nil, now: Self.start)
        #expect(core.publisherMessage(Self.presence(of: "n1", listing: ["a1"]), connectionKey: nil, now: Self.start) == .forward(askToReadvertise: nil))
        #expect(core.publisherMessage(Self.presence(of: "n1", listing: ["a1", "a2"]), connectionKey: nil, now: Self.start) == .forward(askToReadvertise: "n1"))
        #expect(core.publisherMessage(Self.presence(of: "n1", listing: ["a1", "a2"]), connectionKey: nil, now: Self.start + .milliseconds(500)) == .forward(askToReadvertise: nil))
        #expect(core.publisherMessage(Self.presence(of: "n1", listing: ["a1", "a2"]), connectionKey: nil, now: Self.start + .milliseconds(1_001)) == .forward(askToReadvertise: "n1"))
        // A full presence that no longer lists a1: the withdrawal was lost, the cache forgets it.
        _ = core.publisherMessage(Self.presence(of: "n1", listing: []), connectionKey: nil, now: Self.start + .seconds(2))
        #expect(core.counters.cachedActivities == 0)
    }

    @Test("on a secure broker, a copy the cache let lapse asks its origin again when listed, though its key is held back for what the cache always lacks; once per lapse")
    func lapsedCopyAsksThroughTheHold() {
        let core = Core(BrokerCore(
            cacheEnabled: true, cache: LastValueCache(capacity: 100, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@test", name: "broker", host: "test", publicKey: nil).wire, keysChecked: true))
        let key = [UInt8](repeating: 7, count: 32)
        let at = { (ms: Int) in Self.start + .milliseconds(ms) }
        func presence(_ ms: Int, leaseMs: UInt32 = 6_000) -> BrokerCore.PublisherVerdict {
            core.publisherMessage(Self.presence(of: "n1", listing: ["a1", "never"], key: key, leaseMs: leaseMs), connectionKey: key, now: at(ms))
        }
        #expect(core.publisherMessage(Self.advertisement("a1", from: "n1", key: key, leaseMs: 1_000), connectionKey: key, now: at(0)) == .forward(askToReadvertise: nil))
        // "never" is lacking for good: asked once, then the key is held back for it.
        #expect(presence(0) == .forward(askToReadvertise: "n1"))
        #expect(presence(5_000, leaseMs: 1_000) == .forward(askToReadvertise: nil))
        // a1's copy lapses (its origin stopped past the lease), the key still held back.
        _ = core.expire(now: at(6_100))
        #expect(core.counters.cachedActivities == 0 && core.state.readvertiseRequests.lapsedCopiesCount == 1)
        #expect(core.state.readvertiseRequests.isHeldBack(key, now: at(6_200)))
        #expect(presence(6_200) == .forward(askToReadvertise: "n1"))
        // Asked once for the lapse: spent, the hold stands for the rest; counted for operators.
        #expect(core.state.readvertiseRequests.lapsedCopiesCount == 0)
        #expect(core.counters.readvertiseRequests == 2 && core.counters.readvertiseLapsed == 1)
    }

    @Test("a subscriber's snapshot request is answered here; plain subscriptions reach publishers only without the cache")
    func subscribers() {
        let core = core()
        let topic = Array(Topic.snapshot(token: String(repeating: "a", count: 32), typePrefix: "org.test.").utf8)
        #expect(core.subscriberMessage([Frame([1] + topic)]) == .answerSnapshot(topic: topic, typePrefix: "org.test."))
        #expect(core.subscriberMessage([Frame([0] + topic)]) == .keep)
        #expect(core.subscriberMessage([Frame([1] + Array("A:org.".utf8))]) == .keep)
        let plain = self.core(cache: false)
        #expect(plain.subscriberMessage([Frame([1] + Array("A:org.".utf8))]) == .forwardToPublishers([1] + Array("A:org.".utf8)))
        #expect(plain.subscriberMessage([Frame([0] + topic)]) == .keep)
        #expect(core.counters.subscriptions == 2 && core.counters.unsubscriptions == 1)
    }

    @Test("a snapshot reply says how many advertisements reached the subscriber, and is counted with them")
    func snapshotReply() throws {
        let core = core()
        for id in ["a1", "a2"] { _ = core.publisherMessage(Self.advertisement(id, from: "n1"), connectionKey: nil, now: Self.start) }
        let before = core.counters
        let reply = core.snapshotReply(typePrefix: "org.test.", topicSize: 40, sent: 1, sentBytes: 300)
        let envelope = try WireEnvelope.decode(Data(reply))
        guard case .snapshotReply(let answer) = envelope.body else { Issue.record("not a snapshot reply"); return }
        #expect(answer.count == 1 && answer.typePrefix == "org.test.")
        #expect(core.counters.snapshots == 1 && core.counters.snapshotAdvertisements == 1)
        #expect(core.counters.messagesOut == before.messagesOut + 2)
        #expect(core.counters.bytesOut == before.bytesOut + 300 + 40 + reply.count)
    }
}
