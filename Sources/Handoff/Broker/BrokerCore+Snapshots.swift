import Foundation

/// Snapshot answers within the broker's budget (``SnapshotBudget``): in full, or, past it, with
/// their count alone.
extension BrokerCore {
    /// How often a busy answer counts what matches a type prefix again.
    static let busyCountInterval = Duration.milliseconds(100)
    /// The most type prefixes whose busy counts are kept.
    static let busyCountCapacity = 64

    /// Whether to answer a snapshot in full now.
    mutating func answersSnapshotInFull(now: ContinuousClock.Instant) -> Bool {
        snapshotBudget.admits(now: now)
    }

    /// A full answer took `cost` of the broker's thread.
    mutating func snapshotAnswered(cost: Duration, now: ContinuousClock.Instant) {
        snapshotBudget.spent(cost, now: now)
    }

    /// A busy answer: the `SnapshotReply` alone, promising what matches (counted at most every
    /// ``busyCountInterval`` per prefix, so that a flood of requests costs a count each, not a
    /// pass over the cache), so that the follower finds it short and asks again after its backoff.
    mutating func busySnapshotReply(typePrefix: String, topic: [UInt8], now: ContinuousClock.Instant) -> [UInt8] {
        let count: Int
        if let kept = busySnapshotCounts[typePrefix], now - kept.at < Self.busyCountInterval {
            count = kept.count
        } else {
            if busySnapshotCounts.count >= Self.busyCountCapacity { busySnapshotCounts.removeAll() }
            count = snapshotCount(typePrefix: typePrefix, topic: topic, now: now)
            busySnapshotCounts[typePrefix] = (count, now)
        }
        counted.snapshotsBusy += 1
        // Nothing matches: the empty answer is whole as it is.
        return snapshotReply(typePrefix: typePrefix, topicSize: topic.count, sent: 0, sentBytes: 0, promised: count)
    }
}
