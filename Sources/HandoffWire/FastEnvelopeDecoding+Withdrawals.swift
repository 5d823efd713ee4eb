// A withdrawal (an activity ended), decoded by hand as FastEnvelopeDecoding.swift decodes the other
// hot bodies, under the same rule: what it takes it reads exactly as SwiftProtobuf would, and
// everything else (a field given twice, an unknown field, a reason this build does not know) it
// leaves to SwiftProtobuf (FastEnvelopeCodingTests holds the two to each other).

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
            case (2, .lengthDelimited): withdrawal.activityType = try reader.string()
            case (3, .lengthDelimited): withdrawal.origin = try node(reader.nested(reader.lengthDelimited()))
            case (4, .varint):
                // An int32 on the wire; a value this build has no case for is SwiftProtobuf's
                // (`UNRECOGNIZED`).
                let value = Int(Int32(truncatingIfNeeded: try reader.varint()))
                guard let reason = WireWithdrawal.Reason(rawValue: value), !reason.isUnrecognized else { throw NotOnFastPath() }
                withdrawal.reason = reason
            default: throw NotOnFastPath()
            }
        }
        return withdrawal
    }
}

extension WireWithdrawal.Reason {
    fileprivate var isUnrecognized: Bool {
        if case .UNRECOGNIZED = self { true } else { false }
    }
}
