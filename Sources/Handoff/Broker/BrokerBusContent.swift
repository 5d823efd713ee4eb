import Foundation
import HandoffWire
import ZeroMQ

/// What a bus message (topic, envelope) carries, as far as the broker's cache and sender check are
/// concerned: the envelope's ``WireBusSummary`` as read, or nothing when it is malformed.
///
/// The summary is kept whole and read through (the broker reads one per message it forwards, and
/// each copy of a field made elsewhere is a reference count taken and given back); the claim the
/// sender check needs is made only where there is a key to check it against.
struct BrokerBusContent {
    /// `nil`: malformed.
    let summary: WireBusSummary?

    /// Reads the few fields the cache and the sender check need from a bus message's envelope, in
    /// place (``WireBusSummary``: no copy of the frame, no decoding of the rest). Without
    /// `readingSender` (no key to check it against), the sender is left empty.
    init(_ frames: some MessageFrames, readingSender: Bool = true) {
        guard frames.frameCount == 2 else {
            summary = nil
            return
        }
        summary = frames.withBytes(ofFrame: 1) { try? WireBusSummary.read($0, readingSender: readingSender) }
    }

    var isMalformed: Bool {
        if case .none = summary { return true }  // (not `== nil`: that compares a copy of the summary)
        return false
    }

    var isAdvertisement: Bool {
        if case .advertisement = summary?.body { return true }
        return false
    }

    var traceID: String? { summary?.traceID }

    /// The activity it is about (an advertisement or a withdrawal).
    var activityID: String? {
        switch summary?.body {
        case .advertisement(let activityID, _, _, _, _), .withdrawal(let activityID, _): activityID
        case .presence, .other, nil: nil
        }
    }

    /// The node whose activities it is about.
    var originID: String? { origin?.id }

    private var origin: WireBusSummary.Node? {
        switch summary?.body {
        case .advertisement(_, let origin, _, _, _), .withdrawal(_, let origin), .presence(let origin, _, _, _): origin
        case .other, nil: nil
        }
    }

    /// What the cache keeps of an advertisement.
    var advertisement: CachedAdvertisement? {
        guard case .advertisement(let activityID, let origin, let version, let leaseMs, let expiresAt) = summary?.body else { return nil }
        return CachedAdvertisement(activityID: activityID, origin: origin, version: version, leaseMs: leaseMs, expiresAt: expiresAt)
    }

    /// Who it claims to come from and what it speaks for, for the sender check; `nil` when malformed.
    var claim: BusClaim? {
        guard let summary else { return nil }
        let origin = origin
        return BusClaim(
            senderID: summary.sender.id, senderKey: summary.sender.publicKey, activityID: activityID, originID: origin?.id,
            originKey: origin?.publicKey, traceID: summary.traceID)
    }
}
