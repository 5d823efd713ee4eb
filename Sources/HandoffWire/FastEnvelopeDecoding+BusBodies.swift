// The bus's bodies other than the advertisement that every member hears at its rate or more (a
// withdrawal: an activity ended; a presence: every node's, each interval), decoded by hand as
// FastEnvelopeDecoding.swift decodes the other hot bodies, under the same rule: what it takes it
// reads exactly as SwiftProtobuf would, and everything else (a field given twice, an unknown field,
// a reason this build does not know) it leaves to SwiftProtobuf (FastEnvelopeCodingTests holds the
// two to each other).

extension FastEnvelopeDecoder {
    /// Where activities come and go, a follower hears as many withdrawals as advertisements; through
    /// SwiftProtobuf's generic decoder each built its message through the visitors.
    static func withdrawal(_ reader: ProtobufReader) throws -> WireWithdrawal {
        var reader = reader
        var withdrawal = WireWithdrawal()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .lengthDelimited): withdrawal.activityID = try reader.string()
            case (2, .lengthDelimited): withdrawal.activityType = try reader.repeatedString()  // as an advertisement's
            case (3, .lengthDelimited): withdrawal.origin = try node(reader.nested(reader.lengthDelimited()))
            case (4, .varint):
                // An int32 on the wire; a value this build has no case for is SwiftProtobuf's
                // (`UNRECOGNIZED`, which `allCases` leaves out).
                let value = Int(Int32(truncatingIfNeeded: try reader.varint()))
                guard let reason = WireWithdrawal.Reason(rawValue: value), WireWithdrawal.Reason.allCases.contains(reason) else { throw NotOnFastPath() }
                withdrawal.reason = reason
            default: throw NotOnFastPath()
            }
        }
        return withdrawal
    }

    /// A node's presence, listing the activities current there (repeated: each id a field 4 of its own).
    static func presence(_ reader: ProtobufReader) throws -> WireNodePresence {
        var reader = reader
        var presence = WireNodePresence()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            if number != 4 { try seen.first(number) }
            switch (number, type) {
            case (1, .lengthDelimited): presence.node = try node(reader.nested(reader.lengthDelimited()))
            case (2, .lengthDelimited): presence.continueEndpoint = try reader.repeatedString()
            case (3, .varint): presence.leaseMs = UInt32(truncatingIfNeeded: try reader.varint())
            case (4, .lengthDelimited): presence.activityIds.append(try reader.string())
            case (5, .varint): presence.partial = try reader.varint() != 0
            case (6, .lengthDelimited): presence.traffic = try traffic(reader.nested(reader.lengthDelimited()))
            default: throw NotOnFastPath()
            }
        }
        return presence
    }

    static func traffic(_ reader: ProtobufReader) throws -> WireNodeTraffic {
        var reader = reader
        var traffic = WireNodeTraffic()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .varint): traffic.messagesIn = try reader.varint()
            case (2, .varint): traffic.bytesIn = try reader.varint()
            case (3, .varint): traffic.messagesOut = try reader.varint()
            case (4, .varint): traffic.bytesOut = try reader.varint()
            default: throw NotOnFastPath()
            }
        }
        return traffic
    }
}
