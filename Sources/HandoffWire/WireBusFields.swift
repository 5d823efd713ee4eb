// Hand-written: where the fields a broker needs lie in a bus envelope's bytes, found without
// copying any of them.

import Foundation
import SwiftProtobuf

/// The fields of a bus ``WireEnvelope`` that ``WireBusSummary`` reads, as places in the envelope's
/// bytes: what a broker reads of every message it forwards.
///
/// ``read(_:)`` checks exactly what ``WireBusSummary/read(_:readingSender:)`` checks (which is
/// built on it), but makes no `String` and no array: a string or bytes field is a range of the
/// envelope's bytes, to look at in place (``bytes(_:in:)``) or to copy only where it is kept
/// (``string(_:in:)``). A broker that made a `String` of every activity id and origin it read
/// allocated twice per message, and copied the summary's reference-counted fields as it passed
/// them on: about a tenth of its thread in `handoff-bench broker-capacity`.
///
/// Every value here is plain bytes (no reference to count), so it is copied as it is.
public struct WireBusFields: Equatable, Sendable {
    /// A `NodeRef`'s identity: where its id and CURVE key lie (empty ranges when absent).
    public struct Node: Equatable, Sendable {
        public var id: Range<Int> = 0..<0
        public var publicKey: Range<Int> = 0..<0

        public init(id: Range<Int> = 0..<0, publicKey: Range<Int> = 0..<0) {
            self.id = id
            self.publicKey = publicKey
        }
    }

    public enum Body: Equatable, Sendable {
        case advertisement(activityID: Range<Int>, origin: Node, version: UInt64, leaseMs: UInt32, expiresAt: Date?)
        case withdrawal(activityID: Range<Int>, origin: Node)
        /// A presence's listed activity ids are read again when wanted
        /// (``presenceActivityIDs(_:)``): a range per id would be an array per message.
        case presence(node: Node, leaseMs: UInt32, partial: Bool)
        /// Any other body this build knows (a node event, a snapshot reply, ...).
        case other
    }

    public var sender: Node
    public var body: Body
    /// Where the envelope's trace id lies, when a tracer asked for this one (wire.proto, "Tracing").
    public var traceID: Range<Int>?

    public init(sender: Node, body: Body, traceID: Range<Int>? = nil) {
        self.sender = sender
        self.body = body
        self.traceID = traceID
    }

    /// Finds the fields in an envelope's bytes, checking them as ``WireEnvelope/decode(_:)`` does.
    ///
    /// - Throws: The ``WireDecodingError`` that ``WireEnvelope/decode(_:)`` throws for the same bytes.
    public static func read(_ bytes: UnsafeRawBufferPointer) throws(WireDecodingError) -> WireBusFields {
        let start = bytes.baseAddress
        var version: UInt32 = 0
        var sender = Node()
        var sentAt = Timestamp(seconds: 0, nanos: 0)  // checked only: a node reads it
        var body: BodyFields?
        var traceID: Range<Int>?
        do {
            var reader = try ProtobufReader(bytes)
            while let (number, type) = try reader.nextField() {
                switch (number, type) {
                case (1, .varint): version = UInt32(truncatingIfNeeded: try reader.varint())
                case (3, .lengthDelimited): try readNode(into: &sender, reader.nested(reader.lengthDelimited()), in: start)
                case (4, .lengthDelimited): try readTimestamp(into: &sentAt, reader.nested(reader.lengthDelimited()))
                case (6, .lengthDelimited):
                    // proto3: an empty string is no trace.
                    let id = range(of: try reader.checkedString(), in: start)
                    traceID = id.isEmpty ? nil : id
                case (10...20, .lengthDelimited) where number != 16:
                    let content = try reader.lengthDelimited()
                    // A oneof: another case replaces the body; the same case again merges into it.
                    if body?.number != number { body = BodyFields(number: number) }
                    try body?.merge(reader.nested(content), in: start)
                default: try reader.skip(type, number: number)
                }
            }
        } catch {
            throw .malformed(error)
        }
        guard version != 0, version <= WireProtocol.version else { throw .unsupportedProtocolVersion(version) }
        guard let fields = body.take() else { throw .missingBody }
        return WireBusFields(sender: sender, body: fields.body(), traceID: traceID)
    }

    /// The bytes of a field found in `envelope` (the bytes it was read from).
    @inline(__always)
    public static func bytes(_ range: Range<Int>, in envelope: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: envelope[range])
    }

    /// A string field found in `envelope`, as a `String` (its UTF-8 was checked as it was read).
    public static func string(_ range: Range<Int>, in envelope: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes(range, in: envelope), as: UTF8.self)
    }

    /// A presence's listed activity ids (every `activity_ids` of the body that counts, as protobuf
    /// merges them), read again from an envelope that ``read(_:)`` accepted with a presence body;
    /// empty for any other.
    public static func presenceActivityIDs(_ envelope: UnsafeRawBufferPointer) -> [String] {
        var ids: [String] = []
        guard var reader = try? ProtobufReader(envelope) else { return ids }
        var bodyNumber = 0
        while let (number, type) = try? reader.nextField() {
            guard (10...20).contains(number), number != 16, type == .lengthDelimited else {
                guard (try? reader.skip(type, number: number)) != nil else { return [] }
                continue
            }
            guard let content = try? reader.lengthDelimited() else { return [] }
            // Another body replaces the one before, as in read(_:).
            if number != bodyNumber { ids = [] }
            bodyNumber = number
            guard number == 12, var fields = try? ProtobufReader(content) else { continue }
            while let (field, fieldType) = try? fields.nextField() {
                if field == 4, fieldType == .lengthDelimited, let id = try? fields.string() {
                    ids.append(id)
                } else if (try? fields.skip(fieldType, number: field)) == nil {
                    return []
                }
            }
        }
        return bodyNumber == 12 ? ids : []
    }

    /// Where a field's body lies in the envelope that begins at `start`.
    @inline(__always)
    static func range(of body: UnsafeRawBufferPointer, in start: UnsafeRawPointer?) -> Range<Int> {
        guard let start, let base = body.baseAddress else { return 0..<0 }
        let offset = start.distance(to: base)
        return offset..<offset + body.count
    }

    /// A NodeRef's fields merged into `node` (name and host are read only to check their UTF-8).
    static func readNode(into node: inout Node, _ reader: ProtobufReader, in start: UnsafeRawPointer?) throws(BinaryDecodingError) {
        var reader = reader
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited): node.id = range(of: try reader.checkedString(), in: start)
            case (2, .lengthDelimited), (3, .lengthDelimited): try reader.checkString()
            case (4, .lengthDelimited): node.publicKey = range(of: try reader.lengthDelimited(), in: start)
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

/// The body's fields as they are found (merged over repeated occurrences, as protobuf merges).
private struct BodyFields {
    let number: Int
    var activityID: Range<Int> = 0..<0
    var node = WireBusFields.Node()
    var version: UInt64 = 0
    var leaseMs: UInt32 = 0
    var expiresAt: WireBusFields.Timestamp?
    var partial = false

    init(number: Int) {
        self.number = number
    }

    /// The body.
    func body() -> WireBusFields.Body {
        switch number {
        case 10:
            .advertisement(activityID: activityID, origin: node, version: version, leaseMs: leaseMs,
                           expiresAt: expiresAt.map { WireTimestamp.date(seconds: $0.seconds, nanos: $0.nanos) })
        case 11: .withdrawal(activityID: activityID, origin: node)
        case 12: .presence(node: node, leaseMs: leaseMs, partial: partial)
        default: .other
        }
    }

    mutating func merge(_ reader: ProtobufReader, in start: UnsafeRawPointer?) throws(BinaryDecodingError) {
        var reader = reader
        switch number {
        case 10: try mergeAdvertisement(&reader, in: start)
        case 11: try mergeWithdrawal(&reader, in: start)
        case 12: try mergePresence(&reader, in: start)
        default: break  // checked by the node that reads it
        }
    }

    /// wire.proto's Advertisement.
    private mutating func mergeAdvertisement(_ reader: inout ProtobufReader, in start: UnsafeRawPointer?) throws(BinaryDecodingError) {
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited): activityID = WireBusFields.range(of: try reader.checkedString(), in: start)
            case (4, .lengthDelimited): try WireBusFields.readNode(into: &node, reader.nested(reader.lengthDelimited()), in: start)
            case (6, .varint): version = try reader.varint()
            case (7, .lengthDelimited):
                var time = expiresAt ?? (0, 0)  // a second occurrence merges into the first
                try WireBusFields.readTimestamp(into: &time, reader.nested(reader.lengthDelimited()))
                expiresAt = time
            case (8, .varint): leaseMs = UInt32(truncatingIfNeeded: try reader.varint())
            case (2, .lengthDelimited), (3, .lengthDelimited), (5, .lengthDelimited), (10, .lengthDelimited),
                 (11, .lengthDelimited), (12, .lengthDelimited):
                try reader.checkString()
            case (13, .lengthDelimited):
                var updatedAt: WireBusFields.Timestamp = (0, 0)  // checked only: a node reads it
                try WireBusFields.readTimestamp(into: &updatedAt, reader.nested(reader.lengthDelimited()))
            default: try reader.skip(type, number: number)  // 9 (a bool) and unknown fields
            }
        }
    }

    /// wire.proto's Withdrawal.
    private mutating func mergeWithdrawal(_ reader: inout ProtobufReader, in start: UnsafeRawPointer?) throws(BinaryDecodingError) {
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited): activityID = WireBusFields.range(of: try reader.checkedString(), in: start)
            case (2, .lengthDelimited): try reader.checkString()
            case (3, .lengthDelimited): try WireBusFields.readNode(into: &node, reader.nested(reader.lengthDelimited()), in: start)
            default: try reader.skip(type, number: number)  // 4 (the reason) and unknown fields
            }
        }
    }

    /// wire.proto's NodePresence (its activity ids checked here, read again when wanted).
    private mutating func mergePresence(_ reader: inout ProtobufReader, in start: UnsafeRawPointer?) throws(BinaryDecodingError) {
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited): try WireBusFields.readNode(into: &node, reader.nested(reader.lengthDelimited()), in: start)
            case (2, .lengthDelimited), (4, .lengthDelimited): try reader.checkString()
            case (3, .varint): leaseMs = UInt32(truncatingIfNeeded: try reader.varint())
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
