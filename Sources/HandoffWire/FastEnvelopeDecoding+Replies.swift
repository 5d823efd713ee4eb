// A continue reply's activity decoded by hand into plain values, as FastEnvelopeDecoding.swift
// decodes the other hot bodies and under the same rule: what it takes it reads exactly as
// SwiftProtobuf would, and everything else it leaves to SwiftProtobuf. Read into a generated
// `WireActivity`, the reply was the largest step of a continue's codec: a storage object copied at
// its first field set, dynamic exclusivity checks at every access, and the same again for each
// userInfo value, which the node then turned into its own values. Read so, the reply took 4.4 µs
// hot; in plain values 2.3 (`handoff-bench continue`'s codec row). Whoever wants the generated
// envelope gets it built from these values. Not generic over the node's own value type: a
// generic reader runs unspecialized across modules, and so took 6.1 µs.

import Foundation

extension FastEnvelopeDecoder {
    /// The envelope read once, a continue reply's activity left in plain values (moved out of
    /// what was read, not copied), an untraced stream frame alone, anything else built; `nil` to
    /// leave these bytes to SwiftProtobuf. With `strings`, the strings that repeat are looked up
    /// there first.
    static func decodeForClient(_ bytes: UnsafeRawBufferPointer, strings: WireStrings?) -> Decoded<WireReplyEnvelope>? {
        var read = Read()
        guard (try? envelope(ProtobufReader(bytes, strings: strings), into: &read)) != nil else { return nil }
        if let activity = read.replyActivity.take() {
            return .plain(protocolVersion: read.header.protocolVersion, .activityReply(correlationID: read.header.correlationID, activity))
        }
        if let frame = read.untracedStreamFrame {
            return .plain(protocolVersion: read.header.protocolVersion, .streamFrame(frame))
        }
        return .envelope(read.generated)
    }

    /// A reply holding an activity and nothing else (an error reply goes to SwiftProtobuf), read
    /// into a fresh one in place (as ``envelope(_:into:)``, for the same reason).
    static func replyActivity(_ reader: Reader, into activity: inout WirePlainActivity) throws {
        var reader = reader
        var read = false
        while let (number, type) = try reader.nextField() {
            guard number == 1, type == .lengthDelimited, !read else { throw NotOnFastPath() }
            let body = try reader.lengthDelimited()
            try plainActivity(reader.nested(body), into: &activity)
            activity.bytes = Array(body)
            read = true
        }
        guard read else { throw NotOnFastPath() }  // neither an activity nor an error
    }

    /// Reads an activity into a fresh one in place.
    private static func plainActivity(_ reader: Reader, into activity: inout WirePlainActivity) throws {
        var reader = reader
        // Sized first (a walk over the fields, no values read): grown entry by entry, the list was
        // made again as it grew. Kept as a list: the node makes the one map of them it needs.
        activity.userInfo.reserveCapacity(try count(of: 4, in: reader))
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            if number != 4, number != 5, number != 7 { try seen.first(number) }
            switch (number, type) {
            case (1, .lengthDelimited): activity.activityID = try reader.repeatedString()
            case (2, .lengthDelimited): activity.activityType = try reader.repeatedString()
            case (3, .lengthDelimited): activity.title = try reader.string()
            case (4, .lengthDelimited):
                activity.userInfo.append(try plainMapEntry(reader.nested(reader.lengthDelimited())))
            case (5, .lengthDelimited): activity.requiredUserInfoKeys.append(try reader.string())
            case (6, .lengthDelimited): activity.webpageURL = try reader.string()
            case (7, .lengthDelimited): activity.keywords.append(try reader.string())
            case (8, .lengthDelimited): activity.expiration = try timestamp(reader.nested(reader.lengthDelimited()))
            case (9, .varint): activity.eligibleForHandoff = try reader.varint() != 0
            case (10, .varint): activity.supportsContinuationStreams = try reader.varint() != 0
            case (11, .lengthDelimited): activity.teamID = try reader.repeatedString()
            case (16, .lengthDelimited): activity.origin = try node(reader.nested(reader.lengthDelimited()))
            case (17, .varint): activity.version = try reader.varint()
            case (18, .lengthDelimited): activity.updatedAt = try timestamp(reader.nested(reader.lengthDelimited()))
            case (19, .lengthDelimited): activity.document = try document(reader.nested(reader.lengthDelimited()))
            default: throw NotOnFastPath()
            }
        }
    }

    /// A `map<string, Value>` entry holding both its key and its value, once each.
    private static func plainMapEntry(_ reader: Reader) throws -> (String, WirePlainValue) {
        var reader = reader
        var key: String?
        var value: WirePlainValue?
        while let (number, type) = try reader.nextField() {
            switch (number, type) {
            case (1, .lengthDelimited) where key == nil: key = try reader.string()
            case (2, .lengthDelimited) where value == nil: value = try plainValue(reader.nested(reader.lengthDelimited()))
            default: throw NotOnFastPath()
            }
        }
        guard let key, let value else { throw NotOnFastPath() }
        return (key, value)
    }

    /// A Value holding at most one member of its oneof (none: null).
    private static func plainValue(_ reader: Reader) throws -> WirePlainValue {
        var reader = reader
        var value: WirePlainValue?
        while let (number, type) = try reader.nextField() {
            guard value == nil else { throw NotOnFastPath() }
            switch (number, type) {
            case (1, .lengthDelimited): value = .string(try reader.string())
            case (2, .varint):
                let zigzag = try reader.varint()
                value = .int(Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1))
            case (3, .fixed64): value = .double(Double(bitPattern: try reader.fixed64()))
            case (4, .varint): value = .bool(try reader.varint() != 0)
            case (5, .lengthDelimited): value = .bytes(Data(try reader.lengthDelimited()))
            case (6, .lengthDelimited): value = .url(try reader.string())
            case (7, .lengthDelimited): value = .date(try timestamp(reader.nested(reader.lengthDelimited())))
            case (8, .lengthDelimited):
                var list: [WirePlainValue] = []
                var elements = try reader.nested(reader.lengthDelimited())
                while let (element, elementType) = try elements.nextField() {
                    guard element == 1, elementType == .lengthDelimited else { throw NotOnFastPath() }
                    list.append(try plainValue(elements.nested(elements.lengthDelimited())))
                }
                value = .list(list)
            case (9, .lengthDelimited):
                var map: [String: WirePlainValue] = [:]
                var entries = try reader.nested(reader.lengthDelimited())
                while let (entry, entryType) = try entries.nextField() {
                    guard entry == 1, entryType == .lengthDelimited else { throw NotOnFastPath() }
                    let (key, element) = try plainMapEntry(entries.nested(entries.lengthDelimited()))
                    map[key] = element
                }
                value = .map(map)
            default: throw NotOnFastPath()
            }
        }
        return value ?? .null
    }
}
