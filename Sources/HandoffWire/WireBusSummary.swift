// Hand-written: what a broker reads of a bus envelope, without decoding the rest of it.

import Foundation
import SwiftProtobuf

/// The few fields of a bus ``WireEnvelope`` a broker needs to cache advertisements and to check
/// who sent them, read straight from the frame's bytes.
///
/// ``read(_:)`` accepts an envelope exactly when ``WireEnvelope/decode(_:)`` does, for envelopes
/// whose body is an advertisement, a withdrawal or a node presence (every field of those bodies is
/// read and checked, UTF-8 included). Any other body is only checked to be a well-formed field and
/// summarised as ``Body/other``: its reader (a node) decodes and checks it.
public struct WireBusSummary: Equatable, Sendable {
    /// A `NodeRef`'s identity: its id and CURVE key.
    public struct Node: Equatable, Sendable {
        public var id = ""
        public var publicKey: [UInt8] = []

        public init(id: String = "", publicKey: [UInt8] = []) {
            self.id = id
            self.publicKey = publicKey
        }
    }

    public enum Body: Equatable, Sendable {
        case advertisement(activityID: String, origin: Node, version: UInt64, leaseMs: UInt32, expiresAt: Date?)
        case withdrawal(activityID: String, origin: Node)
        case presence(node: Node, leaseMs: UInt32, activityIDs: [String], partial: Bool)
        /// Any other body this build knows (a node event, a snapshot reply, ...).
        case other
    }

    public var sender: Node
    public var body: Body
    /// The envelope's trace id, when a tracer asked for this one (wire.proto, "Tracing").
    public var traceID: String?

    public init(sender: Node, body: Body, traceID: String? = nil) {
        self.sender = sender
        self.body = body
        self.traceID = traceID
    }

    /// Reads an envelope's summary from its bytes (``WireBusFields``, each field made a value).
    ///
    /// - Parameter readingSender: Whether to read the sender's id and key; without (a broker that
    ///   checks no key), ``sender`` stays empty and its fields are only checked.
    /// - Throws: The ``WireDecodingError`` that ``WireEnvelope/decode(_:)`` throws for the same bytes.
    public static func read(_ bytes: UnsafeRawBufferPointer, readingSender: Bool = true) throws(WireDecodingError) -> WireBusSummary {
        let fields = try WireBusFields.read(bytes)
        func node(_ node: WireBusFields.Node) -> Node {
            Node(id: WireBusFields.string(node.id, in: bytes), publicKey: Array(WireBusFields.bytes(node.publicKey, in: bytes)))
        }
        let body: Body = switch fields.body {
        case .advertisement(let activityID, let origin, let version, let leaseMs, let expiresAt):
            .advertisement(activityID: WireBusFields.string(activityID, in: bytes), origin: node(origin), version: version, leaseMs: leaseMs,
                           expiresAt: expiresAt)
        case .withdrawal(let activityID, let origin): .withdrawal(activityID: WireBusFields.string(activityID, in: bytes), origin: node(origin))
        case .presence(let presence, let leaseMs, let partial):
            .presence(node: node(presence), leaseMs: leaseMs, activityIDs: WireBusFields.presenceActivityIDs(bytes), partial: partial)
        case .other: .other
        }
        return WireBusSummary(sender: readingSender ? node(fields.sender) : Node(), body: body,
                              traceID: fields.traceID.map { WireBusFields.string($0, in: bytes) })
    }

    /// The activity type of an advertisement envelope (`nil` for another body), read in place: for
    /// a broker that must put a cached advertisement back on its live topic (`A:` + type).
    public static func advertisedType(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard var reader = try? ProtobufReader(bytes) else { return nil }
        var type: String?
        while let (number, wireType) = try? reader.nextField() {
            guard number == 10, wireType == .lengthDelimited else {
                guard (try? reader.skip(wireType, number: number)) != nil else { return nil }
                continue
            }
            guard let body = try? reader.lengthDelimited(), var fields = try? ProtobufReader(body) else { return nil }
            while let (field, fieldType) = try? fields.nextField() {
                if field == 2, fieldType == .lengthDelimited { type = try? fields.string() } else if (try? fields.skip(fieldType, number: field)) == nil { return nil }
            }
        }
        return type
    }
}
