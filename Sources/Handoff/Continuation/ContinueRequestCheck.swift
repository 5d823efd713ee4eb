import Foundation

/// The continuation server's answer to a continue request, as far as it is decided before anything
/// awaits (will-save and the continue-once claim come after): which current activity it is for, or
/// the precise reason there is none. A pure function of the request and ``CurrentActivities``.
enum ContinueRequestCheck: Equatable {
    /// Answer with this activity (after will-save and its own checks).
    case answer(UserActivity)
    /// Refuse with this error.
    case refuse(HandoffError)
    /// Its expiration date passed: the node takes it out (withdraws it) and refuses with the error.
    case expired(UserActivity, HandoffError)

    static func check(activityID: String, activityType: String, in current: CurrentActivities, node: String, now: Date) -> ContinueRequestCheck {
        guard WireLimits.fits(activityID: activityID, activityType: activityType) else {
            return .refuse(WireLimits.oversizedIdentifiers(activityID: activityID, activityType: activityType))
        }
        guard let activity = current[activityID] else {
            let error = switch current.endedReason(activityID) {
            case .activityInvalidated?:
                HandoffError(.activityInvalidated, "the activity was invalidated by its originator", activityType: activityType)
            case .activityExpired?:
                HandoffError(.activityExpired, "the activity expired", activityType: activityType)
            case .alreadyContinued?:
                HandoffError(.alreadyContinued, "the activity may be continued once, and it already was", activityType: activityType)
            default:
                HandoffError(.activityNotFound, "\(node) has no current activity \(activityID)", activityType: activityType)
            }
            return .refuse(error)
        }
        // The requester names the type it expects (wire.proto: checked by the origin), so that an
        // id from another context cannot hand it an activity its handler was not written for.
        guard activity.activityType == activityType else {
            return .refuse(HandoffError(.invalidActivityType, "activity \(activityID) on \(node) is of type \(activity.activityType), not \(activityType.isEmpty ? "the empty type" : activityType)", activityType: activityType))
        }
        // Not eligible for Handoff: as far as others know, it is not there (it was withdrawn).
        guard activity.isEligibleForHandoff else {
            return .refuse(HandoffError(.activityNotFound, "\(node) does not offer activity \(activityID) for Handoff now (eligibleForHandoff is off)", activityType: activityType))
        }
        if let expiration = activity.expirationDate, expiration <= now {
            return .expired(activity, HandoffError(.activityExpired, "the activity expired at \(expiration.formatted(.iso8601))", activityType: activity.activityType))
        }
        return .answer(activity)
    }

    static func == (lhs: ContinueRequestCheck, rhs: ContinueRequestCheck) -> Bool {
        switch (lhs, rhs) {
        case (.answer(let a), .answer(let b)): a === b
        case (.refuse(let a), .refuse(let b)): a == b
        case (.expired(let a, let x), .expired(let b, let y)): a === b && x == y
        default: false
        }
    }
}
