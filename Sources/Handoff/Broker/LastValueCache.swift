import Foundation
import HeapModule
import ZeroMQ

/// What the cache needs to know about an advertisement.
struct CachedAdvertisement {
    var activityID: String
    /// Who the activity belongs to, for the per-origin quota: its origin's node id.
    var origin: String
    /// The origin's CURVE key (empty without CURVE).
    var originKey: [UInt8] = []
    var version: UInt64
    /// The presence lease; 0 when unset.
    var leaseMs: UInt32
    /// The activity's expiration date, if it has one.
    var expiresAt: Date?
}

/// The newest advertisement of each live activity, by activity id, with its frames as received:
/// what a broker answers snapshots from.
///
/// Bounded twice: at most ``capacity`` activities (when full, the one that expires soonest makes
/// room), and at most ``perOriginQuota`` of any one origin (a new activity beyond it is refused, so
/// that one node cannot fill the cache, nor, through it, every joiner's snapshot).
///
/// Expiry is tracked with a min-heap of (time, id, generation) holding one live item per entry,
/// due no later than its expiry. A renewal (presence, every interval, for every activity) moves
/// only the entry's expiry; when the item comes due early the entry is put back at its expiry.
/// An entry removed, or looked at earlier than first planned, leaves its old item behind, recognised
/// as stale (generation and time) and dropped when it surfaces.
struct LastValueCache {
    struct Entry {
        /// The topic and envelope as received (libzmq's bytes, shared, not copied).
        var frames: [Frame]
        var origin: String
        var originKey: [UInt8]
        var version: UInt64
        var expiry: ContinuousClock.Instant
        /// Which arrival of this id the entry is (a removed id that comes back is a new one).
        var generation: UInt64
        /// When the entry's one live heap item is due.
        var check: ContinuousClock.Instant
    }

    /// What ``store(_:frames:now:)`` did.
    enum Outcome: Equatable {
        /// A new activity, or a newer (or equal, renewing) version of a cached one.
        case stored
        /// A cached newer version wins; nothing changed.
        case stale
        /// Already expired: removed (if it was cached) rather than stored.
        case expired
        /// A new activity of an origin that has its quota cached already: refused.
        case overQuota
    }

    private struct Deadline: Comparable {
        var expiry: ContinuousClock.Instant
        var id: String
        var generation: UInt64
        static func < (a: Deadline, b: Deadline) -> Bool { a.expiry < b.expiry }
    }

    let capacity: Int
    let perOriginQuota: Int
    let defaultLease: Duration
    private(set) var entries: [String: Entry] = [:]
    /// The ids of the cached activities of each origin.
    private var byOrigin: [String: Set<String>] = [:]
    /// Cached activities per origin.
    var perOrigin: [String: Int] { byOrigin.mapValues(\.count) }
    private var deadlines = Heap<Deadline>()
    private var nextGeneration: UInt64 = 0

    init(capacity: Int, perOriginQuota: Int = .max, defaultLease: Duration) {
        self.capacity = capacity
        self.perOriginQuota = perOriginQuota
        self.defaultLease = defaultLease
    }

    /// Activities cached (some may have expired since the last ``removeExpired(now:)``).
    var count: Int { entries.count }

    /// When the earliest entry (or stale heap item) expires; `nil` when there is nothing to expire.
    var nextExpiry: ContinuousClock.Instant? { deadlines.min?.expiry }

    /// Caches an advertisement unless a newer version is cached; an equal version renews it.
    @discardableResult
    mutating func store(_ advertisement: CachedAdvertisement, frames: [Frame], now: ContinuousClock.Instant) -> Outcome {
        let id = advertisement.activityID
        let existing = entries[id]
        if let existing, existing.expiry > now, existing.version > advertisement.version {
            return .stale
        }
        var lease = advertisement.leaseMs > 0 ? Duration.milliseconds(advertisement.leaseMs) : defaultLease
        if let expiresAt = advertisement.expiresAt {
            lease = min(lease, .seconds(expiresAt.timeIntervalSinceNow))
        }
        guard lease > .zero else {
            // A current advertisement that has already expired: nothing to answer with any more.
            remove(id)
            return .expired
        }
        if existing?.origin != advertisement.origin {
            guard byOrigin[advertisement.origin, default: []].count < perOriginQuota else { return .overQuota }
            if existing == nil {
                while entries.count >= capacity, evictSoonest() {}
            } else {
                remove(id)  // the same id from another origin: counted against the new one
            }
        }
        let expiry = now + lease
        // After a move between origins, gone: a new entry.
        let cached = existing?.origin == advertisement.origin ? existing : nil
        if cached == nil {
            byOrigin[advertisement.origin, default: []].insert(id)
            nextGeneration += 1
        }
        let generation = cached?.generation ?? nextGeneration
        var check = cached?.check ?? expiry
        if cached == nil || expiry < check {
            // New, or due sooner than its item: a fresh item (an earlier one goes stale).
            check = expiry
            deadlines.insert(Deadline(expiry: expiry, id: id, generation: generation))
        }
        entries[id] = Entry(
            frames: frames, origin: advertisement.origin, originKey: advertisement.originKey,
            version: advertisement.version,
            expiry: expiry, generation: generation, check: check)
        compactIfNeeded()
        return .stored
    }

    /// The key of a cached activity's origin.
    func originKey(of id: String) -> [UInt8]? {
        entries[id]?.originKey
    }

    /// Forgets an activity.
    mutating func remove(_ id: String) {
        guard let entry = entries.removeValue(forKey: id) else { return }
        byOrigin[entry.origin]?.remove(id)
        if byOrigin[entry.origin]?.isEmpty == true { byOrigin[entry.origin] = nil }
    }

    /// Takes an origin's presence: renews each of its cached activities it lists for `lease` from
    /// `now`, and forgets the others (withdrawn, the withdrawal lost) unless the list is `partial`.
    ///
    /// Returns how many listed activities the cache lacks and has room for under the origin's
    /// quota: activities its origin still has current that the cache lost (it restarted, or their
    /// leases ran out while the origin stalled). The broker asks the origin to advertise them again.
    @discardableResult
    mutating func renew(origin: String, listed: Set<String>, partial: Bool, lease: Duration, now: ContinuousClock.Instant) -> Int {
        let ids = byOrigin[origin] ?? []
        let expiry = now + lease
        var listedCached = 0
        for id in ids {
            guard listed.contains(id) else {
                if !partial { remove(id) }
                continue
            }
            listedCached += 1
            // Later than before: its heap item stays, and puts it back when it comes due.
            if let current = entries[id]?.expiry, current < expiry { entries[id]?.expiry = expiry }
        }
        let room = max(0, perOriginQuota - (byOrigin[origin]?.count ?? 0))
        return min(listed.count - listedCached, room)
    }

    /// Drops every entry whose lease has ended; true when anything changed.
    mutating func removeExpired(now: ContinuousClock.Instant) -> Bool {
        var removed = false
        while let first = deadlines.min, first.expiry <= now {
            deadlines.removeMin()
            guard let entry = entries[first.id], isLive(first, of: entry) else { continue }
            if entry.expiry <= now {
                remove(first.id)
                removed = true
            } else {
                reschedule(first.id, at: entry.expiry, generation: entry.generation)
            }
        }
        return removed
    }

    /// Whether a heap item is its entry's live one.
    private func isLive(_ item: Deadline, of entry: Entry) -> Bool {
        entry.generation == item.generation && entry.check == item.expiry
    }

    /// Puts a renewed entry's item back at its expiry.
    private mutating func reschedule(_ id: String, at expiry: ContinuousClock.Instant, generation: UInt64) {
        entries[id]?.check = expiry
        deadlines.insert(Deadline(expiry: expiry, id: id, generation: generation))
    }

    /// The frames of every unexpired entry whose topic starts with `prefix`.
    func live(matching prefix: [UInt8], now: ContinuousClock.Instant) -> [[Frame]] {
        entries.values.compactMap { entry in
            entry.expiry > now && entry.frames[0].withUnsafeBytes({ $0.starts(with: prefix) }) ? entry.frames : nil
        }
    }

    /// Removes the entry that expires soonest; false when there is none.
    private mutating func evictSoonest() -> Bool {
        while let first = deadlines.popMin() {
            guard let entry = entries[first.id], isLive(first, of: entry) else { continue }
            if entry.expiry > first.expiry {
                // Renewed since: not the soonest after all.
                reschedule(first.id, at: entry.expiry, generation: entry.generation)
                continue
            }
            remove(first.id)
            return true
        }
        return false
    }

    /// Items in the expiry heap (for tests: bounded by the entries, not by renewals).
    var scheduled: Int { deadlines.count }

    /// Rebuilds the heap when stale items (of removed entries, or looked at earlier) far outnumber live entries.
    private mutating func compactIfNeeded() {
        guard deadlines.count > 4 * entries.count + 1_024 else { return }
        deadlines = Heap(entries.map { Deadline(expiry: $0.value.check, id: $0.key, generation: $0.value.generation) })
    }
}
