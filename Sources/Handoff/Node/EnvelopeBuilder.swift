import Foundation
import HandoffWire
import SwiftProtobuf

/// The one way a node wraps a message body in its envelope (wire.proto, `Envelope`): itself as the
/// sender, and a sequence that grows with every envelope it sends, on any socket. The sequence
/// starts at the wall clock's microseconds, so that it grows across restarts too (a restarted node
/// may keep its configured id, and followers' replay protection remembers the old one's).
struct EnvelopeBuilder {
    let sender: WireNodeRef
    /// The sender, encoded once for every envelope.
    private let encodedSender: WireEnvelopeSender
    private(set) var sequence: UInt64

    init(sender: WireNodeRef, startingAt start: Date = Date()) {
        self.sender = sender
        encodedSender = WireEnvelopeSender(sender)
        sequence = UInt64(start.timeIntervalSince1970 * 1_000_000)
    }

    /// The encoded envelope of `body`, with the next sequence (traced as `traceID`, when a tracer
    /// asked: wire.proto, "Tracing").
    mutating func bytes(_ body: WireEnvelope.OneOf_Body, correlationID: UInt64 = 0, traceID: String? = nil) -> [UInt8] {
        sequence += 1
        return WireEnvelope.encoded(body: body, sender: encodedSender, sequence: sequence, correlationID: correlationID, traceID: traceID)
    }

    /// The encoded envelope of a continue reply holding an activity encoded before
    /// (``UserActivity/encodedWire(origin:defaultTeamID:)``), with the next sequence.
    mutating func bytes(continueReplyActivity activity: [UInt8], correlationID: UInt64) -> [UInt8] {
        sequence += 1
        return WireEnvelope.encoded(continueReplyActivity: activity, sender: encodedSender, sequence: sequence, correlationID: correlationID)
    }

    /// The encoded envelope of an advertisement given in plain values, with the next sequence.
    mutating func bytes(advertisement: WirePlainAdvertisement, traceID: String? = nil) -> [UInt8] {
        sequence += 1
        return WireEnvelope.encoded(advertisement: advertisement, sender: encodedSender, sequence: sequence, traceID: traceID)
    }

    /// The envelope of `body`, with the next sequence, sent at `sentAt` (the simulator's clock).
    mutating func envelope(_ body: WireEnvelope.OneOf_Body, correlationID: UInt64 = 0, sentAt: Date = Date()) -> WireEnvelope {
        sequence += 1
        return WireEnvelope(body: body, sender: sender, sequence: sequence, correlationID: correlationID, sentAt: sentAt)
    }
}
