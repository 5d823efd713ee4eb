import Foundation

/// Ids of activities held here and let lapse (their lease ran out while their origin was stopped,
/// cut off, or its presence lost), by origin: by a follower (``Resynchronization``) or a broker's
/// cache (``ReadvertiseRequests``). Such an id is of a type followed here and was once believed,
/// not made up, so a presence that lists it again is worth one ask even from a sender held back.
///
/// Kept past the origin's own lapse (that is when it matters: the origin comes back) and bounded:
/// past `capacity` ids, the origins that lapsed longest ago are dropped, down to three quarters of
/// it in one pass (a site link's whole cache lapsing at once costs a sort now and then, not a scan
/// per id); at worst such an id waits for its refresh instead of an ask. No I/O: time passed in.
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
        guard count > capacity else { return }
        for (oldest, _) in byOrigin.sorted(by: { $0.value.lastLapse < $1.value.lastLapse }) where count > capacity * 3 / 4 {
            forget(origin: oldest)
        }
    }

    /// The ids of `origin` that lapsed here, if any.
    func ids(of origin: String) -> Set<String>? { byOrigin[origin]?.ids }

    /// `origin`'s lapsed ids, asked for or no longer lacking: forgotten.
    mutating func forget(origin: String) {
        count -= byOrigin.removeValue(forKey: origin)?.ids.count ?? 0
    }

    /// What a presence of `origin` makes of its lapsed ids: those it lists and this node does not
    /// hold (`unheld`) are returned, each worth one ask; the rest ended (not listed) or came back
    /// (held). Either way the origin's memory is spent.
    mutating func relisted(origin: String, unheld: Set<String>) -> Set<String> {
        guard let ids = ids(of: origin) else { return [] }
        forget(origin: origin)
        return ids.intersection(unheld)
    }

    /// Whether `id` of `origin` is remembered, for tests.
    func contains(_ id: String, origin: String) -> Bool { byOrigin[origin]?.ids.contains(id) ?? false }
}
