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
/// On a secure broker an origin asked is expected to send, within ``answerWait``, a presence that
/// lists nothing the cache lacks. A key whose origin did not (a member whose presences list
/// made-up activities, under made-up node ids; a node that went away; or activities nothing here
/// can take: past a quota, or of types a site does not follow) is held back: its
/// presences ask nothing, nor count towards asking everyone, for ``firstBackoff``, doubling to
/// ``longestBackoff`` (one more step a second at most; worn off a ``longestBackoff``
/// after a hold ended). A presence of an asked origin that lists activities, none lacking,
/// forgives its key.
///
/// An honest node speaks for one origin, asked at most once an interval. So a key with
/// ``maxAwaitedPerKey`` origins asked and not yet answered or judged asks for no more meanwhile
/// (the simulator's made-up presences, five a second under fresh node ids, had over a quarter
/// of them asked before the first judgement came), and a key has at most ``keyBurst`` origins asked at
/// once, then one a second (``keyPerSecond``): a member that also advertises a real activity
/// under each made-up origin, and lists it alone next, is forgiven each time, and would otherwise
/// use up the ``perSecond`` the whole bus shares and have everyone asked every
/// ``everyoneInterval``. Neither counts towards asking everyone. So one member cannot keep every
/// node of the bus advertising everything again, nor crowd out the origins that lack for real.
/// (Keys shared by many nodes share these bounds too.)
///
/// A copy the cache held and let lapse (``LapsedIDs``: its lease ran out while its origin was
/// stopped or cut off, or a site's link was down) is no made-up id: a presence that lists it
/// again asks whatever its key's hold, once per lapse. Without it, an origin whose presences also
/// list what the cache can never take (types its site does not follow) stays held back, and its
/// copies truly lost wait for the hold to end, up to ``longestBackoff``.
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
    /// Origins asked whose presence has not yet lacked nothing, with their key and when asked.
    private var awaited: [String: (key: [UInt8], askedAt: ContinuousClock.Instant)] = [:]
    /// How many of ``awaited`` each key's are.
    private var awaitedOfKey: [[UInt8]: Int] = [:]
    /// Keys held back (``HoldBacks``): a step for each judgement, a second apart at most.
    private var heldBack = HoldBacks<[UInt8]>(firstBackoff: firstBackoff, longestBackoff: longestBackoff, stepInterval: strikeInterval, capacity: memory)
    /// Copies the cache let lapse, by origin: worth an ask whatever the key's hold.
    private var lapsedCopies = LapsedIDs(capacity: lapsedMemory)
    /// Lapsed copies remembered at most (a site link's whole cache lapsing at once may be more:
    /// those that lapsed first are forgotten first).
    static let lapsedMemory = 16_384
    /// When the oldest origin awaited is due to be judged.
    private var nextJudgement: ContinuousClock.Instant?
    static let answerWait = Duration.seconds(5)
    /// At most one step a key a second: the origins asked in one second (as many as
    /// ``perSecond``), judged together, are one judgement.
    static let strikeInterval = Duration.seconds(1)
    static let firstBackoff = Duration.seconds(2)
    static let longestBackoff = Duration.seconds(300)
    /// Origins awaited, and keys held back, at most (past it the memory starts over).
    static let memory = 1_024
    /// Origins of one key asked and awaited at once, at most.
    static let maxAwaitedPerKey = 4

    /// Origins of one key asked a second, after a burst (``keyBurst``).
    static let keyPerSecond = 1.0
    static let keyBurst = 4.0
    private var askedOfKey = TokenBuckets<[UInt8]>(perSecond: keyPerSecond, burst: keyBurst, capacity: memory, overflowKey: [])

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
    /// - Parameter relapsed: The presence lists a copy the cache let lapse (``lapsedCopies(of:)``)
    ///   and lacks: its key's hold does not stop the ask.
    mutating func decide(_ origin: String, key: [UInt8]? = nil, now: ContinuousClock.Instant, everyoneAllowed: Bool, relapsed: Bool = false) -> Decision {
        if let due = nextJudgement, now >= due { judgeAwaited(now: now) }
        if let key, !relapsed && heldBack.isHeld(key, now: now) || awaitedOfKey[key, default: 0] >= Self.maxAwaitedPerKey { return .none }
        if let last = lastAsked[origin], now - last < interval { return .none }
        if let everyone = lastEveryone, now - everyone < interval { return .none }
        if let key, !askedOfKey.admit(key, now: now) { return .none }
        if window.map({ now - $0.start >= .seconds(1) }) ?? true { window = (now, 0) }
        if window!.asked < perSecond {
            window!.asked += 1
            if lastAsked.count >= capacity { lastAsked.removeAll() }
            lastAsked[origin] = now
            if let key, awaited[origin] == nil {
                if awaited.count >= Self.memory { judgeAwaited(now: now) }
                if awaited.count < Self.memory {
                    awaited[origin] = (key, now)
                    awaitedOfKey[key, default: 0] += 1
                    if nextJudgement == nil { nextJudgement = now + Self.answerWait }
                }
            }
            lapsedCopies.forget(origin: origin)
            return .origin
        }
        guard everyoneAllowed, lastEveryone.map({ now - $0 >= everyoneInterval }) ?? true else { return .none }
        lastEveryone = now
        lapsedCopies.forget(origin: origin)
        return .everyone
    }

    /// The cache's copy `id` of `origin` lapsed at `now` (on a secure broker: an open one holds
    /// no key back, and has nothing to remember it for).
    mutating func lapsed(_ id: String, origin: String, now: ContinuousClock.Instant) {
        lapsedCopies.lapsed(id, origin: origin, now: now)
    }

    /// The ids of `origin` whose copies lapsed here since it was last asked.
    func lapsedCopies(of origin: String) -> Set<String>? {
        lapsedCopies.count > 0 ? lapsedCopies.ids(of: origin) : nil
    }

    /// Lapsed copies remembered (tests).
    var lapsedCopiesCount: Int { lapsedCopies.count }

    /// A presence of `origin` lists nothing the cache lacks: its lapsed copies came back or
    /// ended; if it was asked (and lists anything), it made up what was lacking.
    mutating func nothingLacking(_ origin: String, listedAny: Bool) {
        if lapsedCopies.count > 0 { lapsedCopies.forget(origin: origin) }
        if listedAny, !awaited.isEmpty { satisfied(origin) }
    }

    /// A presence of `origin` lists activities, none of which the cache lacks: if it was asked,
    /// it made up what was lacking, and its key is forgiven.
    mutating func satisfied(_ origin: String) {
        guard let asked = awaited.removeValue(forKey: origin) else { return }
        noLongerAwaited(asked.key)
        heldBack.forgive(asked.key)
    }

    /// Origins asked over ``answerWait`` ago whose presence never lacked nothing since: their
    /// keys held back.
    private mutating func judgeAwaited(now: ContinuousClock.Instant) {
        for (origin, asked) in awaited where now - asked.askedAt >= Self.answerWait {
            awaited[origin] = nil
            noLongerAwaited(asked.key)
            heldBack.step(asked.key, now: now)
        }
        nextJudgement = awaited.values.map { $0.askedAt + Self.answerWait }.min()
    }

    private mutating func noLongerAwaited(_ key: [UInt8]) {
        let left = awaitedOfKey[key, default: 1] - 1
        awaitedOfKey[key] = left > 0 ? left : nil
    }

    /// Whether `key`'s presences ask nothing now (tests).
    func isHeldBack(_ key: [UInt8], now: ContinuousClock.Instant) -> Bool { heldBack.isHeld(key, now: now) }
}
