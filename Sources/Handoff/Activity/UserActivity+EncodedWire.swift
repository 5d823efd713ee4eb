import Foundation
import HandoffWire
import SwiftProtobuf

extension UserActivity {
    /// The full activity as a continue reply carries it, encoded once for as long as it holds: a
    /// node answering the same activity again and again (a continuing node that refreshes it, or
    /// many nodes continuing it) built the message and encoded it for every reply, about 3 µs of
    /// the answering loop's critical path each time.
    ///
    /// It holds while the activity's version and the time it was last made current or changed are
    /// the same, and so are the origin and the default team it was encoded with: every change the
    /// wire carries goes through `mutate`, which bumps the version, and becoming current again
    /// stamps `updatedAt`. What changes without either (the delegate, `needsSave`, the node, the
    /// continue-once claim) is not in the message.
    struct EncodedWire {
        let version: UInt64
        let updatedAt: Date
        let origin: WireNodeRef
        let defaultTeamID: String?
        let bytes: [UInt8]

        init(_ activity: WireActivity, updatedAt: Date, defaultTeamID: String?) {
            version = activity.version
            self.updatedAt = updatedAt
            origin = activity.origin
            self.defaultTeamID = defaultTeamID
            // Once per version: SwiftProtobuf's encoding, which the envelope carries as it is.
            // Encoding a proto3 message cannot fail: there are no required fields.
            bytes = try! activity.serializedBytes()
        }

        func holds(for state: State, origin: WireNodeRef, defaultTeamID: String?) -> Bool {
            version == state.version && updatedAt == state.updatedAt && self.defaultTeamID == defaultTeamID
                && self.origin == origin
        }
    }

    /// The full activity `state` makes, as sent to a continuing node.
    func wire(of state: State, origin: WireNodeRef, defaultTeamID: String?) -> WireActivity {
        var activity = WireActivity()
        activity.activityID = id
        activity.activityType = activityType
        activity.title = state.title
        activity.userInfo = wireUserInfo(state.userInfo)
        activity.requiredUserInfoKeys = state.requiredUserInfoKeys.sorted()
        activity.webpageURL = state.webpageURL?.absoluteString ?? ""
        activity.keywords = state.keywords.sorted()
        if let expiration = state.expirationDate { activity.expiration = WireTimestamp(expiration) }
        activity.eligibleForHandoff = state.isEligibleForHandoff
        activity.supportsContinuationStreams = state.supportsContinuationStreams
        activity.teamID = state.teamID ?? defaultTeamID ?? ""
        activity.origin = origin
        activity.version = state.version
        activity.updatedAt = WireTimestamp(state.updatedAt)
        if let document = state.document { activity.document = document.wire }
        return activity
    }
}
