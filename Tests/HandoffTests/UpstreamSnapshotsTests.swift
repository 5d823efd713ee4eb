import Foundation
import Testing
@testable import Handoff

/// The snapshots a site's broker asks its upstream for (``UpstreamSnapshots``), with no socket and
/// no clock: asks, arrivals and replies in, topics to (un)subscribe out.
@Suite("A site's snapshots upstream (state, no sockets)")
struct UpstreamSnapshotsTests {
    private static let start = ContinuousClock.now
    private static func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }
    private static let site = SiteName.random()

    /// A token whose every digit differs from another value's (the site's own token keeps a part of it).
    private static func token(_ value: Int) -> String { String(repeating: String(format: "%x", value % 16), count: 32) }

    @Test("rule: one request per type prefix at a time; a whole answer ends it (unsubscribe), with nothing to ask again")
    func wholeAnswer() throws {
        var snapshots = UpstreamSnapshots(site: Self.site)
        let asked = snapshots.ask("org.a.", now: Self.start, randomToken: Self.token(1))
        let topic = try #require(asked)
        let second = snapshots.ask("org.a.", now: Self.start, randomToken: Self.token(2))
        #expect(second == nil)
        #expect(snapshots.typePrefix(of: topic) == "org.a.")
        for _ in 0..<3 { snapshots.advertisementArrived(on: topic, now: Self.at(1)) }
        let over = snapshots.replyArrived(on: topic, count: 3, now: Self.at(2), jitter: 0)
        #expect(over)
        #expect(!snapshots.awaitsAnswers && snapshots.nextRetry == nil && snapshots.requests.isEmpty)
    }

    @Test("rule: a short answer (an upstream busy with 64 answers replies with its count alone) is asked again with a new token after 250 ms, doubling, at most five attempts")
    func shortAnswerAskedAgain() throws {
        var snapshots = UpstreamSnapshots(site: Self.site)
        let first = snapshots.ask("org.a.", now: Self.start, randomToken: Self.token(1))
        var topic = try #require(first)
        var now = 0, asked: [Int] = [0]
        for attempt in 1...5 {
            let over = snapshots.replyArrived(on: topic, count: 10, now: Self.at(now), jitter: 0)
            #expect(over, "attempt \(attempt): over, unsubscribed")
            guard attempt < 5 else { break }
            let due = try #require(snapshots.nextRetry)
            let early = snapshots.dueRetries(now: due - .milliseconds(1), randomToken: { Self.token(99) })
            #expect(early.isEmpty)
            now = Int((due - Self.start) / .milliseconds(1))
            let again = snapshots.dueRetries(now: due, randomToken: { Self.token(attempt + 1) })
            #expect(again.count == 1 && again.first != topic)
            topic = try #require(again.first)
            asked.append(now)
        }
        #expect(zip(asked, asked.dropFirst()).map { $1 - $0 } == [250, 500, 1_000, 2_000], "the node's backoff")
        #expect(snapshots.requests.isEmpty, "after the fifth, what there is stands (refreshes fill the rest)")
    }

    @Test("rule: with a pair upstream both replies are waited for; one that never comes is given a second after the other's last message")
    func pairWaitsForBoth() throws {
        var snapshots = UpstreamSnapshots(site: Self.site, upstreams: 2)
        let asked = snapshots.ask("org.a.", now: Self.start, randomToken: Self.token(1))
        let topic = try #require(asked)
        for _ in 0..<2 { snapshots.advertisementArrived(on: topic, now: Self.at(1)) }
        let over = snapshots.replyArrived(on: topic, count: 2, now: Self.at(2), jitter: 0)
        #expect(!over, "the other's answer may still come")
        let early = snapshots.expired(now: Self.at(500)), late = snapshots.expired(now: Self.at(1_003))
        #expect(early.isEmpty)
        #expect(late == [topic])
        #expect(snapshots.requests.isEmpty, "whole: what the one that replied sent arrived")
    }

    @Test("rule: a request whose answer has not begun within 30 s (unless it is still arriving) is dropped and asked again after the backoff")
    func timeout() throws {
        var snapshots = UpstreamSnapshots(site: Self.site)
        let askedA = snapshots.ask("org.a.", now: Self.start, randomToken: Self.token(1))
        let askedB = snapshots.ask("org.b.", now: Self.start, randomToken: Self.token(2))
        let silent = try #require(askedA), slow = try #require(askedB)
        snapshots.advertisementArrived(on: slow, now: Self.at(29_000))
        let first = snapshots.expired(now: Self.at(30_001), jitter: { 0 })
        #expect(first == [silent])
        #expect(snapshots.typePrefix(of: slow) == "org.b.", "its answer is still arriving")
        let due = try #require(snapshots.nextRetry)
        #expect(due == Self.at(30_001) + .milliseconds(250))
        let again = snapshots.dueRetries(now: due, randomToken: { Self.token(3) })
        #expect(again.count == 1 && again.first.flatMap { snapshots.typePrefix(of: $0) } == "org.a.")
        let second = snapshots.expired(now: Self.at(59_001), jitter: { 0 })
        #expect(second == [slow])
    }

    @Test("rule: at most 16 prefixes are asked at once; the others wait their turn in the order asked, each asked as one ends; a prefix nothing follows any more is dropped, asked or waiting")
    func turnsAndCancel() throws {
        var snapshots = UpstreamSnapshots(site: Self.site)
        let prefixes = (0..<20).map { "org.t\($0)." }
        var token = 0
        func nextToken() -> String {
            token += 1
            return Self.token(token)
        }
        let asked = prefixes.map { snapshots.ask($0, now: Self.start, randomToken: nextToken()) }
        #expect(asked.prefix(UpstreamSnapshots.maxUnderWay).allSatisfy { $0 != nil })
        #expect(asked.dropFirst(UpstreamSnapshots.maxUnderWay).allSatisfy { $0 == nil })
        #expect(snapshots.waitingTurn == 4 && snapshots.nextRetry == nil)
        #expect(snapshots.ask("org.t18.", now: Self.start, randomToken: nextToken()) == nil && snapshots.waitingTurn == 4, "asked once")
        // One answer whole: the next in line may be asked at once.
        let first = try #require(asked[0])
        let over = snapshots.replyArrived(on: first, count: 0, now: Self.at(5), jitter: 0)
        #expect(over && snapshots.nextRetry == Self.at(5))
        let turn = snapshots.dueRetries(now: Self.at(5), randomToken: nextToken)
        #expect(turn.compactMap { snapshots.typePrefix(of: $0) } == ["org.t16."])
        #expect(snapshots.nextRetry == nil)
        // Cancelled while it waited: skipped. Cancelled under way: unsubscribed, and its turn freed.
        let waiting = snapshots.cancel("org.t17.", now: Self.at(6))
        #expect(waiting.isEmpty && snapshots.waitingTurn == 2)
        let underWay = try #require(asked[3])
        let cancelled = snapshots.cancel("org.t3.", now: Self.at(7))
        #expect(cancelled == [underWay] && snapshots.typePrefix(of: underWay) == nil)
        let next = snapshots.dueRetries(now: Self.at(7), randomToken: nextToken)
        #expect(next.compactMap { snapshots.typePrefix(of: $0) } == ["org.t18."])
        #expect(snapshots.waitingTurn == 1 && !snapshots.isIdle)
        // A subscriber following and leaving a prefix over and over while every turn is taken:
        // the queue holds a bounded number of entries.
        for cycle in 0..<10_000 {
            _ = snapshots.ask("org.churn.", now: Self.at(10 + cycle), randomToken: nextToken())
            _ = snapshots.cancel("org.churn.", now: Self.at(10 + cycle))
        }
        #expect(snapshots.queueEntries <= 2 * snapshots.waitingTurn + 65, "\(snapshots.queueEntries) entries")
    }
}
