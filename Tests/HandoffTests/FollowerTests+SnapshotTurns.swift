import Foundation
import HandoffWire
import Logging
import Testing
@testable import Handoff

/// A follower of many prefixes asks for their snapshots a few at a time (``SnapshotTurns``): an
/// answerer answers 64 at once and replies to the rest with its count alone, so a node that asked
/// for 1,500 at once had most of them refused five times, and gave up on them.
extension FollowerTests {
    /// A follower whose snapshot tokens count up from 1 and whose backoffs have no jitter.
    func countingFollower() -> Follower {
        var follower = Follower(settings())
        var counter = 0
        follower.makeToken = { counter += 1; return String(format: "%032x", counter) }
        follower.drawJitter = { 0 }
        return follower
    }

    /// The snapshot topics `actions` subscribe to.
    func snapshotTopics(_ actions: [Follower.Action]) -> [String] {
        subscriptions(actions).filter { $0.hasPrefix("+S:") }.map { String($0.dropFirst()) }
    }

    @Test("a follower of 100 prefixes asks 32 snapshots at once, the next as each ends, each prefix once and in order; one it leaves while it waits is never asked; synchronized when the last is answered")
    func snapshotsTakeTurns() {
        var follower = countingFollower()
        let prefixes = (0..<100).map { String(format: "org.t%03d.", $0) }
        let followed = follower.follow(prefixes)
        #expect(subscriptions(followed).filter { $0.hasPrefix("+A:") }.count == 100, "every prefix subscribed at once")
        var underWay = snapshotTopics(followed)
        #expect(underWay.count == Follower.maxSnapshotsUnderWay)
        let left = follower.unfollow(["org.t099."])
        #expect(subscriptions(left) == ["-A:org.t099."], "waiting, so nothing to unsubscribe but the prefix")
        var asked = underWay.map { Topic.snapshotTypePrefix(Array($0.utf8))! }
        var sequence: UInt64 = 0, mostAtOnce = underWay.count
        while let topic = underWay.first {
            underWay.removeFirst()
            #expect(!follower.isSynchronized, "\(underWay.count) under way")
            sequence += 1
            let answered = hear(&follower, .snapshotReply(WireSnapshotReply(count: 0, typePrefix: "")), from: node("broker"), sequence: sequence, topic: topic)
            #expect(subscriptions(answered).contains("-" + topic))
            let next = snapshotTopics(answered)
            #expect(next.count <= 1, "one ended, one asked")
            underWay += next
            asked += next.map { Topic.snapshotTypePrefix(Array($0.utf8))! }
            mostAtOnce = max(mostAtOnce, underWay.count)
        }
        #expect(asked == Array(prefixes.dropLast()), "each prefix followed asked once, in the order followed")
        #expect(mostAtOnce == Follower.maxSnapshotsUnderWay)
        #expect(follower.isSynchronized)
    }

    @Test("an answerer's busy replies hold the follower's turns: their attempts again go first, and prefixes waiting are asked only as requests end; a reconnection asks each prefix once more, waiting ones once")
    func busyRepliesHoldTurns() {
        var follower = countingFollower()
        let prefixes = (0..<40).map { String(format: "org.t%03d.", $0) }
        let first = snapshotTopics(follower.follow(prefixes))
        #expect(first.count == Follower.maxSnapshotsUnderWay)
        // Every answer busy: each is asked again after its backoff, and nothing new is asked.
        var sequence: UInt64 = 0
        for topic in first {
            sequence += 1
            let short = hear(&follower, .snapshotReply(WireSnapshotReply(count: 5, typePrefix: "")), from: node("broker"), sequence: sequence, topic: topic)
            #expect(snapshotTopics(short).isEmpty, "a busy reply holds its turn")
        }
        let again = snapshotTopics(follower.tick(now: start + SnapshotRequests.firstRetryDelay, date: date))
        #expect(again.count == Follower.maxSnapshotsUnderWay)
        #expect(Set(again.map { Topic.snapshotTypePrefix(Array($0.utf8))! }) == Set(prefixes.prefix(Follower.maxSnapshotsUnderWay)))
        // The bus connection came back: a round for every prefix, those under way owed theirs;
        // the eight waiting stay in line, once each.
        let round = follower.busReconnected(to: "tcp://broker", now: start + .seconds(2))
        #expect(rounds(round) == [.reconnected] && snapshotTopics(round).isEmpty)
        var asked: [String] = []
        for topic in again {
            sequence += 1
            let answered = hear(&follower, .snapshotReply(WireSnapshotReply(count: 0, typePrefix: "")), from: node("broker"), sequence: sequence,
                                at: 2, topic: topic)
            asked += snapshotTopics(answered).map { Topic.snapshotTypePrefix(Array($0.utf8))! }
        }
        #expect(asked.count == Follower.maxSnapshotsUnderWay, "each ended request asks one more: \(asked)")
        #expect(Set(asked.filter { !prefixes.prefix(Follower.maxSnapshotsUnderWay).contains($0) }) == Set(prefixes.suffix(8)), "the waiting ones among them")
        #expect(!follower.isSynchronized, "the owed ones still to come")
    }

    /// The warnings `actions` log.
    func warnings(_ actions: [Follower.Action]) -> [String] {
        actions.compactMap { if case .log(.warning, let line) = $0 { line } else { nil } }
    }

    @Test("snapshots that arrive short are said at once, then at most once a minute with the counts since (asked again, and short after the last attempt), not once per prefix and attempt")
    func shortSnapshotsSaidOnceAMinute() {
        var follower = countingFollower()
        let prefixes = (0..<20).map { String(format: "org.t%03d.", $0) }
        var topics = snapshotTopics(follower.follow(prefixes))
        var said: [(at: Int, line: String)] = [], sequence: UInt64 = 0
        // Every answer short, every attempt, for 70 s: 20 prefixes, five attempts each.
        for millisecond in stride(from: 0, through: 70_000, by: 50) {
            let now = start + .milliseconds(millisecond)
            for topic in topics {
                sequence += 1
                let short = hear(&follower, .snapshotReply(WireSnapshotReply(count: 3, typePrefix: "")), from: node("broker"), sequence: sequence,
                                 at: Double(millisecond) / 1_000, topic: topic)
                said += warnings(short).map { (millisecond, $0) }
            }
            let ticked = follower.tick(now: now, date: date.addingTimeInterval(Double(millisecond) / 1_000))
            said += warnings(ticked).map { (millisecond, $0) }
            topics = snapshotTopics(ticked)
        }
        #expect(said.count == 2, "\(said)")
        #expect(said.first?.at == 0 && said.first?.line.contains("1 asked again") == true, "\(said)")
        #expect(said.last?.at == 60_000, "said on the tick a minute after the first: \(said)")
        #expect(said.last?.line.contains("79 asked again") == true && said.last?.line.contains("20 still short after the last attempt") == true, "\(said)")
        #expect(follower.isSynchronized)
    }
}
