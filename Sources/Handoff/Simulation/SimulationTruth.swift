import Foundation

/// What really happened to every activity of a simulated run, as the invariants judge the nodes'
/// beliefs against it: who made it, since when it is at its version, and when it ended.
struct SimulationTruth {
    struct Activity {
        let origin: Int
        let type: String
        let activity: UserActivity
        var version: UInt64
        /// When it was made current or last changed.
        var changedAt: Duration
        var endedAt: Duration?
        /// When its expiration date passes, if it has one.
        let expiresAt: Duration?
    }

    private(set) var activities: [String: Activity] = [:]
    /// How many times each activity was handed over by its origin (not counting refreshes).
    private(set) var handedOver: [String: Int] = [:]
    /// Continue requests waiting for their end: by number, who made it and its deadline.
    private(set) var waiting: [Int: (node: Int, deadline: Duration)] = [:]
    private var requests = 0
    /// Did-updates told, in order: to which node, of which activity, at which version, and the
    /// version that node held before.
    private(set) var didUpdates: [(node: Int, id: String, version: UInt64, held: UInt64)] = []
    /// Ids in the order made (dictionary order is not stable across runs).
    private(set) var order: [String] = []
    private var made = 0

    mutating func newID(origin: Int) -> String {
        made += 1
        return "a\(made)-n\(origin)"
    }

    mutating func made(_ activity: UserActivity, origin: Int, at now: Duration, expires: Duration?) {
        activities[activity.id] = Activity(
            origin: origin, type: activity.activityType, activity: activity, version: activity.version,
            changedAt: now, endedAt: nil, expiresAt: expires)
        order.append(activity.id)
    }

    mutating func changed(_ activity: UserActivity, at now: Duration) {
        activities[activity.id]?.version = activity.version
        activities[activity.id]?.changedAt = now
    }

    mutating func ended(_ id: String, at now: Duration) {
        guard activities[id]?.endedAt == nil else { return }
        activities[id]?.endedAt = now
    }

    subscript(id: String) -> Activity? { activities[id] }

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
