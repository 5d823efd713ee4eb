import Foundation

/// A broker's requests that an origin advertise again what its cache lost (wire.proto, "R:"):
/// at most one per origin per interval, however often its presence names what is missing (every
/// presence does until the advertisements arrive). Bounded: past `capacity` origins the memory
/// starts over, which costs at most one early request each.
///
/// Each request is a subscription that libzmq passes to every publisher of the broker, so `m`
/// requests cost `m` × the publishers: when many origins lack at once (a cache that lapsed while
/// its nodes went on, a site's link back), requests one by one would cost the square of the
/// fleet (10,000 nodes: 10⁸ subscription messages, gigabytes queued). At most ``perSecond`` are
/// made a second; past that, one subscribe-all (every node advertises everything again: one
/// message to each publisher) at most every ``everyoneInterval``, where the broker may send one.
struct ReadvertiseRequests {
    enum Decision: Equatable {
        case none
        /// Ask this origin (`R:` + its id).
        case origin
        /// Ask every publisher at once (a subscribe-all).
        case everyone
    }

    let interval: Duration
    let capacity: Int
    let perSecond: Int
    let everyoneInterval: Duration
    private var lastAsked: [String: ContinuousClock.Instant] = [:]
    private var window: (start: ContinuousClock.Instant, asked: Int)?
    private var lastEveryone: ContinuousClock.Instant?

    /// Origins asked one by one a second, unless told otherwise.
    static let defaultPerSecond = 8

    init(interval: Duration = .seconds(1), capacity: Int = 10_000, perSecond: Int = defaultPerSecond, everyoneInterval: Duration = .seconds(10)) {
        self.interval = interval
        self.capacity = capacity
        self.perSecond = perSecond
        self.everyoneInterval = everyoneInterval
    }

    /// Whether to ask `origin` now, everyone, or nothing; what is asked is noted as made.
    /// `everyoneAllowed`: whether a subscribe-all can reach `origin` (its own publishers, not a
    /// node of another site).
    mutating func decide(_ origin: String, now: ContinuousClock.Instant, everyoneAllowed: Bool) -> Decision {
        if let last = lastAsked[origin], now - last < interval { return .none }
        if let everyone = lastEveryone, now - everyone < interval { return .none }
        if window.map({ now - $0.start >= .seconds(1) }) ?? true { window = (now, 0) }
        if window!.asked < perSecond {
            window!.asked += 1
            if lastAsked.count >= capacity { lastAsked.removeAll() }
            lastAsked[origin] = now
            return .origin
        }
        guard everyoneAllowed, lastEveryone.map({ now - $0 >= everyoneInterval }) ?? true else { return .none }
        lastEveryone = now
        return .everyone
    }
}
