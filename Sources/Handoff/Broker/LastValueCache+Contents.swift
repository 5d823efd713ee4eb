// What the cache holds, as sets and tallies: for tests, and for what a broker reports.

extension LastValueCache {
    /// The ids of the cached activities.
    var ids: Set<String> { Set(slots.live.map(\.value.idString)) }

    /// Cached activities per origin key.
    var perKey: [[UInt8]: Int] { keys.counts }

    /// Whether some origin has more than `quota` activities cached (without making ``perOrigin``:
    /// the simulator asks after every step). A plain loop over the slots, each read in place: through
    /// `live`'s lazy map it was a tenth of a debug simulator run.
    func hasOrigin(over quota: Int) -> Bool {
        for slot in 0..<Int32(origins.end) where (origins[slot]?.count ?? 0) > quota { return true }
        return false
    }

    /// Cached activities per origin.
    var perOrigin: [String: Int] {
        Dictionary(uniqueKeysWithValues: origins.live.map { ($0.value.id, $0.value.count) })
    }
}
