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

    /// Reads an envelope's summary from its bytes.
    ///
    /// - Parameter readingSender: Whether to read the sender's id and key; without (a broker that
    ///   checks no key), ``sender`` stays empty and its fields are only checked.
    /// - Throws: The ``WireDecodingError`` that ``WireEnvelope/decode(_:)`` throws for the same bytes.
    public static func read(_ bytes: UnsafeRawBufferPointer, readingSender: Bool = true) throws(WireDecodingError) -> WireBusSummary {
        var version: UInt32 = 0
        var sender = Node()
        var sentAt = Timestamp(seconds: 0, nanos: 0)  // checked only: a node reads it
        var body: BodyFields?
        var traceID: String?
        do {
            var reader = try ProtobufReader(bytes)
            while let (number, type) = try reader.nextField() {
                switch (number, type) {
                case (1, .varint): version = UInt32(truncatingIfNeeded: try reader.varint())
                case (3, .lengthDelimited): try readNode(into: &sender, reader.nested(reader.lengthDelimited()), keeping: readingSender)
                case (4, .lengthDelimited): try readTimestamp(into: &sentAt, reader.nested(reader.lengthDelimited()))
                case (6, .lengthDelimited):
                    // proto3: an empty string is no trace.
                    let id = try reader.string()
                    traceID = id.isEmpty ? nil : id
                case (10...20, .lengthDelimited) where number != 16:
                    let content = try reader.lengthDelimited()
                    // A oneof: another case replaces the body; the same case again merges into it.
                    if body?.number != number { body = BodyFields(number: number) }
                    try body?.merge(reader.nested(content))
                default: try reader.skip(type, number: number)
                }
            }
        } catch {
            throw .malformed(error)
        }
        guard version != 0, version <= WireProtocol.version else { throw .unsupportedProtocolVersion(version) }
        guard let fields = body.take() else { throw .missingBody }
        return WireBusSummary(sender: sender, body: fields.summary(), traceID: traceID)
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

    /// A NodeRef's fields merged into `node` (name and host are read only to check their UTF-8; id
    /// and key too unless `keeping`).
    static func readNode(into node: inout Node, _ reader: ProtobufReader, keeping: Bool = true) throws(BinaryDecodingError) {
        var reader = reader
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited) where keeping: node.id = try reader.string()
            case (1, .lengthDelimited), (2, .lengthDelimited), (3, .lengthDelimited): try reader.checkString()
            case (4, .lengthDelimited) where keeping: node.publicKey = Array(try reader.lengthDelimited())
            default: try reader.skip(type, number: number)
            }
        }
    }

    /// A Timestamp's two fields, as read.
    typealias Timestamp = (seconds: Int64, nanos: Int32)

    /// A Timestamp's fields merged into `time`.
    static func readTimestamp(into time: inout Timestamp, _ reader: ProtobufReader) throws(BinaryDecodingError) {
        var reader = reader
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .varint): time.seconds = Int64(bitPattern: try reader.varint())
            case (2, .varint): time.nanos = Int32(truncatingIfNeeded: try reader.varint())
            default: try reader.skip(type, number: number)
            }
        }
    }
}

/// The body's fields as they are read (merged over repeated occurrences, as protobuf merges).
private struct BodyFields {
    let number: Int
    var activityID = ""
    var node = WireBusSummary.Node()
    var version: UInt64 = 0
    var leaseMs: UInt32 = 0
    var expiresAt: WireBusSummary.Timestamp?
    var activityIDs: [String] = []
    var partial = false

    init(number: Int) {
        self.number = number
    }

    /// The body.
    consuming func summary() -> WireBusSummary.Body {
        switch number {
        case 10:
            .advertisement(activityID: activityID, origin: node, version: version, leaseMs: leaseMs,
                           expiresAt: expiresAt.map { WireTimestamp.date(seconds: $0.seconds, nanos: $0.nanos) })
        case 11: .withdrawal(activityID: activityID, origin: node)
        case 12: .presence(node: node, leaseMs: leaseMs, activityIDs: activityIDs, partial: partial)
        default: .other
        }
    }

    mutating func merge(_ reader: ProtobufReader) throws(BinaryDecodingError) {
        var reader = reader
        switch number {
        case 10: try mergeAdvertisement(&reader)
        case 11: try mergeWithdrawal(&reader)
        case 12: try mergePresence(&reader)
        default: break  // checked by the node that reads it
        }
    }

    /// wire.proto's Advertisement.
    private mutating func mergeAdvertisement(_ reader: inout ProtobufReader) throws(BinaryDecodingError) {
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited): activityID = try reader.string()
            case (4, .lengthDelimited): try WireBusSummary.readNode(into: &node, reader.nested(reader.lengthDelimited()))
            case (6, .varint): version = try reader.varint()
            case (7, .lengthDelimited):
                var time = expiresAt ?? (0, 0)  // a second occurrence merges into the first
                try WireBusSummary.readTimestamp(into: &time, reader.nested(reader.lengthDelimited()))
                expiresAt = time
            case (8, .varint): leaseMs = UInt32(truncatingIfNeeded: try reader.varint())
            case (2, .lengthDelimited), (3, .lengthDelimited), (5, .lengthDelimited), (10, .lengthDelimited),
                 (11, .lengthDelimited), (12, .lengthDelimited):
                try reader.checkString()
            case (13, .lengthDelimited):
                var updatedAt: WireBusSummary.Timestamp = (0, 0)  // checked only: a node reads it
                try WireBusSummary.readTimestamp(into: &updatedAt, reader.nested(reader.lengthDelimited()))
            default: try reader.skip(type, number: number)  // 9 (a bool) and unknown fields
            }
        }
    }

    /// wire.proto's Withdrawal.
    private mutating func mergeWithdrawal(_ reader: inout ProtobufReader) throws(BinaryDecodingError) {
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited): activityID = try reader.string()
            case (2, .lengthDelimited): try reader.checkString()
            case (3, .lengthDelimited): try WireBusSummary.readNode(into: &node, reader.nested(reader.lengthDelimited()))
            default: try reader.skip(type, number: number)  // 4 (the reason) and unknown fields
            }
        }
    }

    /// wire.proto's NodePresence.
    private mutating func mergePresence(_ reader: inout ProtobufReader) throws(BinaryDecodingError) {
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited): try WireBusSummary.readNode(into: &node, reader.nested(reader.lengthDelimited()))
            case (2, .lengthDelimited): try reader.checkString()
            case (3, .varint): leaseMs = UInt32(truncatingIfNeeded: try reader.varint())
            case (4, .lengthDelimited): activityIDs.append(try reader.string())
            case (5, .varint): partial = try reader.varint() != 0
            case (6, .lengthDelimited): try Self.checkTraffic(reader.nested(reader.lengthDelimited()))
            default: try reader.skip(type, number: number)
            }
        }
    }

    /// wire.proto's NodeTraffic, read only to reject what the full decode rejects (the broker
    /// needs none of it).
    private static func checkTraffic(_ reader: ProtobufReader) throws(BinaryDecodingError) {
        var reader = reader
        while let (number, type) = try reader.nextField() {
            try reader.skip(type, number: number)
        }
    }
}
