/// Who a bus message says it comes from: its envelope's sender and, for an advertisement or a
/// withdrawal, the activity's origin.
struct BusClaim: Equatable {
    var senderID: String
    var senderKey: [UInt8]
    var activityID: String?
    var originID: String?
    var originKey: [UInt8]?
    /// Not a claim: the envelope's trace id, when a tracer asked for this one (wire.proto,
    /// "Tracing"); read with the rest, so that the broker reports its hops.
    var traceID: String?
}

/// The broker's rule that binds every bus message to the CURVE key its connection authenticated
/// (the ZAP handler's User-Id): a member may speak only for itself.
enum SenderCheck {
    /// Why a message is forged, or `nil` when it is not.
    ///
    /// - Parameters:
    ///   - claim: Who the message says it comes from.
    ///   - connectionKey: The key of the connection it arrived on; `nil` without CURVE, where
    ///     nothing can be checked.
    ///   - ownerKey: The key of the origin of the activity the message is about, as far as the
    ///     broker knows it (its cache), or `nil`.
    static func forgery(_ claim: BusClaim, connectionKey: [UInt8]?, ownerKey: [UInt8]?) -> String? {
        guard let connectionKey else { return nil }
        guard claim.senderKey == connectionKey else {
            return claim.senderKey.isEmpty ? "names no key as its sender" : "names another key as its sender"
        }
        if let originID = claim.originID, originID != claim.senderID || claim.originKey != claim.senderKey {
            return "speaks for node \(originID)"
        }
        if let ownerKey, ownerKey != connectionKey, let activityID = claim.activityID {
            return "is about activity \(activityID), which belongs to another key"
        }
        return nil
    }
}
