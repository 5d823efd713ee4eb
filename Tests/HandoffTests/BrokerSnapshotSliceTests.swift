import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
@testable import Handoff

/// A broker's snapshot answers as its core decides them (``SnapshotAnswers``), with no socket and
/// no clock: requests in, slices out. (BrokerSnapshotFloodTests floods a real broker.)
@Suite("Broker snapshot answers (state, no sockets)")
struct BrokerSnapshotSliceTests {
    private static let start = ContinuousClock.now

    /// What one slice handed to the socket: the advertisements' ids, and the replies' counts.
    struct Slice {
        var ids: [String] = []
        var replies: [UInt32] = []
        var topics: Set<[UInt8]> = []
    }

    private static func core(sliceSize: Int, capacity: Int = 1_000) -> BrokerCore {
        BrokerCore(
            cacheEnabled: true, cache: LastValueCache(capacity: capacity, perOriginQuota: capacity, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@test", name: "broker", host: "test", publicKey: nil).wire, snapshotSliceSize: sliceSize)
    }

    private static func cache(_ ids: [String], in core: inout BrokerCore, version: UInt64 = 1) {
        for id in ids { _ = core.publisherMessage(BrokerCoreTests.advertisement(id, from: "n1", version: version), connectionKey: nil, now: start) }
    }

    private static func topic(_ token: Int, prefix: String = "org.test.") -> [UInt8] {
        Array(Topic.snapshot(token: String(format: "%032x", token), typePrefix: prefix).utf8)
    }

    private static func slice(_ core: inout BrokerCore, refusing refused: Set<String> = []) -> Slice {
        var slice = Slice()
        core.snapshotSlice(now: start) { topic, bytes in
            slice.topics.insert(topic)
            guard let envelope = try? WireEnvelope.decode(Data(bytes)) else { return false }
            switch envelope.body {
            case .advertisement(let advertisement):
                slice.ids.append(advertisement.activityID)
                return !refused.contains(advertisement.activityID)
            case .snapshotReply(let reply):
                slice.replies.append(reply.count)
            default:
                Issue.record("\(envelope) in a snapshot answer")
            }
            return true
        }
        return slice
    }

    private static func reply(_ bytes: [UInt8]?) throws -> WireSnapshotReply {
        let envelope = try WireEnvelope.decode(Data(try #require(bytes)))
        guard case .snapshotReply(let reply) = envelope.body else { throw CancellationError() }
        return reply
    }

    @Test("an answer goes out a slice per round, and its reply after its last advertisement counts what the socket took")
    func slices() {
        var core = Self.core(sliceSize: 3)
        let ids = (0..<7).map { "a\($0)" }
        Self.cache(ids, in: &core)
        #expect(core.beginSnapshot(topic: Self.topic(1), typePrefix: "org.test.", now: Self.start) == nil)
        let first = Self.slice(&core), second = Self.slice(&core, refusing: ["a4"]), third = Self.slice(&core)
        #expect(first.ids.count == 3 && first.replies.isEmpty)
        #expect(second.ids.count == 3 && second.replies.isEmpty)
        #expect(third.ids.count == 1 && third.replies == [6], "seven sent, one refused by the socket")
        #expect(Set(first.ids + second.ids + third.ids) == Set(ids))
        #expect(!core.snapshotsUnderWay)
        #expect(core.counters.snapshots == 1 && core.counters.snapshotAdvertisements == 6 && core.counters.snapshotsBusy == 0)
    }

    @Test("a slice sends each activity as cached now: one withdrawn between slices is left out, an update goes as updated")
    func slicesReadTheCacheAsItIsNow() {
        var core = Self.core(sliceSize: 2)
        Self.cache(["a0", "a1", "a2", "a3", "a4"], in: &core)
        #expect(core.beginSnapshot(topic: Self.topic(1), typePrefix: "org.test.", now: Self.start) == nil)
        let first = Self.slice(&core)
        #expect(first.ids == ["a0", "a1"])
        // a3 withdrawn (a full presence that no longer lists it), a2 updated, both between rounds.
        _ = core.publisherMessage(BrokerCoreTests.presence(of: "n1", listing: ["a0", "a1", "a2", "a4"]), connectionKey: nil, now: Self.start)
        Self.cache(["a2"], in: &core, version: 2)
        var rest = Slice(), versions: [String: UInt64] = [:]
        while core.snapshotsUnderWay {
            core.snapshotSlice(now: Self.start) { _, bytes in
                guard let envelope = try? WireEnvelope.decode(Data(bytes)) else { return false }
                if case .advertisement(let advertisement) = envelope.body { versions[advertisement.activityID] = advertisement.version }
                if case .snapshotReply(let reply) = envelope.body { rest.replies.append(reply.count) }
                return true
            }
        }
        #expect(versions == ["a2": 2, "a4": 1])
        #expect(rest.replies == [4])
    }

    @Test("answers go in the order asked, each whole before the next; the same request twice is one answer")
    func order() {
        var core = Self.core(sliceSize: 5)
        Self.cache(["a0", "a1", "a2"], in: &core)
        for token in [1, 2, 1] { #expect(core.beginSnapshot(topic: Self.topic(token), typePrefix: "org.test.", now: Self.start) == nil) }
        #expect(core.snapshotAnswers.underWay.map(\.topic) == [Self.topic(1), Self.topic(2)])
        let first = Self.slice(&core)
        #expect(first.replies == [3] && first.topics == [Self.topic(1), Self.topic(2)], "the first whole, then the second begun")
        let second = Self.slice(&core)
        #expect(second.ids.count == 2 && second.replies == [3] && second.topics == [Self.topic(2)])
        #expect(!core.snapshotsUnderWay)
    }

    @Test("past 64 answers under way a request is answered at once with a count of at least what matches, and counted busy")
    func busyPastTheCap() throws {
        var core = Self.core(sliceSize: 256)
        Self.cache(["a0", "a1", "a2"], in: &core)
        for token in 0..<SnapshotAnswers.maxUnderWay {
            #expect(core.beginSnapshot(topic: Self.topic(token), typePrefix: "org.test.", now: Self.start) == nil)
        }
        let busy = try Self.reply(core.beginSnapshot(topic: Self.topic(999), typePrefix: "org.test.", now: Self.start))
        #expect(busy.count == 3 && busy.typePrefix == "org.test.", "its asker finds it short and asks again")
        let none = try Self.reply(core.beginSnapshot(topic: Self.topic(998, prefix: "org.none."), typePrefix: "org.none.", now: Self.start))
        // Counted within 10 ms of the walk before: every cached activity, at least what matches.
        #expect(none.count == 3)
        // With the cache empty there is nothing to ask again for.
        var empty = Self.core(sliceSize: 256)
        for token in 0..<SnapshotAnswers.maxUnderWay { _ = empty.beginSnapshot(topic: Self.topic(token), typePrefix: "org.test.", now: Self.start) }
        let nothing = try Self.reply(empty.beginSnapshot(topic: Self.topic(999), typePrefix: "org.test.", now: Self.start))
        #expect(nothing.count == 0)
        #expect(core.counters.snapshotsBusy == 2 && core.snapshotAnswers.underWay.count == SnapshotAnswers.maxUnderWay)
        // Once one is whole there is room again.
        _ = Self.slice(&core)
        #expect(core.beginSnapshot(topic: Self.topic(997), typePrefix: "org.test.", now: Self.start) == nil)
    }

    @Test("an asker that unsubscribes from its snapshot topic has the rest of its answer dropped; what it was sent stays counted")
    func unsubscribeCancels() {
        var core = Self.core(sliceSize: 1)
        Self.cache(["a0", "a1", "a2"], in: &core)
        #expect(core.beginSnapshot(topic: Self.topic(1), typePrefix: "org.test.", now: Self.start) == nil)
        #expect(core.beginSnapshot(topic: Self.topic(2), typePrefix: "org.test.", now: Self.start) == nil)
        _ = Self.slice(&core)
        #expect(core.subscriberMessage([Frame([0] + Self.topic(1))], key: nil, relay: false, now: Self.start) == .keep)
        #expect(core.snapshotAnswers.underWay.map(\.topic) == [Self.topic(2)])
        #expect(core.counters.snapshotAdvertisements == 1 && core.counters.snapshots == 0)
        // A live topic's unsubscription cancels nothing.
        _ = core.subscriberMessage([Frame([0] + Array("A:org.test.".utf8))], key: nil, relay: false, now: Self.start)
        #expect(core.snapshotAnswers.underWay.count == 1)
    }

    @Test("a slice looks at a bounded number of cache slots: a narrow prefix in a large cache spans rounds")
    func slotsPerSlice() {
        var core = Self.core(sliceSize: 1)
        let slots = core.snapshotAnswers.slotsPerSlice
        Self.cache((0..<(2 * slots + 5)).map { "a\($0)" }, in: &core)
        #expect(core.beginSnapshot(topic: Self.topic(1, prefix: "org.none."), typePrefix: "org.none.", now: Self.start) == nil)
        #expect(Self.slice(&core).replies.isEmpty && core.snapshotsUnderWay)
        #expect(Self.slice(&core).replies.isEmpty && core.snapshotsUnderWay)
        #expect(Self.slice(&core).replies == [0] && !core.snapshotsUnderWay)
    }

    @Test("a busy reply's count is kept 100 ms per prefix, and the cache is walked at most once per 10 ms; between walks every cached activity is the count")
    func busyCounts() {
        var answers = SnapshotAnswers()
        var walks = 0
        func count(_ prefix: String, at milliseconds: Int) -> Int {
            answers.busyCount(of: prefix, now: Self.start + .milliseconds(milliseconds), everything: 100) {
                walks += 1
                return prefix.count
            }
        }
        #expect(count("org.a.", at: 0) == 6 && walks == 1)
        #expect(count("org.a.", at: 50) == 6 && walks == 1, "kept")
        #expect(count("org.bb.", at: 5) == 100 && walks == 1, "a walk 5 ms ago: every activity")
        #expect(count("org.bb.", at: 20) == 7 && walks == 2)
        #expect(count("org.a.", at: 150) == 6 && walks == 3, "taken anew after 100 ms")
        for index in 0..<200 { _ = count("org.\(index).", at: 200 + 10 * index) }
        #expect(walks <= 3 + 200, "at most one walk per request, and one per 10 ms")
    }
}
