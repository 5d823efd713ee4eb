import ZeroMQ

/// Envelopes taken lately, by a hash of their bytes: a site's broker under a pair of hubs gets
/// every message from both, byte for byte the same, and passes the second copy of a presence or
/// a withdrawal on no more than an advertisement's (whose version says it is no news).
///
/// Bounded: each is remembered for `memory`; past `capacity`, those older are forgotten, and if
/// none is, all (a copy then passes twice, as it did before). A 64-bit hash that two different
/// envelopes share would drop the second of them: with Swift's seeded hashing, about one in 2⁶⁴.
struct RecentCopies {
    let memory: Duration
    let capacity: Int
    private var taken: [Int: ContinuousClock.Instant] = [:]

    init(memory: Duration = .seconds(10), capacity: Int = 100_000) {
        self.memory = memory
        self.capacity = capacity
    }

    var count: Int { taken.count }

    /// Whether `envelope` was taken within `memory`; if not, it is noted as taken now.
    mutating func isCopy(_ envelope: Frame, now: ContinuousClock.Instant) -> Bool {
        let key = envelope.withUnsafeBytes { bytes in
            var hasher = Hasher()
            hasher.combine(bytes: bytes)
            return hasher.finalize()
        }
        if let at = taken[key], now - at < memory { return true }
        if taken.count >= capacity {
            taken = taken.filter { now - $0.value < memory }
            if taken.count >= capacity { taken.removeAll(keepingCapacity: true) }
        }
        taken[key] = now
        return false
    }
}
