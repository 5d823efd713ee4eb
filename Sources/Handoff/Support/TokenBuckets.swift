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

    /// Whether `key` may do one more thing now (one of its tokens is taken if so). A key already
    /// remembered costs one hash of it (three, with a lookup, a read and a write: a peer's events
    /// ask this once per continue).
    mutating func admit(_ key: Key, now: ContinuousClock.Instant) -> Bool {
        let (burst, perSecond) = (burst, perSecond)
        if let index = buckets.index(forKey: key) { return Self.take(from: &buckets.values[index], now: now, burst: burst, perSecond: perSecond) }
        var key = key
        if buckets.count >= capacity {
            buckets = buckets.filter { Self.refilled($0.value, now: now, burst: burst, perSecond: perSecond).tokens < burst }
            if buckets.count >= capacity { key = overflowKey }
        }
        return Self.take(from: &buckets[key, default: Bucket(tokens: burst, at: now)], now: now, burst: burst, perSecond: perSecond)
    }

    private static func take(from bucket: inout Bucket, now: ContinuousClock.Instant, burst: Double, perSecond: Double) -> Bool {
        bucket = refilled(bucket, now: now, burst: burst, perSecond: perSecond)
        guard bucket.tokens >= 1 else { return false }
        bucket.tokens -= 1
        return true
    }

    private static func refilled(_ bucket: Bucket, now: ContinuousClock.Instant, burst: Double, perSecond: Double) -> Bucket {
        Bucket(tokens: min(burst, bucket.tokens + (now - bucket.at).seconds * perSecond), at: now)
    }

    /// Keys remembered (for tests: the bound).
    var count: Int { buckets.count }
}
