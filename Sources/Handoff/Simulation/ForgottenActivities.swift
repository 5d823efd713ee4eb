/// Which table of known activities a follower has (its process) and how many ids have come into
/// it (``KnownActivities/arrivals``): while both stay the same, no activity the follower did not
/// know has appeared in it.
struct KnownArrivals: Equatable {
    var incarnation: Int
    var arrivals: UInt64
}

/// The run's activities as ``SimulationInvariants/knownWithinBounds(_:)`` looks at them: those it
/// looks at after every step, and the ended ones that no node following their type knows any more,
/// set aside.
///
/// The invariant holds every follower to every activity of the run's history after every step,
/// and most of that history has ended and been forgotten: going over it was most of the
/// invariant's time. An activity set aside can break it again only by coming back into a
/// follower's table, and nothing comes into a table without its ``KnownArrivals`` moving (or its
/// process changing): so the set-aside ones are looked at only for a follower whose table moved,
/// and one known there again, within its bound, is taken back among those looked at.
struct ForgottenActivities {
    /// The activities looked at after every step, by their place in the run's history, in order.
    private(set) var watched: [Int] = []
    /// Ended activities that no follower of their type knew when they were set aside.
    private(set) var setAside: [Int] = []
    /// How much of the run's history has been taken in (what was made since is watched).
    private var taken = 0
    /// Each node's table as the set-aside activities were last looked at for it.
    private var tables: [KnownArrivals?] = []

    /// Takes in what the run made since the last step (its history holds `count` activities).
    mutating func takeIn(upTo count: Int) {
        watched.append(contentsOf: taken..<count)
        taken = count
    }

    /// The nodes whose tables moved since the set-aside activities were last looked at for them
    /// (their tables are now `tables`), remembered as looked at.
    mutating func tablesMoved(_ tables: [KnownArrivals]) -> [Int] {
        if self.tables.count != tables.count { self.tables = Array(repeating: nil, count: tables.count) }
        var moved: [Int] = []
        for node in tables.indices where self.tables[node] != tables[node] {
            moved.append(node)
            self.tables[node] = tables[node]
        }
        return moved
    }

    /// Sets aside the watched activities in `forgotten` (their places in the history).
    mutating func setAside(_ forgotten: [Int]) {
        guard !forgotten.isEmpty else { return }
        let leaving = Set(forgotten)
        watched.removeAll { leaving.contains($0) }
        setAside.append(contentsOf: forgotten)
    }

    /// Watches again the set-aside activities in `known` (known again by a follower).
    mutating func watchAgain(_ known: Set<Int>) {
        guard !known.isEmpty else { return }
        setAside.removeAll { known.contains($0) }
        watched.append(contentsOf: known)
        watched.sort()
    }
}
