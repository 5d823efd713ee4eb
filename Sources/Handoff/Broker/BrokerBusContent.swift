import Foundation
import HandoffWire
import ZeroMQ

/// What a bus message (topic, envelope) carries, as far as the broker's cache and sender check are
/// concerned: where the envelope's fields lie (``WireBusFields``), or nothing when it is malformed.
///
/// The fields are ranges of the message's own bytes: the cache compares and hashes an id where it
/// lies and keeps it inside its copy of the message, so a message it forwards makes no `String`.
/// Values are made only where something keeps or reports one (a trace, a forgery's reason, an
/// upstream's origins, the sender check's claim).
struct BrokerBusContent<Frames: MessageFrames> {
    let frames: Frames
    /// `nil`: malformed.
    let fields: WireBusFields?

    /// Finds the few fields the cache and the sender check need in a bus message's envelope, in
    /// place (``WireBusFields``: no copy of the frame, no decoding of the rest).
    init(_ frames: Frames) {
        self.frames = frames
        guard frames.frameCount == 2 else {
            fields = nil
            return
        }
        fields = frames.withBytes(ofFrame: 1) { try? WireBusFields.read($0) }
    }

    /// The envelope's bytes, for the ranges in ``fields``.
    func withEnvelope<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        frames.withBytes(ofFrame: 1, body)
    }

    /// A string field's value.
    func string(_ range: Range<Int>) -> String {
        withEnvelope { WireBusFields.string(range, in: $0) }
    }

    var isMalformed: Bool { fields == nil }

    var isAdvertisement: Bool {
        if case .advertisement = fields?.body { return true }
        return false
    }

    var traceID: String? { fields?.traceID.map(string) }

    /// Where the id of the activity it is about lies (an advertisement or a withdrawal).
    var activityIDRange: Range<Int>? {
        switch fields?.body {
        case .advertisement(let activityID, _, _, _, _), .withdrawal(let activityID, _): activityID
        case .presence, .other, nil: nil
        }
    }

    /// The activity it is about (an advertisement or a withdrawal).
    var activityID: String? { activityIDRange.map(string) }

    /// The node whose activities it is about.
    var originID: String? { origin.map { string($0.id) } }

    private var origin: WireBusFields.Node? {
        switch fields?.body {
        case .advertisement(_, let origin, _, _, _), .withdrawal(_, let origin), .presence(let origin, _, _): origin
        case .other, nil: nil
        }
    }

    /// What it names past the contract's lengths (an empty activity id among them), or `nil`:
    /// the cache and the broker's tables are keyed by these names (``WireLimits/pastBusLengths(activityID:activityType:nodeID:senderID:)``,
    /// the rule nodes apply too).
    var pastContractLengths: String? {
        guard let fields else { return nil }
        return WireLimits.pastBusLengths(activityID: activityIDRange?.count, nodeID: origin?.id.count ?? 0, senderID: fields.sender.id.count)
    }

    /// What the cache takes of an advertisement.
    var advertisement: CachedAdvertisement? {
        guard case .advertisement(let activityID, let origin, let version, let leaseMs, let expiresAt) = fields?.body else { return nil }
        return CachedAdvertisement(activityID: activityID, origin: origin, version: version, leaseMs: leaseMs, expiresAt: expiresAt)
    }

    /// Who it claims to come from and what it speaks for, for the sender check; `nil` when malformed.
    var claim: BusClaim? {
        guard let fields else { return nil }
        let origin = origin
        return withEnvelope { envelope in
            BusClaim(
                senderID: WireBusFields.string(fields.sender.id, in: envelope),
                senderKey: Array(WireBusFields.bytes(fields.sender.publicKey, in: envelope)),
                activityID: activityIDRange.map { WireBusFields.string($0, in: envelope) },
                originID: origin.map { WireBusFields.string($0.id, in: envelope) },
                originKey: origin.map { Array(WireBusFields.bytes($0.publicKey, in: envelope)) },
                traceID: fields.traceID.map { WireBusFields.string($0, in: envelope) })
        }
    }

    /// Whether it passes ``SenderCheck`` (with CURVE) as it lies, with no value made: it names
    /// `connectionKey` as its sender's, speaks for its sender alone, and is about no activity whose
    /// owner (`ownerKey`: the key the cache holds for its activity, if any) has another key. When it
    /// does not, the claim's values are made (``claim``) for the reason to give.
    func keepsSenderRule(connectionKey: [UInt8], ownerKey: [UInt8]?) -> Bool {
        guard let fields else { return true }
        let origin = origin, activityID = activityIDRange
        return withEnvelope { envelope in
            let senderKey = WireBusFields.bytes(fields.sender.publicKey, in: envelope)
            guard connectionKey.withUnsafeBytes({ sameBytes(senderKey, $0) }) else { return false }
            if let origin {
                guard sameBytes(WireBusFields.bytes(origin.id, in: envelope), WireBusFields.bytes(fields.sender.id, in: envelope)),
                      sameBytes(WireBusFields.bytes(origin.publicKey, in: envelope), senderKey) else { return false }
            }
            if activityID != nil, let ownerKey, ownerKey != connectionKey { return false }
            return true
        }
    }

    /// A presence's listed activity ids (empty for another body).
    var presenceActivityIDs: [String] {
        guard case .presence = fields?.body else { return [] }
        return withEnvelope(WireBusFields.presenceActivityIDs)
    }
}
