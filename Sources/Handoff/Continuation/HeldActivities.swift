/// The activities this node continued and still knows on the bus, for did-update: when the
/// originator advertises a newer version, the node fetches it once and tells its delegate.
///
/// At most one fetch per activity runs at a time; a version seen while one runs is fetched after it.
/// An activity leaves when it leaves the bus.
struct HeldActivities {
    private struct Entry {
        var version: UInt64
        var refreshing = false
    }

    private var entries: [String: Entry] = [:]

    var count: Int { entries.count }

    /// The version a continuation restored; an older one than already held changes nothing.
    mutating func hold(_ id: String, version: UInt64) {
        if let held = entries[id], held.version >= version { return }
        entries[id] = Entry(version: version, refreshing: entries[id]?.refreshing ?? false)
    }

    /// The version held, if the activity is.
    func version(of id: String) -> UInt64? { entries[id]?.version }

    /// Whether to fetch the activity now that `advertised` is on the bus: it is held, newer than
    /// what was restored, and no fetch runs. Marks the fetch as running when it says yes.
    mutating func beginRefresh(_ id: String, advertised: UInt64) -> Bool {
        guard var entry = entries[id], advertised > entry.version, !entry.refreshing else { return false }
        entry.refreshing = true
        entries[id] = entry
        return true
    }

    /// A fetch brought `fetched`: whether that version is news to tell the delegate (newer than
    /// the one held, which it becomes). The fetch still counts as running until ``endRefresh(_:)``.
    mutating func accept(_ id: String, fetched: UInt64) -> Bool {
        guard var entry = entries[id], fetched > entry.version else { return false }
        entry.version = fetched
        entries[id] = entry
        return true
    }

    /// The fetch is over (told, refused, or failed): the next newer version may start another.
    mutating func endRefresh(_ id: String) {
        entries[id]?.refreshing = false
    }

    /// The activity left the bus.
    mutating func release(_ id: String) {
        entries[id] = nil
    }
}
