// Hand-written: the hot envelopes (an advertisement, a continue request, a continue reply holding
// an activity, the node event each continue tells) encoded without SwiftProtobuf's generic visitors, which were most of the CPU a node
// spent encoding them (a map of userInfo values above all). Byte for byte what serializedBytes()
// writes: the same fields in field-number order, proto3 defaults left out, oneof members always
// written, a map in its dictionary's own order. Anything else goes to SwiftProtobuf.

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

enum FastEnvelopeEncoder {
    static func encode(_ envelope: WireEnvelope) throws(NotOnFastPath) -> [UInt8] {
        guard envelope.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        switch envelope.body {
        case .advertisement?, .continueRequest?, .continueReply?, .nodeEvent?, nil: break
        default: throw NotOnFastPath()  // before anything is written
        }
        var writer = ProtobufWriter(capacity: 384)
        writer.uint(1, UInt64(envelope.protocolVersion))
        writer.uint(2, envelope.correlationID)
        if envelope.hasSender { try writer.messageField(3) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(envelope.sender, to: &writer) } }
        if envelope.hasSentAt { try writer.messageField(4) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(envelope.sentAt, to: &writer) } }
        writer.uint(5, envelope.sequence)
        writer.string(6, envelope.traceID)
        switch envelope.body {
        case .advertisement(let advertisement):
            try writer.messageField(10) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(advertisement, to: &writer) }
        case .continueRequest(let request):
            try writer.messageField(14) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(request, to: &writer) }
        case .continueReply(let reply):
            guard reply.unknownFields.data.isEmpty, case .activity(let activity)? = reply.result else { throw NotOnFastPath() }
            try writer.messageField(15) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in
                try writer.messageField(1) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(activity, to: &writer) }
            }
        case .nodeEvent(let event):
            try writer.messageField(19) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(event, to: &writer) }
        case nil:
            break
        default:
            throw NotOnFastPath()
        }
        return writer.bytes
    }

    private static func write(_ node: WireNodeRef, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard node.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, node.nodeID)
        writer.string(2, node.name)
        writer.string(3, node.host)
        writer.bytes(4, node.publicKey)
    }

    private static func write(_ time: WireTimestamp, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard time.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, UInt64(bitPattern: time.seconds))
        writer.uint(2, UInt64(bitPattern: Int64(time.nanos)))  // an int32 is sign-extended
    }

    private static func write(_ advertisement: WireAdvertisement, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard advertisement.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, advertisement.activityID)
        writer.string(2, advertisement.activityType)
        writer.string(3, advertisement.title)
        if advertisement.hasOrigin { try writer.messageField(4) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(advertisement.origin, to: &writer) } }
        writer.string(5, advertisement.continueEndpoint)
        writer.uint(6, advertisement.version)
        if advertisement.hasExpiresAt { try writer.messageField(7) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(advertisement.expiresAt, to: &writer) } }
        writer.uint(8, UInt64(advertisement.leaseMs))
        writer.bool(9, advertisement.supportsContinuationStreams)
        writer.string(10, advertisement.teamID)
        writer.string(11, advertisement.webpageURL)
        writer.strings(12, advertisement.keywords)
        if advertisement.hasUpdatedAt { try writer.messageField(13) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(advertisement.updatedAt, to: &writer) } }
    }

    private static func write(_ request: WireContinueRequest, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard request.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, request.activityID)
        writer.string(2, request.activityType)
        writer.bool(3, request.wantStreams)
        writer.bool(4, request.refresh)
    }

    /// A node's event, told on the bus for each continue and stream (a monitor's view).
    private static func write(_ event: WireNodeEvent, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard event.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, UInt64(bitPattern: Int64(event.kind.rawValue)))  // an enum is an int32
        writer.string(2, event.activityID)
        writer.string(3, event.activityType)
        if event.hasPeer { try writer.messageField(4) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(event.peer, to: &writer) } }
        writer.uint(5, event.streamID)
        writer.uint(6, event.bytesSent)
        writer.uint(7, event.bytesReceived)
        writer.uint(8, event.expectedLength)
        writer.string(9, event.detail)
    }

    private static func write(_ activity: WireActivity, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard activity.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, activity.activityID)
        writer.string(2, activity.activityType)
        writer.string(3, activity.title)
        try write(map: activity.userInfo, number: 4, to: &writer)
        writer.strings(5, activity.requiredUserInfoKeys)
        writer.string(6, activity.webpageURL)
        writer.strings(7, activity.keywords)
        if activity.hasExpiration { try writer.messageField(8) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(activity.expiration, to: &writer) } }
        writer.bool(9, activity.eligibleForHandoff)
        writer.bool(10, activity.supportsContinuationStreams)
        writer.string(11, activity.teamID)
        if activity.hasOrigin { try writer.messageField(16) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(activity.origin, to: &writer) } }
        writer.uint(17, activity.version)
        if activity.hasUpdatedAt { try writer.messageField(18) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(activity.updatedAt, to: &writer) } }
        if activity.hasDocument {
            let document = activity.document
            guard document.unknownFields.data.isEmpty else { throw NotOnFastPath() }
            writer.messageField(19) { writer in
                writer.string(1, document.url)
                writer.uint(2, document.version)
                writer.bytes(3, document.sha256)
                writer.uint(4, document.size)
            }
        }
    }

    /// A `map<string, Value>`: an entry message per pair, its key and value both written.
    private static func write(map: [String: WireValue], number: Int, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        for (key, value) in map {
            try writer.messageField(number) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in
                writer.stringField(1, key)
                try writer.messageField(2) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(value, to: &writer) }
            }
        }
    }

    private static func write(_ value: WireValue, to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard value.unknownFields.data.isEmpty else { throw NotOnFastPath() }
        switch value.kind {
        case .stringValue(let string): writer.stringField(1, string)
        case .intValue(let int): writer.varintField(2, UInt64(bitPattern: (int << 1) ^ (int >> 63)))  // zigzag
        case .doubleValue(let double): writer.doubleField(3, double)
        case .boolValue(let bool): writer.varintField(4, bool ? 1 : 0)
        case .bytesValue(let bytes): writer.bytesField(5, bytes)
        case .urlValue(let url): writer.stringField(6, url)
        case .dateValue(let date):
            try writer.messageField(7) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(date, to: &writer) }
        case .listValue(let list):
            guard list.unknownFields.data.isEmpty else { throw NotOnFastPath() }
            try writer.messageField(8) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in
                for element in list.values {
                    try writer.messageField(1) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(element, to: &writer) }
                }
            }
        case .mapValue(let map):
            guard map.unknownFields.data.isEmpty else { throw NotOnFastPath() }
            try writer.messageField(9) { (writer: inout ProtobufWriter) throws(NotOnFastPath) in try write(map: map.entries, number: 1, to: &writer) }
        case nil:
            break
        }
    }
}
