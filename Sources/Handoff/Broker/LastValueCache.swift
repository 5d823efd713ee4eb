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
/// Entries live in slots of an array, found by id through one dictionary; what refers to an entry
/// (an origin's set, an expiry item) holds its slot number, so that keeping them in order moves
/// plain numbers, no reference counts (a broker stores one advertisement per message it forwards).
/// An entry keeps its own copy of the topic and envelope: a frame as received holds a share of
/// libzmq's 8 KiB receive buffer, which one long-lived advertisement would keep whole.
///
/// Expiry is tracked with a min-heap of (time, slot, generation) holding one live item per entry,
/// due no later than its expiry. A renewal (presence, every interval, for every activity) moves
/// only the entry's expiry; when the item comes due early the entry is put back at its expiry.
/// An entry removed, or looked at earlier than first planned, leaves its old item behind, recognised
/// as stale (generation and time) and dropped when it surfaces.
struct LastValueCache {
    struct Entry {
        var id: String
        var topic: [UInt8]
        var envelope: [UInt8]
        /// Its origin's node id (one string shared by the origin's entries).
        var origin: String
        var originKey: [UInt8]
        var version: UInt64
        var expiry: ContinuousClock.Instant
        /// Which arrival of an id in this slot the entry is (a removed id that comes back is a new one).
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
        var slot: Int32
        var generation: UInt64
        static func < (a: Deadline, b: Deadline) -> Bool { a.expiry < b.expiry }
    }

    let capacity: Int
    let perOriginQuota: Int
    let defaultLease: Duration
    private var slots: [Entry?] = []
    private var freeSlots: [Int32] = []
    /// The slot of each cached activity.
    private var slotOf: [String: Int32] = [:]
    /// The slots of the cached activities of each origin.
    private var byOrigin: [String: Set<Int32>] = [:]
    private var deadlines = Heap<Deadline>()
    private var nextGeneration: UInt64 = 0

    init(capacity: Int, perOriginQuota: Int = .max, defaultLease: Duration) {
        self.capacity = capacity
        self.perOriginQuota = perOriginQuota
        self.defaultLease = defaultLease
        // Room for the whole capacity at once: a broker taking a burst of new activities would
        // otherwise rehash its index and copy its slots each time they double (a third of its
        // thread's time in `broker-capacity`). Only address space until entries fill it: the
        // kernel maps a page when it is first written. (Up to 262,144: a larger capacity grows
        // past it as it fills, rather than taking its address space at start.)
        let room = min(capacity, 1 << 18)
        slotOf.reserveCapacity(room)
        slots.reserveCapacity(room)
        deadlines.reserveCapacity(room)
    }

    /// Activities cached (some may have expired since the last ``removeExpired(now:)``).
    var count: Int { slotOf.count }

    /// The ids of the cached activities.
    var ids: Set<String> { Set(slotOf.keys) }

    /// Whether an activity is cached.
    func contains(_ id: String) -> Bool { slotOf[id] != nil }

    /// Cached activities per origin.
    var perOrigin: [String: Int] { byOrigin.mapValues(\.count) }

    /// When the earliest entry (or stale heap item) expires; `nil` when there is nothing to expire.
    var nextExpiry: ContinuousClock.Instant? { deadlines.min?.expiry }

    /// Caches an advertisement unless a newer version is cached; an equal version renews it.
    @discardableResult
    mutating func store(_ advertisement: CachedAdvertisement, frames: [Frame], now: ContinuousClock.Instant) -> Outcome {
        let id = advertisement.activityID
        var existing = slotOf[id]
        if let slot = existing, let entry = slots[Int(slot)], entry.expiry > now, entry.version > advertisement.version {
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
        let expiry = now + lease
        if let slot = existing, slots[Int(slot)]?.origin == advertisement.origin {
            // A newer (or the same) version from the same origin: in place.
            slots[Int(slot)]!.envelope = frames[1].bytes
            slots[Int(slot)]!.originKey = advertisement.originKey
            slots[Int(slot)]!.version = advertisement.version
            slots[Int(slot)]!.expiry = expiry
            if expiry < slots[Int(slot)]!.check {
                // Due sooner than its item: a fresh item (the earlier one goes stale).
                slots[Int(slot)]!.check = expiry
                deadlines.insert(Deadline(expiry: expiry, slot: slot, generation: slots[Int(slot)]!.generation))
            }
            compactIfNeeded()
            return .stored
        }
        guard byOrigin[advertisement.origin]?.count ?? 0 < perOriginQuota else { return .overQuota }
        if existing != nil {
            remove(id)  // the same id from another origin: counted against the new one
            existing = nil
        } else {
            while slotOf.count >= capacity, evictSoonest() {}
        }
        nextGeneration += 1
        // The origin's string as its other entries hold it, when it has some.
        let origin = byOrigin.index(forKey: advertisement.origin).map { byOrigin.keys[$0] } ?? advertisement.origin
        let entry = Entry(
            id: id, topic: frames[0].bytes, envelope: frames[1].bytes, origin: origin, originKey: advertisement.originKey,
            version: advertisement.version, expiry: expiry, generation: nextGeneration, check: expiry)
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)] = entry
        } else {
            slot = Int32(slots.count)
            slots.append(entry)
        }
        slotOf[id] = slot
        byOrigin[origin, default: []].insert(slot)
        deadlines.insert(Deadline(expiry: expiry, slot: slot, generation: nextGeneration))
        compactIfNeeded()
        return .stored
    }

    /// The version of a cached activity.
    func version(of id: String) -> UInt64? {
        slotOf[id].flatMap { slots[Int($0)]?.version }
    }

    /// The key of a cached activity's origin.
    func originKey(of id: String) -> [UInt8]? {
        slotOf[id].flatMap { slots[Int($0)]?.originKey }
    }

    /// Forgets an activity.
    mutating func remove(_ id: String) {
        guard let slot = slotOf.removeValue(forKey: id), let entry = slots[Int(slot)] else { return }
        slots[Int(slot)] = nil
        freeSlots.append(slot)
        byOrigin[entry.origin]?.remove(slot)
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
        let cached = byOrigin[origin] ?? []
        let expiry = now + lease
        var listedCached = 0
        for slot in cached {
            guard let id = slots[Int(slot)]?.id else { continue }
            guard listed.contains(id) else {
                if !partial { remove(id) }
                continue
            }
            listedCached += 1
            // Later than before: its heap item stays, and puts it back when it comes due.
            if slots[Int(slot)]!.expiry < expiry { slots[Int(slot)]!.expiry = expiry }
        }
        let room = max(0, perOriginQuota - (byOrigin[origin]?.count ?? 0))
        return min(listed.count - listedCached, room)
    }

    /// Drops every entry whose lease has ended; true when anything changed.
    mutating func removeExpired(now: ContinuousClock.Instant) -> Bool {
        var removed = false
        while let first = deadlines.min, first.expiry <= now {
            deadlines.removeMin()
            guard let entry = liveEntry(of: first) else { continue }
            if entry.expiry <= now {
                remove(entry.id)
                removed = true
            } else {
                reschedule(first.slot, at: entry.expiry, generation: entry.generation)
            }
        }
        return removed
    }

    /// The entry a heap item is the live item of, if it still is.
    private func liveEntry(of item: Deadline) -> Entry? {
        guard let entry = slots[Int(item.slot)], entry.generation == item.generation, entry.check == item.expiry else { return nil }
        return entry
    }

    /// Puts a renewed entry's item back at its expiry.
    private mutating func reschedule(_ slot: Int32, at expiry: ContinuousClock.Instant, generation: UInt64) {
        slots[Int(slot)]!.check = expiry
        deadlines.insert(Deadline(expiry: expiry, slot: slot, generation: generation))
    }

    /// The envelope of every unexpired entry whose topic starts with `prefix`.
    func live(matching prefix: [UInt8], now: ContinuousClock.Instant) -> [[UInt8]] {
        slots.compactMap { entry in
            guard let entry, entry.expiry > now, entry.topic.starts(with: prefix) else { return nil }
            return entry.envelope
        }
    }

    /// Removes the entry that expires soonest; false when there is none.
    private mutating func evictSoonest() -> Bool {
        while let first = deadlines.popMin() {
            guard let entry = liveEntry(of: first) else { continue }
            if entry.expiry > first.expiry {
                // Renewed since: not the soonest after all.
                reschedule(first.slot, at: entry.expiry, generation: entry.generation)
                continue
            }
            remove(entry.id)
            return true
        }
        return false
    }

    /// Items in the expiry heap (for tests: bounded by the entries, not by renewals).
    var scheduled: Int { deadlines.count }

    /// Rebuilds the heap when stale items (of removed entries, or looked at earlier) far outnumber live entries.
    private mutating func compactIfNeeded() {
        guard deadlines.count > 4 * slotOf.count + 1_024 else { return }
        deadlines = Heap(slots.indices.compactMap { index in
            slots[index].map { Deadline(expiry: $0.check, slot: Int32(index), generation: $0.generation) }
        })
    }
}
