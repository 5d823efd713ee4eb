// Hand-written: the hot envelopes (an advertisement, a continue request, a continue reply holding
// an activity, the node event each continue tells; a withdrawal, a presence, a stream's data and
// credit frames, whose writers are in FastEnvelopeEncoding+BusAndStreams.swift) encoded without
// SwiftProtobuf's generic visitors, which were most of the CPU a node spent encoding them (a map
// of userInfo values above all). Byte for byte what serializedBytes() writes: the same fields in
// field-number order, proto3 defaults left out, oneof members always written, a map in its
// dictionary's own order. Anything else goes to SwiftProtobuf.

import Foundation
import SwiftProtobuf

extension WireEnvelope {
    /// The envelope's bytes, exactly as `serializedBytes()` makes them (FastEnvelopeCodingTests
    /// holds the two to each other over random envelopes).
    public func encoded() -> [UInt8] {
        if let bytes = try? FastEnvelopeEncoder.encode(self) { return bytes }
        // Encoding a proto3 message cannot fail: there are no required fields.
        return try! serializedBytes()
    }
}

/// What the fast encoder leaves to SwiftProtobuf: another body, or fields it does not know
/// (unknown fields kept from a decode).
struct NotOnFastPath: Error {}

/// An envelope's fields other than its body: what a sender stamps on every message.
struct EnvelopeHeader {
    var protocolVersion: UInt32
    var correlationID: UInt64
    var sender: WireNodeRef?
    var sentAt: WireTimestamp?
    var sequence: UInt64
    var traceID: String
    /// The sender's encoding, written in its place when a sender gives it (``WireEnvelopeSender``).
    var encodedSender: [UInt8]? = nil
}

enum FastEnvelopeEncoder {
    static func encode(_ envelope: WireEnvelope) throws(NotOnFastPath) -> [UInt8] {
        guard envelope.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        let header = EnvelopeHeader(
            protocolVersion: envelope.protocolVersion, correlationID: envelope.correlationID,
            sender: envelope.hasSender ? envelope.sender : nil, sentAt: envelope.hasSentAt ? envelope.sentAt : nil,
            sequence: envelope.sequence, traceID: envelope.traceID)
        return try encode(header, body: envelope.body)
    }

    /// The envelope `header` and `body` make, written without the envelope being built: a sender's
    /// hot path (building one allocated its storage and copied the sender's strings into it).
    static func encode(_ header: EnvelopeHeader, body: WireEnvelope.OneOf_Body?) throws(NotOnFastPath) -> [UInt8] {
        // Whether the body is one of the hot ones, before anything is written.
        switch body {
        case .advertisement?, .withdrawal?, .nodePresence?, .continueRequest?, .nodeEvent?, nil: break
        case .continueReply(let reply)?:
            guard reply.unknownFields.data.isEmpty, case .activity? = reply.result else { throw NotOnFastPath() }
        case .streamFrame(let frame)?:
            switch frame.kind {
            case .data?, .credit?: break
            default: throw NotOnFastPath()
            }
        default: throw NotOnFastPath()
        }
        var writer = try writer(header)
        switch body {
        case .advertisement(let advertisement)?: try writer.message(10, advertisement)
        case .withdrawal(let withdrawal)?: try writer.message(11, withdrawal)
        case .nodePresence(let presence)?: try writer.message(12, presence)
        case .continueRequest(let request)?: try writer.message(14, request)
        case .continueReply(let reply)?:
            guard case .activity(let activity)? = reply.result else { break }  // checked above
            try writer.messageField(15) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try writer.message(1, activity) }
        case .nodeEvent(let event)?: try writer.message(19, event)
        case .streamFrame(let frame)?: try writer.message(13, frame)
        default: break
        }
        return writer.bytes
    }

    /// The envelope of a continue reply holding an activity given as its encoded bytes.
    static func encode(_ header: EnvelopeHeader, continueReplyActivity activity: [UInt8]) throws(NotOnFastPath) -> [UInt8] {
        var writer = try writer(header, capacity: 128 + activity.count)
        writer.messageField(15) { (writer: inout ProtobufWriter) in writer.lengthDelimitedField(1, activity) }
        return writer.bytes
    }

    /// The envelope of an advertisement given in plain values (never built as a message).
    static func encode(_ header: EnvelopeHeader, advertisement: WirePlainAdvertisement) throws(NotOnFastPath) -> [UInt8] {
        var writer = try writer(header)
        try writer.message(10, advertisement)
        return writer.bytes
    }

    /// A writer holding the envelope's own fields, for its body to follow (field 10 and on).
    private static func writer(_ header: EnvelopeHeader, capacity: Int = 384) throws(NotOnFastPath) -> ProtobufWriter {
        var writer = ProtobufWriter(capacity: capacity)
        writer.uint(1, UInt64(header.protocolVersion))
        writer.uint(2, header.correlationID)
        if let encodedSender = header.encodedSender {
            writer.lengthDelimitedField(3, encodedSender)
        } else if let sender = header.sender {
            try writer.message(3, sender)
        }
        if let sentAt = header.sentAt { try writer.message(4, sentAt) }
        writer.uint(5, header.sequence)
        writer.string(6, header.traceID)
        return writer
    }
}

extension WireEnvelope {
    /// The bytes of the envelope ``init(body:sender:sequence:correlationID:sentAt:)`` makes (with
    /// `traceID`), exactly as ``encoded()`` would write it, without building it when the body is
    /// one of the hot ones.
    public static func encoded(
        body: OneOf_Body, sender: WireNodeRef, sequence: UInt64, correlationID: UInt64 = 0, sentAt: Date = Date(), traceID: String? = nil
    ) -> [UInt8] {
        encoded(body: body, sender: WireEnvelopeSender(sender), sequence: sequence, correlationID: correlationID, sentAt: sentAt, traceID: traceID)
    }

    /// ``encoded(body:sender:sequence:correlationID:sentAt:traceID:)-(_,WireNodeRef,_,_,_,_)``,
    /// the sender encoded once before.
    public static func encoded(
        body: OneOf_Body, sender: WireEnvelopeSender, sequence: UInt64, correlationID: UInt64 = 0, sentAt: Date = Date(), traceID: String? = nil
    ) -> [UInt8] {
        let header = EnvelopeHeader(
            protocolVersion: WireProtocol.version, correlationID: correlationID, sender: sender.node,
            sentAt: WireTimestamp(sentAt), sequence: sequence, traceID: traceID ?? "", encodedSender: sender.encoded)
        if let bytes = try? FastEnvelopeEncoder.encode(header, body: body) { return bytes }
        var envelope = WireEnvelope(body: body, sender: sender.node, sequence: sequence, correlationID: correlationID, sentAt: sentAt)
        if let traceID { envelope.traceID = traceID }
        return envelope.encoded()
    }
}

extension WireEnvelope {
    /// The bytes of a continue reply's envelope holding the activity whose encoding is `activity`
    /// (a `WireActivity`'s bytes, made once and sent in many replies): the envelope
    /// ``encoded(body:sender:sequence:correlationID:sentAt:traceID:)`` writes for
    /// `.continueReply` of that activity, with its fields as that activity's encoding orders them.
    public static func encoded(
        continueReplyActivity activity: [UInt8], sender: WireNodeRef, sequence: UInt64, correlationID: UInt64, sentAt: Date = Date(),
        traceID: String? = nil
    ) -> [UInt8] {
        encoded(continueReplyActivity: activity, sender: WireEnvelopeSender(sender), sequence: sequence, correlationID: correlationID,
                sentAt: sentAt, traceID: traceID)
    }

    /// ``encoded(continueReplyActivity:sender:sequence:correlationID:sentAt:traceID:)-(_,WireNodeRef,_,_,_,_)``,
    /// the sender encoded once before.
    public static func encoded(
        continueReplyActivity activity: [UInt8], sender: WireEnvelopeSender, sequence: UInt64, correlationID: UInt64, sentAt: Date = Date(),
        traceID: String? = nil
    ) -> [UInt8] {
        let header = EnvelopeHeader(
            protocolVersion: WireProtocol.version, correlationID: correlationID, sender: sender.node,
            sentAt: WireTimestamp(sentAt), sequence: sequence, traceID: traceID ?? "", encodedSender: sender.encoded)
        if let bytes = try? FastEnvelopeEncoder.encode(header, continueReplyActivity: activity) { return bytes }
        // A sender with unknown fields: SwiftProtobuf writes those, and the activity decoded again.
        var reply = WireContinueReply()
        reply.activity = (try? WireActivity(serializedBytes: activity)) ?? WireActivity()
        return encoded(body: .continueReply(reply), sender: sender, sequence: sequence, correlationID: correlationID, sentAt: sentAt, traceID: traceID)
    }

    /// The bytes of the envelope ``encoded(body:sender:sequence:correlationID:sentAt:traceID:)``
    /// writes for `.advertisement(WireAdvertisement(advertisement))`, written from the plain
    /// values: no generated message built (each copied its empty default storage at its first field
    /// and went through it for every field after).
    public static func encoded(
        advertisement: WirePlainAdvertisement, sender: WireNodeRef, sequence: UInt64, sentAt: Date = Date(), traceID: String? = nil
    ) -> [UInt8] {
        encoded(advertisement: advertisement, sender: WireEnvelopeSender(sender), sequence: sequence, sentAt: sentAt, traceID: traceID)
    }

    /// ``encoded(advertisement:sender:sequence:sentAt:traceID:)-(_,WireNodeRef,_,_,_)``, the sender
    /// encoded once before.
    public static func encoded(
        advertisement: WirePlainAdvertisement, sender: WireEnvelopeSender, sequence: UInt64, sentAt: Date = Date(), traceID: String? = nil
    ) -> [UInt8] {
        let header = EnvelopeHeader(
            protocolVersion: WireProtocol.version, correlationID: 0, sender: sender.node,
            sentAt: WireTimestamp(sentAt), sequence: sequence, traceID: traceID ?? "", encodedSender: sender.encoded)
        if let bytes = try? FastEnvelopeEncoder.encode(header, advertisement: advertisement) { return bytes }
        // An origin or a sender with unknown fields: SwiftProtobuf writes those.
        return encoded(body: .advertisement(WireAdvertisement(advertisement)), sender: sender, sequence: sequence, sentAt: sentAt, traceID: traceID)
    }
}

/// A message the fast encoder writes whole: its fields, in field-number order.
protocol FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath)
}

extension ProtobufWriter {
    /// A nested message field holding `value`.
    mutating func message(_ number: Int, _ value: some FastEncodable) throws(NotOnFastPath) {
        try messageField(number) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try value.write(to: &writer) }
    }

    /// A `map<string, Value>`: an entry message per pair, its key and value both written.
    mutating func map(_ number: Int, _ map: [String: WireValue]) throws(NotOnFastPath) {
        for (key, value) in map {
            try messageField(number) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in
                writer.stringField(1, key)
                try writer.message(2, value)
            }
        }
    }
}

extension WireNodeRef: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, nodeID)
        writer.string(2, name)
        writer.string(3, host)
        writer.bytes(4, publicKey)
    }
}

extension WireTimestamp: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, UInt64(bitPattern: seconds))
        writer.uint(2, UInt64(bitPattern: Int64(nanos)))  // an int32 is sign-extended
    }
}

extension WireAdvertisement: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        try writer.advertisementFields(self)
    }
}

extension WirePlainAdvertisement: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        try writer.advertisementFields(self)
    }
}

extension ProtobufWriter {
    /// An Advertisement's fields, of either form, in field-number order.
    mutating func advertisementFields(_ advertisement: some WireAdvertisementFields) throws(NotOnFastPath) {
        string(1, advertisement.activityID)
        string(2, advertisement.activityType)
        string(3, advertisement.title)
        if let origin = advertisement.originIfSet { try message(4, origin) }
        string(5, advertisement.continueEndpoint)
        uint(6, advertisement.version)
        if let expiresAt = advertisement.expiresAtIfSet { try message(7, expiresAt) }
        uint(8, UInt64(advertisement.leaseMs))
        bool(9, advertisement.supportsContinuationStreams)
        string(10, advertisement.teamID)
        string(11, advertisement.webpageURL)
        strings(12, advertisement.keywords)
        if let updatedAt = advertisement.updatedAtIfSet { try message(13, updatedAt) }
    }
}

extension WireContinueRequest: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, activityID)
        writer.string(2, activityType)
        writer.bool(3, wantStreams)
        writer.bool(4, refresh)
    }
}

/// A node's event, told on the bus for each continue and stream (a monitor's view).
extension WireNodeEvent: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, UInt64(bitPattern: Int64(kind.rawValue)))  // an enum is an int32
        writer.string(2, activityID)
        writer.string(3, activityType)
        if hasPeer { try writer.message(4, peer) }
        writer.uint(5, streamID)
        writer.uint(6, bytesSent)
        writer.uint(7, bytesReceived)
        writer.uint(8, expectedLength)
        writer.string(9, detail)
    }
}

extension WireActivity: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, activityID)
        writer.string(2, activityType)
        writer.string(3, title)
        try writer.map(4, userInfo)
        writer.strings(5, requiredUserInfoKeys)
        writer.string(6, webpageURL)
        writer.strings(7, keywords)
        if hasExpiration { try writer.message(8, expiration) }
        writer.bool(9, eligibleForHandoff)
        writer.bool(10, supportsContinuationStreams)
        writer.string(11, teamID)
        if hasOrigin { try writer.message(16, origin) }
        writer.uint(17, version)
        if hasUpdatedAt { try writer.message(18, updatedAt) }
        if hasDocument { try writer.message(19, document) }
    }
}

extension WireDocumentRef: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, url)
        writer.uint(2, version)
        writer.bytes(3, sha256)
        writer.uint(4, size)
    }
}

extension WireValue: FastEncodable {
    /// Its one member of the oneof, written even when it holds a default.
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        switch kind {
        case .stringValue(let string): writer.stringField(1, string)
        case .intValue(let int): writer.varintField(2, UInt64(bitPattern: (int << 1) ^ (int >> 63)))  // zigzag
        case .doubleValue(let double): writer.doubleField(3, double)
        case .boolValue(let bool): writer.varintField(4, bool ? 1 : 0)
        case .bytesValue(let bytes): writer.bytesField(5, bytes)
        case .urlValue(let url): writer.stringField(6, url)
        case .dateValue(let date): try writer.message(7, date)
        case .listValue(let list): try writer.message(8, list)
        case .mapValue(let map): try writer.message(9, map)
        case nil: break
        }
    }
}

extension WireValueList: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        for value in values { try writer.message(1, value) }
    }
}

extension WireValueMap: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        try writer.map(1, entries)
    }
}
