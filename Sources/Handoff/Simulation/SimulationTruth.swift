import Foundation

/// What really happened to every activity of a simulated run, as the invariants judge the nodes'
/// beliefs against it: who made it, since when it is at its version, and when it ended.
struct SimulationTruth {
    struct Activity {
        /// Its id, hashed once (the invariants look it up in every follower after every step).
        let id: HashedID
        let origin: Int
        let type: String
        let activity: UserActivity
        /// The nodes that follow its type, by index (what a node follows never changes in a run).
        let followers: [Int]
        var version: UInt64
        /// When it was made current or last changed.
        var changedAt: Duration
        var endedAt: Duration?
        /// When its expiration date passes, if it has one, by its origin's clock as it was made.
        let expiresAt: Duration?
        /// Its origin's clock's offset as it was made: the expiration date is by that clock.
        let expiryClockOffset: Duration

        /// When its expiration date passes by a clock `offset` from true time (``SimulatedClocks``).
        func expiresAt(byClockOffset offset: Duration) -> Duration? {
            expiresAt.map { $0 + expiryClockOffset - offset }
        }
    }

    /// Every activity of the run, in the order made (a dictionary's order is not stable across
    /// runs), and where each id is in it.
    private(set) var inOrder: [Activity] = []
    private var position: [String: Int] = [:]
    /// How many times each activity was handed over by its origin (not counting refreshes).
    private(set) var handedOver: [String: Int] = [:]
    /// Continue requests waiting for their end: by number, who made it and its deadline.
    private(set) var waiting: [Int: (node: Int, deadline: Duration)] = [:]
    private var requests = 0
    /// Did-updates told, in order: to which node, of which activity, at which version, and the
    /// version that node held before.
    private(set) var didUpdates: [(node: Int, id: String, version: UInt64, held: UInt64)] = []
    private var madeCount = 0

    mutating func newID(origin: Int) -> String {
        madeCount += 1
        return "a\(madeCount)-n\(origin)"
    }

    mutating func made(_ activity: UserActivity, origin: Int, followers: [Int], at now: Duration, expires: Duration?, clockOffset: Duration = .zero) {
        position[activity.id] = inOrder.count
        inOrder.append(Activity(
            id: HashedID(activity.id), origin: origin, type: activity.activityType, activity: activity, followers: followers,
            version: activity.version, changedAt: now, endedAt: nil, expiresAt: expires, expiryClockOffset: clockOffset))
    }

    mutating func changed(_ activity: UserActivity, at now: Duration) {
        guard let at = position[activity.id] else { return }
        inOrder[at].version = activity.version
        inOrder[at].changedAt = now
    }

    mutating func ended(_ id: String, at now: Duration) {
        guard let at = position[id], inOrder[at].endedAt == nil else { return }
        inOrder[at].endedAt = now
    }

    subscript(id: String) -> Activity? { position[id].map { inOrder[$0] } }

    /// Who made `id` and its version now, read in place: the invariants ask it of every activity
    /// a node knows, after every step, where the subscript's copy of the whole entry (its
    /// activity, its followers) is not needed.
    func originAndVersion(of id: String) -> (origin: Int, version: UInt64)? {
        position[id].map { (inOrder[$0].origin, inOrder[$0].version) }
    }

    mutating func handOver(_ id: String) { handedOver[id, default: 0] += 1 }

    mutating func requested(by node: Int, deadline: Duration) -> Int {
        requests += 1
        waiting[requests] = (node, deadline)
        return requests
    }

    mutating func didUpdate(node: Int, id: String, version: UInt64, held: UInt64) {
        didUpdates.append((node, id, version, held))
    }

    /// A request ended (answered, refused, timed out, dropped).
    mutating func requestEnded(_ number: Int) { waiting[number] = nil }

    /// A node's process died: what it waited for waits no more.
    mutating func forgetRequests(of node: Int) { waiting = waiting.filter { $0.value.node != node } }
}
