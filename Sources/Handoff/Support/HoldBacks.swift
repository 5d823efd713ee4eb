/// Keys held back for longer each time they let their asker down (a sender whose presences list
/// what no snapshot brings; a key whose asked origins never make up what the cache lacks):
/// `firstBackoff`, doubling to `longestBackoff`, one step per `stepInterval` at most (several
/// judged at once are one judgement), forgiven by the caller, and worn off once a hold ended
/// `longestBackoff` ago (the next starts again from `firstBackoff`). Bounded: past `capacity`
/// keys the memory starts over (at worst each is asked once more). No I/O: time passed in.
struct HoldBacks<Key: Hashable> {
    let firstBackoff: Duration
    let longestBackoff: Duration
    let stepInterval: Duration
    let capacity: Int
    private var held: [Key: (steps: Int, until: ContinuousClock.Instant, steppedAt: ContinuousClock.Instant)] = [:]

    init(firstBackoff: Duration, longestBackoff: Duration, stepInterval: Duration = .zero, capacity: Int) {
        self.firstBackoff = firstBackoff
        self.longestBackoff = longestBackoff
        self.stepInterval = stepInterval
        self.capacity = capacity
    }

    /// Whether `key` is held back now.
    func isHeld(_ key: Key, now: ContinuousClock.Instant) -> Bool { held[key].map { now < $0.until } ?? false }

    /// `key` held back one step longer, from `now`.
    mutating func step(_ key: Key, now: ContinuousClock.Instant) {
        if let last = held[key] {
            if now - last.steppedAt < stepInterval { return }
            if now - last.until > longestBackoff { held[key] = nil }
        } else if held.count >= capacity {
            held.removeAll()
        }
        let steps = (held[key]?.steps ?? 0) + 1
        let backoff = min(firstBackoff * (1 << min(steps - 1, 16)), longestBackoff)
        held[key] = (steps, now + backoff, now)
    }

    /// `key` held back no more, its count started again.
    mutating func forgive(_ key: Key) { held[key] = nil }

    /// Every key forgiven.
    mutating func forgiveAll() { held.removeAll() }
}
