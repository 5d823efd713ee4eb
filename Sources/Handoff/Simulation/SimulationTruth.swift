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
}
