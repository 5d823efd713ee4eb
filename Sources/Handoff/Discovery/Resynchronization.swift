import Foundation

/// When a follower asks for its snapshots again: the repair of what the bus lost while an
/// originator lived (ZeroMQ guide, Clone pattern: a client re-asks for a snapshot when its server
/// comes back). Three reasons:
///
/// - a bus connection came back (a broker restarted, a partition healed): what was advertised
///   while this node was away went past it;
/// - a presence names activities this node does not hold: it lost them (a lease ran out while the
///   bus was down or the originator stalled) while their originator still has them current;
/// - a presence comes after its origin was silent here for over half a lease: a change the origin
///   made meanwhile (a new version of an activity this node still holds) may have gone past it,
///   and the snapshot that a reconnection asked for may have found the origin stopped (found by
///   the simulator, seed 816017148).
///
/// A presence lists every current activity of its node, of every type, and this node follows only
/// some types; it cannot tell which from an id. So the ids a presence names and a snapshot then did
/// not bring are remembered as not followed here (or over this node's quota) and not asked about
/// again while their origin keeps listing them, until what this node follows changes.
///
/// A presence whose named ids a round then brought none of (a member that lists made-up ids, or
/// an origin whose new activities are all of types not followed here) is held back: its sender's
/// key (its node id on an open bus) asks for no round for ``firstBackoff``, doubled after each
/// such round up to ``longestBackoff``, and forgiven once a round brings one of its ids. So one
/// member naming fresh ids cannot make every follower on the bus ask all its snapshots again
/// every second. Ids this node held and let lapse (``LapsedIDs``) are not made up: a presence
/// listing one asks for a round even from a sender held back, once per lapse (an origin stopped
/// past its leases whose earlier rounds, asked for types not followed here, brought nothing kept
/// its lost activities lost until their refresh: the simulator, seed 82945545).
///
/// Pure state, with time passed in: the node asks for the snapshots when this says so.
struct Resynchronization {
    /// At most one round of snapshots per interval, whatever the bus sends.
    let interval: Duration
    /// The most ids remembered as not followed; past it the memory starts over (it is only an
    /// optimisation: forgetting costs one more round of snapshots). Also the most ids waiting for
    /// a round or asked in one: a round a snapshot never answers never settles, and presences
    /// naming fresh ids would grow those without end; past it, a presence's news asks for a
    /// round without its ids being remembered (they are asked about again next time).
    let capacity: Int

    /// Ids presences named that a round of snapshots did not bring, by origin.
    private var unfollowed: [String: Set<String>] = [:]
    private var unfollowedCount = 0
    /// Ids for the next round, and those the round under way was started for, by origin.
    private var awaited: [String: Set<String>] = [:]
    private var asked: [String: Set<String>] = [:]
    /// Ids in ``awaited`` and ``asked`` together (an id in both counted twice: an upper bound).
    private var trackedCount = 0
    /// The sender (key, or node id on an open bus) of each origin in ``awaited`` and ``asked``.
    private var senderOfOrigin: [String: String] = [:]
    /// Senders held back (``HoldBacks``): a step for each round in a row that brought none of their ids.
    private var heldBack: HoldBacks<String>
    /// Ids this node held and let lapse: worth a round whatever their sender's hold.
    private var lapsed: LapsedIDs
    static let firstBackoff = Duration.seconds(2)
    static let longestBackoff = Duration.seconds(60)
    private var lastRound: ContinuousClock.Instant?
    /// Why a round was wanted: what an operator reads from how often rounds start
    /// (`handoff_node_snapshot_rounds_total`), a bus that loses messages or a member that lies.
    enum Reason: String, CaseIterable, Sendable {
        /// A bus connection came back.
        case reconnected
        /// A presence named activities not held here.
        case unheldIDs = "unheld_ids"
        /// A presence came after its origin was silent here for over half a lease.
        case silenceEnded = "silence_ended"
    }
    /// Why the round wanted and put off by the interval was wanted first (`nil`: none wanted).
    private var dueFor: Reason?
    /// A round is wanted but the interval since the last one has not passed.
    var isDue: Bool { dueFor != nil }
    /// Whether a round was started and has not settled.
    private(set) var inRound = false

    init(interval: Duration = .seconds(1), capacity: Int) {
        self.interval = interval
        self.capacity = capacity
        heldBack = HoldBacks(firstBackoff: Self.firstBackoff, longestBackoff: Self.longestBackoff, capacity: capacity)
        lapsed = LapsedIDs(capacity: capacity)
    }

    /// A presence of `origin` listed these ids (`unheld`: those this node does not hold), sent by
    /// `sender` (its key; its node id on an open bus; `origin` when not given). Returns whether
    /// to ask for the snapshots now.
    mutating func presence(origin: String, sender: String? = nil, listed: Set<String>, unheld: Set<String>, now: ContinuousClock.Instant) -> Bool {
        if let known = unfollowed[origin] {
            // Forget what the origin no longer lists: it ended.
            let kept = known.intersection(listed)
            unfollowedCount -= known.count - kept.count
            unfollowed[origin] = kept.isEmpty ? nil : kept
        }
        let relisted = lapsed.relisted(origin: origin, unheld: unheld)
        var news = unheld.subtracting(unfollowed[origin] ?? []).subtracting(awaited[origin] ?? []).subtracting(asked[origin] ?? [])
        let sender = sender ?? origin
        // A sender held back asks only for what this node held and let lapse: no made-up id.
        if heldBack.isHeld(sender, now: now) { news.formIntersection(relisted) }
        guard !news.isEmpty else { return false }
        if trackedCount + news.count <= capacity {
            awaited[origin, default: []].formUnion(news)
            trackedCount += news.count
            senderOfOrigin[origin] = sender
        }
        return want(.unheldIDs, now: now)
    }

    /// An activity `id` of `origin` this node held lapsed (its lease ran out): a type followed
    /// here, whatever an earlier round made of its id.
    mutating func lapsed(_ id: String, origin: String, now: ContinuousClock.Instant) {
        if unfollowed[origin]?.remove(id) != nil {
            unfollowedCount -= 1
            if unfollowed[origin]?.isEmpty == true { unfollowed[origin] = nil }
        }
        lapsed.lapsed(id, origin: origin, now: now)
    }

    /// A bus connection came back. Returns whether to ask for the snapshots now.
    mutating func reconnected(now: ContinuousClock.Instant) -> Bool {
        want(.reconnected, now: now)
    }

    /// A presence came after its origin was silent here for over half a lease. Returns whether to
    /// ask for the snapshots now.
    mutating func silenceEnded(now: ContinuousClock.Instant) -> Bool {
        want(.silenceEnded, now: now)
    }

    /// On every tick: a round put off by the interval that may start now, with why it was wanted
    /// first; `nil` when none starts.
    mutating func due(now: ContinuousClock.Instant) -> Reason? {
        guard let reason = dueFor, lastRound.map({ now - $0 >= interval }) ?? true else { return nil }
        start(now: now)
        return reason
    }

    /// The snapshots of a round have all arrived (at `now`): the ids it was asked for that this
    /// node still does not hold are not followed here; a sender none of whose ids it brought is
    /// held back, one it brought some of forgiven.
    mutating func settled(now: ContinuousClock.Instant, holds: (String) -> Bool) {
        guard inRound else { return }
        inRound = false
        // Each sender judged once a round, over all its origins: whether the round brought any.
        var broughtAny: [String: Bool] = [:]
        for (origin, ids) in asked {
            let missing = ids.filter { !holds($0) }
            if let sender = senderOfOrigin[origin], !ids.isEmpty {
                broughtAny[sender] = (broughtAny[sender] ?? false) || missing.count < ids.count
            }
            guard !missing.isEmpty else { continue }
            if unfollowedCount + missing.count > capacity {
                unfollowed.removeAll()
                unfollowedCount = 0
            }
            let before = unfollowed[origin]?.count ?? 0
            unfollowed[origin, default: []].formUnion(missing)
            unfollowedCount += unfollowed[origin]!.count - before
        }
        // A sender none of whose ids it brought is held back longer; one it brought some of forgiven.
        for (sender, brought) in broughtAny {
            if brought { heldBack.forgive(sender) } else { heldBack.step(sender, now: now) }
        }
        asked.removeAll()
        senderOfOrigin = senderOfOrigin.filter { awaited[$0.key] != nil }
        trackedCount = awaited.values.reduce(0) { $0 + $1.count }
    }

    /// What this node follows changed: an id not followed before may be now, and a sender held
    /// back for ids no round brought may bring them now.
    mutating func followingChanged() {
        unfollowed.removeAll()
        unfollowedCount = 0
        heldBack.forgiveAll()
    }

    /// An origin left (its presence lapsed): nothing of it to remember but the ids it let lapse
    /// here (``LapsedIDs``), for when it comes back.
    mutating func forget(origin: String) {
        unfollowedCount -= unfollowed.removeValue(forKey: origin)?.count ?? 0
        trackedCount -= (awaited.removeValue(forKey: origin)?.count ?? 0) + (asked.removeValue(forKey: origin)?.count ?? 0)
        senderOfOrigin[origin] = nil
    }

    /// Senders held back now, for tests.
    func isHeldBack(_ sender: String, now: ContinuousClock.Instant) -> Bool { heldBack.isHeld(sender, now: now) }

    /// Ids remembered as lapsed here, for tests.
    var lapsedIDs: Int { lapsed.count }

    /// Ids remembered as not followed here, for tests and metrics.
    var unfollowedIDs: Int { unfollowedCount }

    /// Ids waiting for a round or asked in one (at most ``capacity``), for tests.
    var trackedIDs: Int { trackedCount }

    private mutating func want(_ reason: Reason, now: ContinuousClock.Instant) -> Bool {
        if dueFor == nil { dueFor = reason }
        if let lastRound, now - lastRound < interval { return false }
        start(now: now)
        return true
    }

    private mutating func start(now: ContinuousClock.Instant) {
        dueFor = nil
        inRound = true
        lastRound = now
        for (origin, ids) in awaited { asked[origin, default: []].formUnion(ids) }
        awaited.removeAll()
        trackedCount = asked.values.reduce(0) { $0 + $1.count }
    }
}
