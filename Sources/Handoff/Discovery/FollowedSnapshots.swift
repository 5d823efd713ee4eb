import Foundation
import Logging

/// The snapshots of what a follower follows, deciding with no I/O (wire.proto, "Snapshots"): one
/// asked for each prefix followed; at most ``Follower/Settings/snapshotsAtOnce`` under way, the
/// rest waiting their turn in the order followed (``SnapshotTurns``); one that arrived short asked
/// again after a backoff, up to five attempts (``SnapshotRequests``); every prefix asked again in a
/// round of resynchronization, or once its request under way has ended; what arrived short said at
/// once, then at most once a minute (``ShortSnapshotReport``). Its actions are the follower's:
/// subscribing to a snapshot's topic is asking for it, unsubscribing ends it.
struct FollowedSnapshots {
    /// How long a snapshot waits for its other answerers once one replied.
    static let grace = Duration.seconds(1)

    /// The requests under way, waiting to be asked again, or owed by a round.
    private(set) var requests: SnapshotRequests
    /// Prefixes whose first request waits for one under way to end.
    private(set) var turns = SnapshotTurns()
    private var shortReport = ShortSnapshotReport()
    /// The most requests under way at once (a request waiting to be asked again holds its turn).
    let atOnce: Int
    /// Makes a snapshot request's random token (passed in, for a seeded simulation).
    var makeToken: () -> String = Topic.newSnapshotToken
    /// Draws a snapshot backoff's jitter, in 0..<1 (passed in likewise).
    var drawJitter: () -> Double = { Double.random(in: 0..<1) }

    init(answerers: Int, atOnce: Int) {
        requests = SnapshotRequests(expectedReplies: answerers)
        self.atOnce = atOnce
    }

    /// Whether every snapshot asked for has arrived, and none waits its turn.
    var isSettled: Bool { requests.isEmpty && turns.isEmpty }

    /// Asks for `typePrefix`'s snapshot. A first request waits its turn, behind those waiting
    /// already, while ``atOnce`` are under way (a round's requests for prefixes under way, asked as
    /// those end, too: a prefix never asked is not passed by rounds that keep coming); an attempt
    /// again holds the turn of the request it follows.
    mutating func ask(_ typePrefix: String, attempt: Int = 1) -> [Follower.Action] {
        guard requests.expectedReplies > 0 else { return [] }
        if attempt == 1, !turns.isEmpty || requests.underWay >= atOnce {
            turns.append(typePrefix)
            return []
        }
        return [start(typePrefix, attempt: attempt)]
    }

    /// `typePrefix` is no longer followed: its turn given up, its requests ended. The caller asks
    /// the waiting turns (``askWaitingTurns()``) once it has let go of all it leaves.
    mutating func cancel(_ typePrefix: String) -> [Follower.Action] {
        turns.remove(typePrefix)
        return requests.cancel(typePrefix: typePrefix).map(Follower.Action.unsubscribe)
    }

    /// The prefixes waiting whose turn came, asked.
    mutating func askWaitingTurns() -> [Follower.Action] {
        var actions: [Follower.Action] = []
        while requests.underWay < atOnce, let typePrefix = turns.next() {
            actions.append(start(typePrefix))
        }
        return actions
    }

    /// A round of resynchronization, for `reason`: the snapshot of every prefix `followed`, now,
    /// or once its request under way has ended.
    mutating func askAgain(_ reason: Resynchronization.Reason, followed: Set<String>) -> [Follower.Action] {
        [.snapshotRound(reason)] + followed.sorted().filter { requests.wanted(typePrefix: $0) }.flatMap { ask($0) }
    }

    /// An advertisement on a snapshot topic: whether it answers a request under way.
    mutating func advertisementArrived(on topic: String, now: ContinuousClock.Instant) -> Bool {
        requests.advertisementArrived(on: topic, now: now)
    }

    /// An answerer's reply on `topic`, saying it sent `count` advertisements.
    mutating func replyArrived(on topic: String, count: Int, now: ContinuousClock.Instant, followed: Set<String>) -> [Follower.Action] {
        finish(topic: topic, requests.replyArrived(on: topic, count: count, now: now), now: now, followed: followed)
    }

    /// Snapshots some answerers never replied to, those due to be asked again, a round's (`round`,
    /// when one is due) and the turns that came meanwhile, and what arrived short in the last minute.
    mutating func tick(now: ContinuousClock.Instant, followed: Set<String>, round: Resynchronization.Reason?) -> [Follower.Action] {
        var actions: [Follower.Action] = []
        for (topic, outcome) in requests.expire(now: now, grace: Self.grace) {
            actions.append(.log(.debug, "snapshot \(topic): not every answerer replied; going on with what arrived"))
            actions += finish(topic: topic, outcome, now: now, followed: followed)
        }
        for retry in requests.dueRetries(now: now) where followed.contains(retry.typePrefix) {
            actions += ask(retry.typePrefix, attempt: retry.attempt)
        }
        if let round { actions += askAgain(round, followed: followed) }
        actions += askOwed(followed: followed) + askWaitingTurns()
        if let line = shortReport.due(now: now) { actions.append(.log(.warning, line)) }
        return actions
    }

    /// Subscribes to a new request's topic.
    private mutating func start(_ typePrefix: String, attempt: Int = 1) -> Follower.Action {
        .subscribe(requests.start(typePrefix: typePrefix, attempt: attempt, token: makeToken()))
    }

    /// Asks for the snapshots a round was owed (``SnapshotRequests/wanted(typePrefix:)``) whose
    /// earlier request has ended.
    private mutating func askOwed(followed: Set<String>) -> [Follower.Action] {
        requests.owedNow().filter { followed.contains($0) }.flatMap { ask($0) }
    }

    /// Acts on what a snapshot's answers came to: its topic dropped once it is over; asked again,
    /// once its backoff is over (``tick(now:followed:round:)``), when it arrived short.
    private mutating func finish(topic: String, _ outcome: SnapshotRequests.Outcome, now: ContinuousClock.Instant, followed: Set<String>) -> [Follower.Action] {
        var actions: [Follower.Action] = []
        switch outcome {
        case .waiting, .unknown:
            return []
        case .complete:
            break
        case .retry(let typePrefix, let attempt):
            requests.scheduleRetry(typePrefix: typePrefix, attempt: attempt, now: now, jitter: drawJitter())
            if let line = shortReport.note(typePrefix, gaveUp: false, now: now) { actions.append(.log(.warning, line)) }
        case .incomplete(let typePrefix, _, _):
            if let line = shortReport.note(typePrefix, gaveUp: true, now: now) { actions.append(.log(.warning, line)) }
        }
        return actions + [.unsubscribe(topic)] + askOwed(followed: followed) + askWaitingTurns()
    }
}
