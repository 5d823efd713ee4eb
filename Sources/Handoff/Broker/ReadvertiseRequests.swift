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
///
/// On a secure broker an origin asked is expected to advertise within ``answerWait``. A key
/// whose origin did not (a member whose presences list made-up activities, under made-up node
/// ids) is held back: its presences ask nothing, nor count towards asking everyone, for
/// ``firstBackoff``, doubling to ``longestBackoff``; an advertisement from one of its origins
/// forgives it. So one member cannot keep every node of the bus advertising everything again.
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
    /// Origins asked and not yet heard advertising, with their key and when they were asked.
    private var unanswered: [String: (key: [UInt8], askedAt: ContinuousClock.Instant)] = [:]
    /// Keys held back, with how many of their origins in a row did not answer.
    private var heldBack: [[UInt8]: (strikes: Int, until: ContinuousClock.Instant)] = [:]
    static let answerWait = Duration.seconds(5)
    static let firstBackoff = Duration.seconds(2)
    static let longestBackoff = Duration.seconds(300)
    /// Origins awaited, and keys held back, at most (past it the memory starts over).
    static let memory = 1_024

    /// Whether an origin's advertisement is awaited (the caller tells ``advertised(by:)`` only then).
    var awaitsAnswers: Bool { !unanswered.isEmpty }

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
    ///
    /// - Parameter key: The presence's key on a secure broker (`nil` on an open one).
    mutating func decide(_ origin: String, key: [UInt8]? = nil, now: ContinuousClock.Instant, everyoneAllowed: Bool) -> Decision {
        if !unanswered.isEmpty { judgeUnanswered(now: now) }
        if let key, let held = heldBack[key], now < held.until { return .none }
        if let last = lastAsked[origin], now - last < interval { return .none }
        if let everyone = lastEveryone, now - everyone < interval { return .none }
        if window.map({ now - $0.start >= .seconds(1) }) ?? true { window = (now, 0) }
        if window!.asked < perSecond {
            window!.asked += 1
            if lastAsked.count >= capacity { lastAsked.removeAll() }
            lastAsked[origin] = now
            if let key, unanswered[origin] == nil, unanswered.count < Self.memory { unanswered[origin] = (key, now) }
            return .origin
        }
        guard everyoneAllowed, lastEveryone.map({ now - $0 >= everyoneInterval }) ?? true else { return .none }
        lastEveryone = now
        return .everyone
    }

    /// An advertisement from `origin` arrived: it answered, and its key is forgiven.
    mutating func advertised(by origin: String) {
        guard let asked = unanswered.removeValue(forKey: origin) else { return }
        heldBack[asked.key] = nil
    }

    /// Origins asked over ``answerWait`` ago that never advertised: their keys held back longer.
    private mutating func judgeUnanswered(now: ContinuousClock.Instant) {
        for (origin, asked) in unanswered where now - asked.askedAt >= Self.answerWait {
            unanswered[origin] = nil
            if heldBack[asked.key] == nil, heldBack.count >= Self.memory { heldBack.removeAll() }
            let strikes = (heldBack[asked.key]?.strikes ?? 0) + 1
            let backoff = min(Self.firstBackoff * (1 << min(strikes - 1, 16)), Self.longestBackoff)
            heldBack[asked.key] = (strikes, now + backoff)
        }
    }

    /// Whether `key`'s presences ask nothing now (tests).
    func isHeldBack(_ key: [UInt8], now: ContinuousClock.Instant) -> Bool { heldBack[key].map { now < $0.until } ?? false }
}
