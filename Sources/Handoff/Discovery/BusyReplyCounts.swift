/// The counts busy snapshot replies promise (wire.proto, "Snapshots"), for a direct peer's
/// ``Advertiser`` and a broker's ``SnapshotAnswers`` alike: past the answers it may have under way,
/// an answerer replies at once with a `SnapshotReply` alone whose count is at least what matches,
/// so that its asker finds it short and asks again after its backoff. Counting means a walk over
/// every activity, and a peer may ask without end, so a count is kept per type prefix for
/// ``lifetime`` and given again; at most ``capacity`` prefixes are kept (emptied when full).
/// With ``spacing``, walks are at least that far apart, whatever the prefixes: between them a
/// prefix without a kept count is given every activity's count, which is at least what matches.
struct BusyReplyCounts {
    /// How long a count is given again before it is taken anew.
    let lifetime: Duration
    /// The most prefixes whose counts are kept.
    let capacity: Int
    /// The least time between two walks (`.zero`: none).
    let spacing: Duration
    private var kept: [String: (count: Int, takenAt: ContinuousClock.Instant)] = [:]
    private var lastWalk: ContinuousClock.Instant?

    init(lifetime: Duration = .milliseconds(100), capacity: Int = 64, spacing: Duration = .zero) {
        self.lifetime = lifetime
        self.capacity = capacity
        self.spacing = spacing
    }

    /// The count for a busy reply to `typePrefix`: one kept for it, else one `walk` takes now, or,
    /// within ``spacing`` of the last walk, `everything`.
    mutating func count(of typePrefix: String, now: ContinuousClock.Instant, everything: @autoclosure () -> Int, walk: () -> Int) -> Int {
        if let held = kept[typePrefix], now - held.takenAt < lifetime { return held.count }
        if let lastWalk, now - lastWalk < spacing { return everything() }
        if kept.count >= capacity { kept.removeAll(keepingCapacity: true) }
        let counted = walk()
        kept[typePrefix] = (counted, now)
        lastWalk = now
        return counted
    }
}
