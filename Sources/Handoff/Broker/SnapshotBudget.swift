/// How much of the broker's thread its snapshot answers may take, decided with no I/O (time and
/// each answer's cost passed in): a token bucket of thread time.
///
/// An answer sends every matching cached advertisement (for 100,000 of them, tens of
/// milliseconds of the one thread that also forwards the bus), and a snapshot is asked for by a
/// subscription, which any subscriber may send as often as it likes: unbounded, a flood of
/// requests would take the whole thread from the bus. Past the budget a request is answered with
/// its count alone, as a busy direct peer answers (wire.proto, "Snapshots"): the follower asks
/// again after its backoff, and after its last attempt goes on with what it has, which the
/// activities' refreshes fill.
struct SnapshotBudget {
    /// Seconds of answering allowed per second of time.
    let share: Double
    /// The most time saved up for a burst (a fleet joining at once).
    let burst: Duration
    private var available: Duration
    private var updated: ContinuousClock.Instant?

    init(share: Double = 0.5, burst: Duration = .seconds(2)) {
        self.share = share
        self.burst = burst
        available = burst
    }

    /// Whether an answer may be sent in full now.
    mutating func admits(now: ContinuousClock.Instant) -> Bool {
        refill(now)
        return available > .zero
    }

    /// An answer took `cost` of the thread.
    mutating func spent(_ cost: Duration, now: ContinuousClock.Instant) {
        refill(now)
        available -= cost
    }

    private mutating func refill(_ now: ContinuousClock.Instant) {
        if let updated, now > updated { available = min(burst, available + (now - updated) * share) }
        updated = max(updated ?? now, now)
    }
}
