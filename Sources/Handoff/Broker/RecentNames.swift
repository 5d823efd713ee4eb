import ZeroMQ

/// Names heard lately (a site broker's own nodes, an upstream's subscriptions passed on, the
/// hashes of envelopes taken), each remembered for `memory` after it was last heard; bounded:
/// past `capacity` names, those not heard within `memory` are forgotten, and if that leaves more
/// than three quarters, the oldest down to half. Each rebuild of the table so frees at least a
/// quarter of it: fresh names arriving as fast as others expire cannot make every new one walk
/// the whole table.
struct RecentNames<Name: Hashable> {
    let memory: Duration
    let capacity: Int
    private var lastHeard: [Name: ContinuousClock.Instant] = [:]

    init(memory: Duration, capacity: Int) {
        self.memory = memory
        self.capacity = capacity
    }

    var count: Int { lastHeard.count }

    mutating func heard(_ name: Name, now: ContinuousClock.Instant) {
        if lastHeard.count >= capacity, lastHeard[name] == nil {
            lastHeard = lastHeard.filter { now - $0.value < memory }
            if lastHeard.count > capacity / 4 * 3 {
                let newest = lastHeard.sorted { $0.value > $1.value }.prefix(capacity / 2)
                lastHeard = Dictionary(uniqueKeysWithValues: newest.map { ($0.key, $0.value) })
            }
        }
        lastHeard[name] = now
    }

    func contains(_ name: Name, now: ContinuousClock.Instant) -> Bool {
        guard let last = lastHeard[name] else { return false }
        return now - last < memory
    }

    /// Forgets every name.
    mutating func forgetAll() { lastHeard.removeAll(keepingCapacity: true) }
}

/// Envelopes taken lately, by a hash of their bytes: a site's broker under a pair of hubs gets
/// every message from both, byte for byte the same, and passes the second copy of a presence or
/// a withdrawal on no more than an advertisement's (whose version says it is no news). A 64-bit
/// hash that two different envelopes share would drop the second of them: with Swift's seeded
/// hashing, about one in 2⁶⁴.
extension RecentNames where Name == Int {
    /// Whether `envelope` was taken within `memory`; if not, it is noted as taken now.
    mutating func isCopy(_ envelope: Frame, now: ContinuousClock.Instant) -> Bool {
        let key = envelope.withUnsafeBytes { bytes in
            var hasher = Hasher()
            hasher.combine(bytes: bytes)
            return hasher.finalize()
        }
        if contains(key, now: now) { return true }
        heard(key, now: now)
        return false
    }
}
