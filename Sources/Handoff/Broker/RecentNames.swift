/// Names heard lately (a site broker's own nodes), each remembered for `memory` after it was last
/// heard; bounded: past `capacity` names, those not heard within `memory` are forgotten, and if
/// none is, the oldest half.
struct RecentNames {
    let memory: Duration
    let capacity: Int
    private var lastHeard: [String: ContinuousClock.Instant] = [:]

    init(memory: Duration, capacity: Int) {
        self.memory = memory
        self.capacity = capacity
    }

    var count: Int { lastHeard.count }

    mutating func heard(_ name: String, now: ContinuousClock.Instant) {
        if lastHeard.count >= capacity, lastHeard[name] == nil {
            lastHeard = lastHeard.filter { now - $0.value < memory }
            if lastHeard.count >= capacity {
                let newest = lastHeard.sorted { $0.value > $1.value }.prefix(capacity / 2)
                lastHeard = Dictionary(uniqueKeysWithValues: newest.map { ($0.key, $0.value) })
            }
        }
        lastHeard[name] = now
    }

    func contains(_ name: String, now: ContinuousClock.Instant) -> Bool {
        guard let last = lastHeard[name] else { return false }
        return now - last < memory
    }
}
