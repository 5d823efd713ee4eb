import Foundation
import SwiftProtobuf

/// The fields of a continue request's envelope its answer needs: what the originator's ROUTER
/// takes from a request read in plain values (``WireServerEnvelope``).
package struct WireRequestHeader: Sendable {
    package var correlationID: UInt64
    /// The requester as it names itself (empty when the envelope names none).
    package var sender: WireNodeRef
    /// Empty: untraced.
    package var traceID: String

    package init(correlationID: UInt64, sender: WireNodeRef, traceID: String) {
        self.correlationID = correlationID
        self.sender = sender
        self.traceID = traceID
    }

    /// The same fields of a generated envelope.
    package init(_ envelope: WireEnvelope) {
        self.init(correlationID: envelope.correlationID, sender: envelope.sender, traceID: envelope.traceID)
    }
}

/// A message the originator's continuation ROUTER received, read once: a continue request with
/// the envelope fields its answer needs, never built as a generated envelope (a storage object
/// copied at its first field set, and freed again, for every continue); a stream's chunk or
/// credit with its sender, likewise; anything else whole.
package enum WireServerEnvelope: Sendable {
    case continueRequest(WireRequestHeader, WireContinueRequest)
    /// A stream's data or credit frame in an untraced envelope, and the envelope's sender (empty
    /// when it names none).
    case streamFrame(WireStreamFrame, sender: WireNodeRef)
    case other(WireEnvelope)

    /// Decodes and validates an envelope the ROUTER received: accepts and rejects exactly what
    /// `WireEnvelope.decode` does, with the same errors, and a request's fields are decode's
    /// (ContinueReadersTests holds the two to each other).
    ///
    /// - Parameter strings: Where strings that repeat from message to message (a requester's id,
    ///   name and host, an activity's id and type) are looked up first and kept (``WireStrings``).
    package static func decode(_ bytes: UnsafeRawBufferPointer, strings: WireStrings? = nil) throws(WireDecodingError) -> Self {
        try WireEnvelope.validated(
            FastEnvelopeDecoder.decodeForServer(bytes, strings: strings), of: bytes, plain: { $0 }, other: Self.other)
    }
}

extension FastEnvelopeDecoder {
    /// The envelope read once, a continue request left in its parts, an untraced stream frame
    /// with its sender, anything else built; `nil` to leave these bytes to SwiftProtobuf.
    static func decodeForServer(_ bytes: UnsafeRawBufferPointer, strings: WireStrings?) -> Decoded<WireServerEnvelope>? {
        var read = Read()
        guard (try? envelope(ProtobufReader(bytes, strings: strings), into: &read)) != nil else { return nil }
        if case .continueRequest(let request)? = read.otherBody {
            let header = WireRequestHeader(correlationID: read.header.correlationID, sender: read.header.sender.take() ?? WireNodeRef(), traceID: read.header.traceID)
            return .plain(protocolVersion: read.header.protocolVersion, .continueRequest(header, request))
        }
        if let frame = read.untracedStreamFrame {
            return .plain(protocolVersion: read.header.protocolVersion, .streamFrame(frame, sender: read.header.sender.take() ?? WireNodeRef()))
        }
        return .envelope(read.generated)
    }
}
