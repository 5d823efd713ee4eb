import Foundation

/// Ids of activities this node held and let lapse (their lease ran out while their origin was
/// stopped, cut off, or its presence lost), by origin. Such an id is of a type this node follows
/// and was once believed, not made up, so a presence that lists it again is worth one round of
/// snapshots even from a sender held back (``Resynchronization``).
///
/// Kept past the origin's own lapse (that is when it matters: the origin comes back) and bounded:
/// past `capacity` ids, the origins that lapsed longest ago are dropped first (at worst one of
/// their ids waits for its next refresh instead of a snapshot). No I/O: time passed in.
struct LapsedIDs {
    let capacity: Int
    private var byOrigin: [String: (ids: Set<String>, lastLapse: ContinuousClock.Instant)] = [:]
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
    }

    /// `id` of `origin` lapsed at `now`.
    mutating func lapsed(_ id: String, origin: String, now: ContinuousClock.Instant) {
        var entry = byOrigin[origin] ?? ([], now)
        guard entry.ids.insert(id).inserted else { return }
        entry.lastLapse = now
        byOrigin[origin] = entry
        count += 1
        while count > capacity, let oldest = byOrigin.min(by: { $0.value.lastLapse < $1.value.lastLapse })?.key {
            count -= byOrigin.removeValue(forKey: oldest)?.ids.count ?? 0
        }
    }

    /// What a presence of `origin` makes of its lapsed ids: those it lists and this node does not
    /// hold (`unheld`) are returned, each worth one ask; the rest ended (not listed) or came back
    /// (held). Either way the origin's memory is spent.
    mutating func relisted(origin: String, unheld: Set<String>) -> Set<String> {
        guard let entry = byOrigin.removeValue(forKey: origin) else { return [] }
        count -= entry.ids.count
        return entry.ids.intersection(unheld)
    }

    /// Whether `id` of `origin` is remembered, for tests.
    func contains(_ id: String, origin: String) -> Bool { byOrigin[origin]?.ids.contains(id) ?? false }
}
