import HandoffWire
import ZeroMQ

/// What a bus message (topic, envelope) carries, as far as the broker's cache and sender check are
/// concerned.
enum BrokerBusContent {
    case advertisement(CachedAdvertisement, BusClaim)
    case withdrawal(activityID: String, BusClaim)
    case presence(origin: String, listed: Set<String>, partial: Bool, leaseMs: UInt32, BusClaim)
    case other(BusClaim)
    case malformed

    var claim: BusClaim? {
        switch self {
        case .advertisement(_, let claim), .withdrawal(_, let claim), .presence(_, _, _, _, let claim), .other(let claim): claim
        case .malformed: nil
        }
    }

    /// Reads the few fields the cache and the sender check need from a bus message's envelope, in
    /// place (``WireBusSummary``: no copy of the frame, no decoding of the rest). Without
    /// `readingSender` (no key to check it against), the claim's sender is left empty.
    init(_ frames: [Frame], readingSender: Bool = true) {
        guard frames.count == 2 else {
            self = .malformed
            return
        }
        self = frames[1].withUnsafeBytes { bytes -> BrokerBusContent in
            guard let summary = try? WireBusSummary.read(bytes, readingSender: readingSender) else { return .malformed }
            var claim = BusClaim(senderID: summary.sender.id, senderKey: summary.sender.publicKey, traceID: summary.traceID)
            switch summary.body {
            case .advertisement(let activityID, let origin, let version, let leaseMs, let expiresAt):
                claim.activityID = activityID
                claim.originID = origin.id
                claim.originKey = origin.publicKey
                return .advertisement(CachedAdvertisement(
                    activityID: activityID, origin: origin.id, originKey: origin.publicKey, version: version,
                    leaseMs: leaseMs, expiresAt: expiresAt), claim)
            case .withdrawal(let activityID, let origin):
                claim.activityID = activityID
                claim.originID = origin.id
                claim.originKey = origin.publicKey
                return .withdrawal(activityID: activityID, claim)
            case .presence(let node, let leaseMs, let activityIDs, let partial):
                claim.originID = node.id
                claim.originKey = node.publicKey
                return .presence(origin: node.id, listed: Set(activityIDs), partial: partial, leaseMs: leaseMs, claim)
            case .other:
                return .other(claim)
            }
        }
    }
}
