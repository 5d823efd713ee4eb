import DequeModule

/// The originating side's state: the activities current on a node, and why recent ones ended, so
/// that a late continue request is answered precisely (invalidated, expired, already continued)
/// rather than "not found". A pure value, tested without sockets; the node publishes.
struct CurrentActivities {
    /// How many ended activities are remembered; the oldest are forgotten first.
    static let endedCapacity = 10_000

    /// Keyed by ``HashedID`` (``HashedTable``): a node may hold tens of thousands, and each one
    /// made current (or changed) goes through it.
    private var byID = HashedTable<HashedID, UserActivity>()
    private var ended: [String: HandoffError.Code] = [:]
    private var endedOrder = Deque<String>()

    var count: Int { byID.count }
    /// In the order they were made current (save for removals, which move the last into the gap).
    var activities: [UserActivity] { byID.values }

    subscript(id: String) -> UserActivity? { byID[HashedID(id)] }

    /// Makes `activity` current (again): it no longer counts as ended.
    mutating func add(_ activity: UserActivity) {
        byID[HashedID(activity.id)] = activity
        // Looked up only when something ended: a lookup hashes the id even in an empty table.
        if !ended.isEmpty { ended[activity.id] = nil }
    }

    /// Takes an activity out; returns false when it was not current. Invalidated and expired
    /// activities are remembered as ended, with that reason.
    mutating func remove(_ id: String, reason: RemovalReason) -> Bool {
        guard byID.removeValue(forKey: HashedID(id)) != nil else { return false }
        switch reason {
        case .invalidated: markEnded(id, .activityInvalidated)
        case .expired: markEnded(id, .activityExpired)
        default: break
        }
        return true
    }

    /// Remembers why an activity ended (also `alreadyContinued` for a continue-once activity).
    mutating func markEnded(_ id: String, _ code: HandoffError.Code) {
        if ended.updateValue(code, forKey: id) == nil { endedOrder.append(id) }
        while endedOrder.count > Self.endedCapacity, let oldest = endedOrder.popFirst() {
            ended[oldest] = nil
        }
    }

    /// Why a recent activity ended, if it did.
    func endedReason(_ id: String) -> HandoffError.Code? { ended[id] }

    /// Every activity taken out at once (shutdown); returns them.
    mutating func removeAll() -> [UserActivity] {
        defer { byID.removeAll() }
        return byID.values
    }
}
