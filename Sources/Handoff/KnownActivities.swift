import Foundation

/// Discovery's table: the activities other nodes advertise, as this node knows them — each with
/// the lease that keeps it, its origin for the presence that renews it, and the quotas that bound
/// what a node (or all of them) can make this one hold.
///
/// The node feeds it what it believed (replay protection is ``ReplayGuard``'s) and acts on the
/// answers: events for watchers, did-update fetches, withdrawals.
struct KnownActivities {
    struct Entry {
        var activity: DiscoveredActivity
        /// When the activity is lost without a fresh advertisement or presence.
        var deadline: ContinuousClock.Instant
        /// When this node heard of its current version (it appeared, or a newer version came).
        var changed: ContinuousClock.Instant
    }

    /// What an advertisement did to the table.
    enum Arrival: Equatable {
        /// A new activity, now known.
        case appeared
        /// A newer version of a known one.
        case updated
        /// The same version again: its lease is renewed.
        case renewed
        /// An older version than the one known (reordered): ignored.
        case stale
        /// New, but its origin already has `ofOrigin` known here, or all origins `total`: ignored.
        case overQuota(ofOrigin: Int, total: Int)
    }

    /// The most activities of one origin node this node keeps.
    let maxPerOrigin: Int
    /// The most activities this node keeps in all.
    let maxTotal: Int
    private var entries: [String: Entry] = [:]
    private var byOrigin: [String: Set<String>] = [:]

    init(maxPerOrigin: Int, maxTotal: Int) {
        self.maxPerOrigin = maxPerOrigin
        self.maxTotal = maxTotal
    }

    var count: Int { entries.count }
    var values: Dictionary<String, Entry>.Values { entries.values }
    subscript(id: String) -> Entry? { entries[id] }

    /// The ids known of the origin node `origin` (its node id).
    func ids(ofOrigin origin: String) -> Set<String>? { byOrigin[origin] }

    /// Takes an advertisement believed fresh: `deadline` is now plus its lease.
    mutating func arrive(_ activity: DiscoveredActivity, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Arrival {
        let origin = activity.origin.id
        guard var entry = entries[activity.id] else {
            let ofOrigin = byOrigin[origin]?.count ?? 0
            guard ofOrigin < maxPerOrigin, entries.count < maxTotal else {
                return .overQuota(ofOrigin: ofOrigin, total: entries.count)
            }
            byOrigin[origin, default: []].insert(activity.id)
            entries[activity.id] = Entry(activity: activity, deadline: deadline, changed: now)
            return .appeared
        }
        guard activity.version >= entry.activity.version else { return .stale }
        let isNewer = activity.version > entry.activity.version
        if entry.activity.origin.id != origin {
            unlink(activity.id, from: entry.activity.origin.id)
            byOrigin[origin, default: []].insert(activity.id)
        }
        entry.deadline = deadline
        entry.activity = activity
        if isNewer { entry.changed = now }
        entries[activity.id] = entry
        return isNewer ? .updated : .renewed
    }

    /// Forgets an activity; returns it if it was known.
    mutating func remove(_ id: String) -> DiscoveredActivity? {
        guard let entry = entries.removeValue(forKey: id) else { return nil }
        unlink(id, from: entry.activity.origin.id)
        return entry.activity
    }

    /// Takes a node's presence: renews the leases of its known activities it lists, up to
    /// `deadline`. Returns those it does not list, which were withdrawn (and the withdrawal lost),
    /// unless the list was cut short (`partial`): for the caller to forget.
    mutating func renew(origin: String, listed: Set<String>, partial: Bool, deadline: ContinuousClock.Instant) -> [String] {
        guard let ids = byOrigin[origin] else { return [] }
        var unlisted: [String] = []
        for id in ids {
            if listed.contains(id) {
                if let current = entries[id]?.deadline, current < deadline { entries[id]?.deadline = deadline }
            } else if !partial {
                unlisted.append(id)
            }
        }
        return unlisted
    }

    /// The activities to forget now: leases run out (lost), or expiration dates passed (expired).
    func due(now: ContinuousClock.Instant, wallClock: Date) -> [(id: String, reason: RemovalReason)] {
        entries.compactMap { id, entry in
            if entry.deadline <= now { return (id, .lost) }
            if let expiration = entry.activity.expirationDate, expiration <= wallClock { return (id, .expired) }
            return nil
        }
    }

    private mutating func unlink(_ id: String, from origin: String) {
        byOrigin[origin]?.remove(id)
        if byOrigin[origin]?.isEmpty == true { byOrigin[origin] = nil }
    }
}
