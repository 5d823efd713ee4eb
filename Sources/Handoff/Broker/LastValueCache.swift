import Foundation
import HandoffWire
import ZeroMQ

/// The newest advertisement of each live activity, by activity id, with its frames as received:
/// what a broker answers snapshots from.
///
/// Bounded three times: at most ``capacity`` activities (when full, the one that expires soonest
/// makes room), at most ``perOriginQuota`` of any one origin, and at most ``perKeyQuota`` of any
/// one key (a new activity beyond either is refused, so that one node cannot fill the cache, nor,
/// through it, every joiner's snapshot; and one member cannot either, by naming itself as many
/// nodes under its key).
///
/// A broker stores one advertisement per message it forwards, so storing is its hot path (it was
/// half its thread's time in `broker-capacity`): one hash of the id to find it, one of the origin,
/// one allocation for the frames. Entries live in slots of an array, found by id through a
/// ``SlotIndex`` (8 bytes a bucket, the ids kept only in the entries); what refers to an entry
/// (its origin's list, an expiry item) holds its slot number, so that keeping them in order moves
/// plain numbers, no reference counts. An origin's entries are a list linked through their slots,
/// so that adding or removing one hashes nothing more. Times are ``Ticks``, nanoseconds since the
/// cache was made. An entry keeps its own copy of the topic and envelope (``ZeroMQ/JoinedFrames``).
///
/// Expiry is tracked with a min-heap of (time, slot, generation) holding one live item per entry,
/// due no later than its expiry. A renewal (presence, every interval, for every activity) moves
/// only the entry's expiry; when the item comes due early the entry is put back at its expiry.
/// An entry removed, or looked at earlier than first planned, leaves its old item behind, recognised
/// as stale (generation and time) and dropped when it surfaces.
struct LastValueCache {
    let capacity: Int
    let perOriginQuota: Int
    let perKeyQuota: Int
    let defaultLease: Duration
    private let defaultLeaseTicks: Ticks
    /// What ``Ticks`` count from.
    private let epoch: ContinuousClock.Instant
    private(set) var slots = Slots<Entry>()
    /// The slot of each cached activity, by its id's hash.
    private var index = SlotIndex()
    private(set) var origins = Slots<Origin>()
    /// The slot in ``origins`` of each origin with cached activities, by its id's hash.
    private var originIndex = SlotIndex(minimumCapacity: 64)
    private var deadlines = MinHeap<Deadline>()
    /// Cached activities per origin key.
    private(set) var keys = KeyCounts()
    private var nextGeneration: UInt64 = 0
    private var lastConverted: (instant: ContinuousClock.Instant, ticks: Ticks)?
    /// The sites entries came from, by index (bounded: past ``maxSites`` an entry's site is unknown).
    private var siteNames: [String] = []
    private(set) var siteIndex: [String: Int32] = [:]
    static let maxSites = 4_096
    /// The most bytes the entries take (``bytes``); when a new or grown entry would take more,
    /// those that expire soonest make room: an entry holds up to a whole frame (64 KiB), so a
    /// bound in entries alone lets a cache of 100,000 grow to 6.4 GB.
    let maxBytes: Int
    /// What the entries take: their frames' bytes, and ``entryOverhead`` each.
    private(set) var bytes = 0
    /// What an entry takes beyond its frames (its slot, index bucket, heap item, key and origin),
    /// as `handoff-bench broker-capacity` measures it (about 207 bytes), rounded up.
    static let entryOverhead = 256

    init(capacity: Int, maxBytes: Int = .max, perOriginQuota: Int = .max, perKeyQuota: Int = .max, defaultLease: Duration) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.perOriginQuota = perOriginQuota
        self.perKeyQuota = perKeyQuota
        self.defaultLease = defaultLease
        defaultLeaseTicks = Self.ticks(defaultLease)
        epoch = .now
        // Room for the whole capacity at once: a broker taking a burst of new activities would
        // otherwise copy its slots each time they double. Only address space until entries fill
        // it: the kernel maps a page when it is first written, and both fill from the front.
        // (Up to 262,144: a larger capacity grows past it as it fills, rather than taking its
        // address space at start.) The index grows as it fills: it is written all over, so room
        // reserved there would be written whole, and doubling it hashes nothing again.
        let room = min(capacity, 1 << 18)
        slots.reserveCapacity(room)
        deadlines.reserveCapacity(room)
    }

    /// Activities cached (some may have expired since the last ``removeExpired(now:)``).
    var count: Int { index.count }

    /// Whether an activity is cached.
    func contains(_ id: String) -> Bool { slot(of: id) != nil }

    /// The slot of a cached activity.
    private func slot(of id: String) -> Int32? {
        var id = id
        return id.withUTF8 { slot(ofID: UnsafeRawBufferPointer($0)) }
    }

    /// Looks up the activity whose id is `id`'s bytes.
    func lookUp(id: UnsafeRawBufferPointer) -> Lookup {
        let hash = SlotIndex.hash(id)
        return Lookup(hash: hash, slot: slot(ofID: id, hash: hash))
    }

    /// Looks up the activity whose id lies at `id` in the envelope (second frame) of `frames`.
    @inline(never)  // see slot(ofID:hash:)
    func lookUp(_ id: Range<Int>, inEnvelopeOf frames: some MessageFrames) -> Lookup {
        frames.withBytes(ofFrame: 1) { lookUp(id: WireBusFields.bytes(id, in: $0)) }
    }

    /// The key of the origin of a looked-up activity, if it is cached.
    func originKey(of lookup: Lookup) -> [UInt8]? {
        lookup.slot.flatMap { slots[$0]?.originKey }
    }

    /// The slot of the cached activity whose id is `id`'s bytes.
    ///
    /// Never inlined: inlined into a mutating method (the store), its closure, which reads
    /// `self`, made the optimizer copy the entries it compared (a retain and release of each
    /// reference an entry holds), or the whole cache; called, it reads them in place.
    @inline(never)
    private func slot(ofID id: UnsafeRawBufferPointer, hash: UInt32? = nil) -> Int32? {
        index.slot(hash: hash ?? SlotIndex.hash(id)) { slots[$0]!.hasID(id) }
    }

    /// The slot in ``origins`` of the origin whose node id is `id`'s bytes.
    @inline(never)  // see slot(ofID:hash:)
    private func originRecord(_ id: UnsafeRawBufferPointer, hash: UInt32) -> Int32? {
        // The records alone in the closure: one that captured `self`, inlined into the mutating
        // store, copied the whole cache (a retain of every array it holds) for each message.
        let origins = origins
        return originIndex.slot(hash: hash) { utf8(of: origins[$0]!.id, equals: id) }
    }

    /// The slot in ``origins`` of an origin.
    private func originRecord(_ id: String) -> Int32? {
        var id = id
        return id.withUTF8 { originRecord(UnsafeRawBufferPointer($0), hash: SlotIndex.hash(UnsafeRawBufferPointer($0))) }
    }

    /// When the earliest entry (or stale heap item) expires; `nil` when there is nothing to expire.
    var nextExpiry: ContinuousClock.Instant? { deadlines.min.map { epoch + .nanoseconds($0.expiry) } }

    /// Caches an advertisement unless a newer version is cached; an equal version renews it.
    @discardableResult
    ///
    /// - Parameter site: The site it came from, for a snapshot that one of them asks for without
    ///   its own (``live(matching:now:excludingSite:)``); `nil` for this broker's own publishers.
    ///
    /// - Parameter lookup: Its id's ``lookUp(id:)`` since the cache last changed, if there was one.
    mutating func store(
        _ advertisement: CachedAdvertisement, frames: some MessageFrames, site: String? = nil, now: ContinuousClock.Instant, lookup: Lookup? = nil
    ) -> Outcome {
        let now = convertOnce(now)
        return frames.withBytes(ofFrame: 1) { envelope in
            store(advertisement, frames: frames, envelope: envelope, site: site, now: now, lookup: lookup)
        }
    }

    /// ``store(_:frames:site:now:)``, with the envelope's bytes at hand: its id and origin are
    /// hashed and compared where they lie.
    private mutating func store(
        _ advertisement: CachedAdvertisement, frames: some MessageFrames, envelope: UnsafeRawBufferPointer, site: String?, now: Ticks,
        lookup: Lookup?
    ) -> Outcome {
        let id = WireBusFields.bytes(advertisement.activityID, in: envelope)
        let originID = WireBusFields.bytes(advertisement.origin.id, in: envelope)
        let found = lookup ?? lookUp(id: id)
        let (hash, existing) = (found.hash, found.slot)
        if let slot = existing, slots[slot]!.expiry > now, slots[slot]!.version > advertisement.version {
            return .stale
        }
        var lease = advertisement.leaseMs > 0 ? Ticks(WireLimits.granted(leaseMs: advertisement.leaseMs)) * 1_000_000 : defaultLeaseTicks
        if let expiresAt = advertisement.expiresAt {
            lease = min(lease, Self.ticks(seconds: expiresAt.timeIntervalSinceNow))
        }
        guard lease > 0 else {
            // A current advertisement that has already expired: nothing to answer with any more.
            if let existing { remove(at: existing) }
            return .expired
        }
        let expiry = now + lease
        // Where the id lies in the copy kept (after the topic).
        let topic = frames.size(ofFrame: 0)
        let idInFrames = advertisement.activityID.lowerBound + topic..<advertisement.activityID.upperBound + topic
        let originKey = Array(WireBusFields.bytes(advertisement.origin.publicKey, in: envelope))
        if let slot = existing, utf8(of: origins[slots[slot]!.origin]!.id, equals: originID) {
            // A newer (or the same) version from the same origin: in place.
            bytes += frames.totalSize - slots[slot]!.frames.header.count
            slots[slot]!.frames = frames.joined()
            slots[slot]!.id = idInFrames
            if slots[slot]!.originKey != originKey {
                keys.remove(slots[slot]!.originKey)
                keys.add(originKey)
            }
            slots[slot]!.originKey = originKey
            slots[slot]!.version = advertisement.version
            slots[slot]!.site = index(ofSite: site)
            slots[slot]!.expiry = expiry
            if expiry < slots[slot]!.check {
                // Due sooner than its item: a fresh item (the earlier one goes stale).
                slots[slot]!.check = expiry
                deadlines.insert(Deadline(expiry: expiry, slot: slot, generation: slots[slot]!.generation))
            }
            // Grown past the bytes: others make room (or, the soonest to expire itself, it goes).
            while bytes > maxBytes, evictSoonest() {}
            compactIfNeeded()
            return .stored
        }
        let originHash = SlotIndex.hash(originID)
        var origin = originRecord(originID, hash: originHash)
        if let origin, origins[origin]!.count >= perOriginQuota { return .overQuota }
        if keys[originKey] >= perKeyQuota { return .overKeyQuota }
        if let existing {
            remove(at: existing)  // the same id from another origin: counted against the new one
        } else {
            while index.count >= capacity, evictSoonest() {}
        }
        let size = frames.totalSize + Self.entryOverhead
        while bytes + size > maxBytes, evictSoonest() {}
        // Removing may have emptied the origin's record (no record is made meanwhile to reuse it).
        if let slot = origin, origins[slot] == nil { origin = nil }
        let originSlot = origin ?? newOrigin(String(decoding: originID, as: UTF8.self), hash: originHash)
        nextGeneration += 1
        let first = origins[originSlot]!.first
        // Made in the call: a local handed over was copied (a retain of each reference) first.
        let slot = slots.insert(Entry(
            id: idInFrames, hash: hash, frames: frames.joined(), origin: originSlot, site: index(ofSite: site), nextOfOrigin: first,
            originKey: originKey, version: advertisement.version, expiry: expiry, generation: nextGeneration, check: expiry))
        if first >= 0 { slots[first]!.previousOfOrigin = slot }
        origins[originSlot]!.first = slot
        origins[originSlot]!.count += 1
        keys.add(originKey)
        bytes += size
        index.insert(slot, hash: hash)
        deadlines.insert(Deadline(expiry: expiry, slot: slot, generation: nextGeneration))
        compactIfNeeded()
        return .stored
    }

    /// The version of a cached activity.
    func version(of id: String) -> UInt64? {
        slot(of: id).flatMap { slots[$0]?.version }
    }

    /// The key of a cached activity's origin.
    func originKey(of id: String) -> [UInt8]? {
        slot(of: id).flatMap { slots[$0]?.originKey }
    }

    /// The version of a looked-up activity, if it is cached.
    func version(of lookup: Lookup) -> UInt64? {
        lookup.slot.flatMap { slots[$0]?.version }
    }

    /// Forgets an activity.
    mutating func remove(_ id: String) {
        if let slot = slot(of: id) { remove(at: slot) }
    }

    /// Forgets a looked-up activity, if it is cached.
    mutating func remove(_ lookup: Lookup) {
        if let slot = lookup.slot { remove(at: slot) }
    }

    /// Forgets the activity in a live slot.
    private mutating func remove(at slot: Int32) {
        guard let entry = slots.remove(slot) else { return }
        bytes -= entry.frames.header.count + Self.entryOverhead
        index.remove(slot, hash: entry.hash)
        let origin = entry.origin
        if entry.previousOfOrigin >= 0 {
            slots[entry.previousOfOrigin]!.nextOfOrigin = entry.nextOfOrigin
        } else {
            origins[origin]!.first = entry.nextOfOrigin
        }
        if entry.nextOfOrigin >= 0 { slots[entry.nextOfOrigin]!.previousOfOrigin = entry.previousOfOrigin }
        origins[origin]!.count -= 1
        if origins[origin]!.count == 0 {
            originIndex.remove(origin, hash: origins[origin]!.hash)
            origins.remove(origin)
        }
        keys.remove(entry.originKey)
    }

    /// Takes an origin's presence: renews each of its cached activities it lists for `lease` from
    /// `now`, and forgets the others (withdrawn, the withdrawal lost) unless the list is `partial`.
    ///
    /// Returns how many listed activities the cache lacks and has room for under the origin's
    /// quota: activities its origin still has current that the cache lost (it restarted, or their
    /// leases ran out while the origin stalled). The broker asks the origin to advertise them again.
    @discardableResult
    mutating func renew(origin: String, listed: Set<String>, partial: Bool, lease: Duration, now: ContinuousClock.Instant) -> Int {
        guard let record = originRecord(origin) else { return min(listed.count, max(0, perOriginQuota)) }
        let expiry = ticks(now) + Self.ticks(lease)
        // Each listed id looked up (its entry holds its id in its envelope, not as a value).
        var renewed = Set<Int32>(minimumCapacity: listed.count)
        for id in listed {
            guard let slot = slot(of: id), slots[slot]!.origin == record else { continue }
            renewed.insert(slot)
            // Later than before: its heap item stays, and puts it back when it comes due.
            if slots[slot]!.expiry < expiry { slots[slot]!.expiry = expiry }
        }
        if !partial {
            var slot = origins[record]!.first
            while slot >= 0 {
                let next = slots[slot]!.nextOfOrigin
                if !renewed.contains(slot) { remove(at: slot) }
                slot = next
            }
        }
        let room = max(0, perOriginQuota - (origins[record]?.count ?? 0))
        return min(listed.count - renewed.count, room)
    }

    /// Drops every entry whose lease has ended, each named to `lapsed` (its origin, its id) when
    /// given: the names are made only for a caller that wants them; true when anything changed.
    mutating func removeExpired(now: ContinuousClock.Instant, lapsed: ((_ origin: String, _ id: String) -> Void)? = nil) -> Bool {
        let now = ticks(now)
        var removed = false
        while let first = deadlines.min, first.expiry <= now {
            deadlines.removeMin()
            guard isLive(first) else { continue }
            let entry = slots[first.slot]!
            if entry.expiry <= now {
                lapsed?(origins[entry.origin]!.id, entry.idString)
                remove(at: first.slot)
                removed = true
            } else {
                reschedule(first.slot, at: entry.expiry, generation: entry.generation)
            }
        }
        return removed
    }

    /// Whether a heap item is still its entry's live item.
    private func isLive(_ item: Deadline) -> Bool {
        guard let entry = slots[item.slot] else { return false }
        return entry.generation == item.generation && entry.check == item.expiry
    }

    /// Puts a renewed entry's item back at its expiry.
    private mutating func reschedule(_ slot: Int32, at expiry: Ticks, generation: UInt64) {
        slots[slot]!.check = expiry
        deadlines.insert(Deadline(expiry: expiry, slot: slot, generation: generation))
    }

    /// Removes the entry that expires soonest; false when there is none.
    private mutating func evictSoonest() -> Bool {
        while let first = deadlines.popMin() {
            guard isLive(first) else { continue }
            let entry = slots[first.slot]!
            if entry.expiry > first.expiry {
                // Renewed since: not the soonest after all.
                reschedule(first.slot, at: entry.expiry, generation: entry.generation)
                continue
            }
            remove(at: first.slot)
            return true
        }
        return false
    }

    /// Items in the expiry heap (for tests: bounded by the entries, not by renewals).
    var scheduled: Int { deadlines.count }
    /// Rebuilds the heap when stale items (of removed entries, or looked at earlier) far outnumber live entries.
    private mutating func compactIfNeeded() {
        guard deadlines.count > 4 * index.count + 1_024 else { return }
        deadlines = MinHeap(slots.live.map { slot, entry in Deadline(expiry: entry.check, slot: slot, generation: entry.generation) })
    }

    /// A site's index in ``siteNames``, made on first sight; -1 for none, or past ``maxSites``.
    private mutating func index(ofSite site: String?) -> Int32 {
        guard let site else { return -1 }
        if let index = siteIndex[site] { return index }
        guard siteNames.count < Self.maxSites else { return -1 }
        siteNames.append(site)
        siteIndex[site] = Int32(siteNames.count - 1)
        return Int32(siteNames.count - 1)
    }

    /// A record for an origin that has none.
    private mutating func newOrigin(_ id: String, hash: UInt32) -> Int32 {
        let slot = origins.insert(Origin(id: id, hash: hash, count: 0, first: -1))
        originIndex.insert(slot, hash: hash)
        return slot
    }

    func ticks(_ instant: ContinuousClock.Instant) -> Ticks { Self.ticks(epoch.duration(to: instant)) }

    /// ``ticks(_:)``, remembered for the next call with the same instant: a broker passes one
    /// time for each burst of messages it stores.
    private mutating func convertOnce(_ instant: ContinuousClock.Instant) -> Ticks {
        if let last = lastConverted, last.instant == instant { return last.ticks }
        let converted = ticks(instant)
        lastConverted = (instant, converted)
        return converted
    }
}
