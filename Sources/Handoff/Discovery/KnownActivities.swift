import Foundation
import ZeroMQ

/// Discovery's table: the activities other nodes advertise, as this node knows them — each with
/// the lease that keeps it, its origin for the presence that renews it, and the quotas that bound
/// what a node (or all of them) can make this one hold.
///
/// The node feeds it what it believed (replay protection is ``ReplayGuard``'s) and acts on the
/// answers: events for watchers, did-update fetches, withdrawals.
struct KnownActivities {
    struct Entry {
        /// The activity: one reference (``DiscoveredActivity`` keeps its fields in one object), so a
        /// table growing by thousands moves small entries at each resize.
        var activity: DiscoveredActivity
        /// When the activity is lost without a fresh advertisement or presence.
        var deadline: ContinuousClock.Instant
        /// When this node heard of its current version (it appeared, or a newer version came).
        var changed: ContinuousClock.Instant
        /// What it takes in memory (``DiscoveredActivity/footprint``), counted in ``bytes``.
        fileprivate var footprint = 0
        /// Which arrival of this id the entry is (a forgotten id that comes back is a new one).
        fileprivate var generation: UInt64
        /// When its one live item in the lease schedule is due: never after ``deadline``.
        fileprivate var leaseCheck: ContinuousClock.Instant
        /// When its one live item in the expiration schedule is due, if it has one.
        fileprivate var expiryCheck: Date?

        fileprivate init(activity: DiscoveredActivity, deadline: ContinuousClock.Instant, changed: ContinuousClock.Instant,
                         generation: UInt64, leaseCheck: ContinuousClock.Instant, expiryCheck: Date?) {
            self.activity = activity
            self.deadline = deadline
            self.changed = changed
            self.generation = generation
            self.leaseCheck = leaseCheck
            self.expiryCheck = expiryCheck
        }
    }

    /// An item of a schedule: look at entry `id` (of `generation`) at `at`.
    private struct Check<Time: Comparable>: Comparable {
        var at: Time
        var id: HashedID
        var generation: UInt64
        static func < (a: Check, b: Check) -> Bool { a.at < b.at }
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
        /// New or newer, but it would take the table past ``maxBytes`` (it holds `bytes`): ignored.
        case overBytes(bytes: Int)
    }

    /// The most activities of one origin node this node keeps.
    let maxPerOrigin: Int
    /// The most activities this node keeps in all.
    let maxTotal: Int
    /// The most activities of one key (over every node that names it) this node keeps.
    let maxPerKey: Int
    /// The most memory the activities kept take (their ``DiscoveredActivity/footprint``): the
    /// quotas count activities, and each may carry nearly a whole frame of text from a peer that lies.
    let maxBytes: Int
    /// What they take now.
    private(set) var bytes = 0
    private var keys = KeyCounts()
    /// Keyed by ``HashedID`` (``HashedTable``, which never hashes again): these grow with the bus,
    /// and each advertisement heard goes through both (and a new one grows them).
    private var entries = HashedTable<HashedID, Entry>()
    private var byOrigin = HashedTable<HashedID, HashedTable<HashedID, Void>>()
    /// When to look at which entry's lease, soonest first: one live item per entry, due no later
    /// than its deadline. A renewal (the common case: presence every interval) leaves it alone;
    /// when it comes due early, the entry is put back at its deadline. So a sweep costs the entries
    /// due, not the table.
    private var leaseChecks = MinHeap<Check<ContinuousClock.Instant>>()
    /// The same for expiration dates, for the entries that have one.
    private var expiryChecks = MinHeap<Check<Date>>()
    private var nextGeneration: UInt64 = 0

    init(maxPerOrigin: Int, maxTotal: Int, maxPerKey: Int = .max, maxBytes: Int = .max) {
        self.maxPerOrigin = maxPerOrigin
        self.maxTotal = maxTotal
        self.maxPerKey = maxPerKey
        self.maxBytes = maxBytes
    }

    var count: Int { entries.count }
    var values: [Entry] { entries.values }
    /// How many times an id has come into the table (a new one, or a forgotten one back): while
    /// it stays the same, nothing absent has appeared (the simulator's invariants look again for
    /// ended activities only when it moved).
    var arrivals: UInt64 { nextGeneration }

    /// The known activity of `activityType` made current or changed last, by its originator's
    /// clock (``DiscoveredActivity/updatedAt``), also when this node heard of them in another order
    /// (a snapshot, a slow link); without that time (older nodes), the one whose newest version this
    /// node heard of last. Versions count per activity, so they are never compared across activities.
    func newest(ofType activityType: String) -> DiscoveredActivity? {
        entries.values.filter { $0.activity.activityType == activityType }.max { a, b in
            let (first, second) = (a.activity.updatedAt ?? .distantPast, b.activity.updatedAt ?? .distantPast)
            return first != second ? first < second : a.changed < b.changed
        }?.activity
    }

    subscript(id: String) -> Entry? { entries[HashedID(id)] }
    subscript(id: HashedID) -> Entry? { entries[id] }
    /// The version known of `id`, if it is known.
    func version(of id: HashedID) -> UInt64? { entries[id]?.activity.version }

    /// The ids known of the origin node `origin` (its node id).
    func ids(ofOrigin origin: String) -> Set<String>? { byOrigin[HashedID(origin)].map { Set($0.keys.map(\.id)) } }

    /// Activities kept per origin key.
    var perKey: [[UInt8]: Int] { keys.counts }

    /// Takes an advertisement believed fresh: `deadline` is now plus its lease.
    mutating func arrive(_ activity: DiscoveredActivity, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Arrival {
        arrive(activity, id: HashedID(activity.id), origin: HashedID(activity.origin.id), deadline: deadline, now: now)
    }

    /// The same, with the activity's id and its origin's as the caller hashed them already.
    mutating func arrive(
        _ activity: DiscoveredActivity, id: HashedID, origin: HashedID, deadline: ContinuousClock.Instant, now: ContinuousClock.Instant
    ) -> Arrival {
        // Found once and written back by position: a known activity's renewal looks its id up once.
        guard let position = entries.position(of: id) else {
            // The origin's set found once, for the quota and the insertion, and changed by its
            // position. (Refused, nothing is left behind.)
            let originPosition = byOrigin.position(of: origin)
            let ofOrigin = originPosition.map { byOrigin[at: $0].count } ?? 0
            let key = activity.origin.publicKey?.bytes ?? []
            guard ofOrigin < maxPerOrigin, entries.count < maxTotal, keys[key] < maxPerKey else {
                return .overQuota(ofOrigin: ofOrigin, total: entries.count)
            }
            let footprint = activity.footprint
            guard bytes + footprint <= maxBytes else { return .overBytes(bytes: bytes) }
            bytes += footprint
            keys.add(key)
            link(id, to: origin, at: originPosition)
            nextGeneration += 1
            var entry = Entry(activity: activity, deadline: deadline, changed: now, generation: nextGeneration,
                              leaseCheck: deadline, expiryCheck: nil)
            entry.footprint = footprint
            leaseChecks.insert(Check(at: deadline, id: id, generation: entry.generation))
            scheduleExpiry(of: &entry, id: id)
            entries.insertNew(id, entry)
            compactIfNeeded()
            return .appeared
        }
        var entry = entries[at: position]
        guard activity.version >= entry.activity.version else { return .stale }
        let isNewer = activity.version > entry.activity.version
        // Kept in place of the one held whenever it differs (a newer version; the same one from an
        // origin that restarted with a new endpoint), its bytes counted again: it must fit. Were a
        // same-version copy swapped in uncounted, a peer that lies could grow it without bound.
        let replaces = isNewer || entry.activity != activity
        if replaces {
            let footprint = activity.footprint
            guard bytes - entry.footprint + footprint <= maxBytes else { return .overBytes(bytes: bytes) }
            bytes += footprint - entry.footprint
            entry.footprint = footprint
        }
        if entry.activity.origin.id != origin.id {
            unlink(id, from: HashedID(entry.activity.origin.id))
            link(id, to: origin, at: byOrigin.position(of: origin))
        }
        if entry.activity.origin.publicKey != activity.origin.publicKey {
            keys.remove(entry.activity.origin.publicKey?.bytes ?? [])
            keys.add(activity.origin.publicKey?.bytes ?? [])
        }
        entry.deadline = deadline
        if deadline < entry.leaseCheck {
            // A shorter lease than before: look earlier (the later item is now stale).
            entry.leaseCheck = deadline
            leaseChecks.insert(Check(at: deadline, id: id, generation: entry.generation))
        }
        if replaces { entry.activity = activity }
        scheduleExpiry(of: &entry, id: id)
        if isNewer { entry.changed = now }
        entries[at: position] = entry
        compactIfNeeded()
        return isNewer ? .updated : .renewed
    }

    /// Forgets an activity; returns it if it was known.
    mutating func remove(_ id: String) -> DiscoveredActivity? {
        remove(HashedID(id))
    }

    /// The same, with the id as the caller hashed it already.
    mutating func remove(_ id: HashedID) -> DiscoveredActivity? {
        guard let entry = entries.removeValue(forKey: id) else { return nil }
        bytes -= entry.footprint
        unlink(id, from: HashedID(entry.activity.origin.id))
        keys.remove(entry.activity.origin.publicKey?.bytes ?? [])
        return entry.activity
    }

    /// Takes a node's presence: renews the leases of its known activities it lists, up to
    /// `deadline`. Returns those it does not list, which were withdrawn (and the withdrawal lost),
    /// unless the list was cut short (`partial`): for the caller to forget.
    mutating func renew(origin: String, listed: Set<String>, partial: Bool, deadline: ContinuousClock.Instant) -> [String] {
        guard let ids = byOrigin[HashedID(origin)] else { return [] }
        var unlisted: [String] = []
        for id in ids.keys {
            if listed.contains(id.id) {
                // Each id hashed once: a presence lists every activity of its node, every interval.
                if let position = entries.position(of: id), entries[at: position].deadline < deadline {
                    entries[at: position].deadline = deadline
                }
            } else if !partial {
                unlisted.append(id.id)
            }
        }
        return unlisted
    }

    /// The activities to forget now: leases run out (lost), or expiration dates passed (expired).
    /// Costs the schedule items that came due, not a pass over the table.
    mutating func due(now: ContinuousClock.Instant, wallClock: Date) -> [(id: String, reason: RemovalReason)] {
        var due: [(id: String, reason: RemovalReason)] = []
        var lost: Set<HashedID> = []
        while let check = leaseChecks.min, check.at <= now {
            leaseChecks.removeMin()
            guard let position = entries.position(of: check.id) else { continue }  // forgotten
            var entry = entries[at: position]
            guard entry.generation == check.generation, entry.leaseCheck == check.at else { continue }  // a stale item
            if entry.deadline <= now {
                due.append((check.id.id, .lost))
                lost.insert(check.id)
            } else {
                // Renewed since it was scheduled: look again at its deadline.
                entry.leaseCheck = entry.deadline
                entries[at: position] = entry
                leaseChecks.insert(Check(at: entry.deadline, id: check.id, generation: check.generation))
            }
        }
        while let check = expiryChecks.min, check.at <= wallClock {
            expiryChecks.removeMin()
            guard let position = entries.position(of: check.id) else { continue }
            var entry = entries[at: position]
            guard entry.generation == check.generation, entry.expiryCheck == check.at else { continue }
            entry.expiryCheck = nil
            if let expiration = entry.activity.expirationDate, expiration <= wallClock {
                if !lost.contains(check.id) { due.append((check.id.id, .expired)) }
            } else {
                scheduleExpiry(of: &entry, id: check.id)  // a newer version moved it later (or dropped it)
            }
            entries[at: position] = entry
        }
        return due
    }

    /// Schedules a look at the entry's expiration date, unless one is due no later than it.
    private mutating func scheduleExpiry(of entry: inout Entry, id: HashedID) {
        guard let expiration = entry.activity.expirationDate else { return }
        if let scheduled = entry.expiryCheck, scheduled <= expiration { return }
        entry.expiryCheck = expiration
        expiryChecks.insert(Check(at: expiration, id: id, generation: entry.generation))
    }

    /// Schedule items outlive the entries they were for (forgotten, or looked at earlier) until
    /// they come due; rebuilds a schedule when those far outnumber the entries.
    private mutating func compactIfNeeded() {
        if leaseChecks.count > 2 * entries.count + 1_024 {
            leaseChecks = MinHeap(zip(entries.keys, entries.values).map { id, entry in
                Check(at: entry.leaseCheck, id: id, generation: entry.generation)
            })
        }
        if expiryChecks.count > 2 * entries.count + 1_024 {
            expiryChecks = MinHeap(zip(entries.keys, entries.values).compactMap { id, entry in
                entry.expiryCheck.map { Check(at: $0, id: id, generation: entry.generation) }
            })
        }
    }

    /// Items in the two schedules (for tests: bounded by the entries, not by renewals).
    var scheduled: Int { leaseChecks.count + expiryChecks.count }

    /// Adds `id` to the set of `origin`, found at `position` in ``byOrigin`` if it has one.
    private mutating func link(_ id: HashedID, to origin: HashedID, at position: Int?) {
        if let position {
            byOrigin[at: position].insert(id)
        } else {
            var ids = HashedTable<HashedID, Void>()
            ids.insertNew(id, ())
            byOrigin.insertNew(origin, ids)
        }
    }

    private mutating func unlink(_ id: HashedID, from origin: HashedID) {
        guard let position = byOrigin.position(of: origin) else { return }
        byOrigin[at: position].remove(id)
        if byOrigin[at: position].isEmpty { byOrigin.remove(at: position) }
    }
}
