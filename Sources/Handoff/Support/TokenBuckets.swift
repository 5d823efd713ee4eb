/// A token bucket per key: at most `perSecond` a second for each key, after a burst of `burst`.
///
/// Bounded: past `capacity` keys, those whose bucket has refilled are forgotten, and if none has,
/// the newcomers share the bucket of `overflowKey`. No I/O: the caller passes the time in.
struct TokenBuckets<Key: Hashable> {
    let perSecond: Double
    let burst: Double
    let capacity: Int
    /// The bucket newcomers share while `capacity` keys are remembered.
    let overflowKey: Key

    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }

    private var buckets: [Key: Bucket] = [:]

    init(perSecond: Double, burst: Double, capacity: Int, overflowKey: Key) {
        self.perSecond = perSecond
        self.burst = burst
        self.capacity = capacity
        self.overflowKey = overflowKey
    }

    /// Whether `key` may do one more thing now (one of its tokens is taken if so).
    mutating func admit(_ key: Key, now: ContinuousClock.Instant) -> Bool {
        var key = key
        if buckets[key] == nil, buckets.count >= capacity {
            buckets = buckets.filter { refilled($0.value, now: now).tokens < burst }
            if buckets.count >= capacity { key = overflowKey }
        }
        var bucket = refilled(buckets[key] ?? Bucket(tokens: burst, at: now), now: now)
        let admitted = bucket.tokens >= 1
        if admitted { bucket.tokens -= 1 }
        buckets[key] = bucket
        return admitted
    }

    private func refilled(_ bucket: Bucket, now: ContinuousClock.Instant) -> Bucket {
        Bucket(tokens: min(burst, bucket.tokens + (now - bucket.at).seconds * perSecond), at: now)
    }

    /// Keys remembered (for tests: the bound).
    var count: Int { buckets.count }
}
