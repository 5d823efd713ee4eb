import Foundation

/// A broker's requests that an origin advertise again what its cache lost (wire.proto, "R:"):
/// at most one per origin per interval, however often its presence names what is missing (every
/// presence does until the advertisements arrive). Bounded: past `capacity` origins the memory
/// starts over, which costs at most one early request each.
struct ReadvertiseRequests {
    let interval: Duration
    let capacity: Int
    private var lastAsked: [String: ContinuousClock.Instant] = [:]

    init(interval: Duration = .seconds(1), capacity: Int = 10_000) {
        self.interval = interval
        self.capacity = capacity
    }

    /// Whether to ask `origin` now; if so, the request is noted as made.
    mutating func shouldAsk(_ origin: String, now: ContinuousClock.Instant) -> Bool {
        if let last = lastAsked[origin], now - last < interval { return false }
        if lastAsked.count >= capacity { lastAsked.removeAll() }
        lastAsked[origin] = now
        return true
    }
}
