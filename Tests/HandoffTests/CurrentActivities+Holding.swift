@testable import Handoff

extension CurrentActivities {
    /// The current activities of a node that made `activities` current, for the machines' tests.
    static func holding(_ activities: UserActivity...) -> CurrentActivities {
        var current = CurrentActivities()
        for activity in activities { current.add(activity) }
        return current
    }
}
