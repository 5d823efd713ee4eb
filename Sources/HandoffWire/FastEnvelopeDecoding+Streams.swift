// The stream frames a transfer sends once per chunk, decoded by hand as FastEnvelopeDecoding.swift
// decodes the other hot bodies, under the same rule: what it takes it reads exactly as SwiftProtobuf
// would, and everything else (another kind, a field given twice, an unknown field) it leaves to
// SwiftProtobuf (FastEnvelopeCodingTests holds the two to each other).

import Foundation

extension FastEnvelopeDecoder {
    /// A stream frame of the two kinds sent once per chunk (data and credit); the rarer kinds
    /// (open, end, cancel, error, resume) go to SwiftProtobuf. Through SwiftProtobuf's generic
    /// decoder every chunk looked up generic metadata (a receiving loop's largest runtime cost after
    /// the checksum, in a profile of a 1 GiB transfer).
    static func streamFrame(_ reader: ProtobufReader) throws -> WireStreamFrame {
        var reader = reader
        var frame = WireStreamFrame()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .varint): frame.streamID = try reader.varint()
            case (3, .lengthDelimited):
                guard frame.kind == nil else { throw NotOnFastPath() }  // a oneof given twice
                frame.kind = .data(try streamData(reader.nested(reader.lengthDelimited())))
            case (4, .lengthDelimited):
                guard frame.kind == nil else { throw NotOnFastPath() }
                frame.kind = .credit(try streamCredit(reader.nested(reader.lengthDelimited())))
            default: throw NotOnFastPath()
            }
        }
        return frame
    }

    static func streamData(_ reader: ProtobufReader) throws -> WireStreamData {
        var reader = reader
        var data = WireStreamData()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .varint): data.offset = try reader.varint()
            case (2, .lengthDelimited): data.payload = Data(try reader.lengthDelimited())
            case (3, .varint): data.length = UInt32(truncatingIfNeeded: try reader.varint())
            case (4, .varint): data.totalLength = try reader.varint()
            default: throw NotOnFastPath()
            }
        }
        return data
    }

    static func streamCredit(_ reader: ProtobufReader) throws -> WireStreamCredit {
        var reader = reader
        var credit = WireStreamCredit()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .varint): credit.chunks = UInt32(truncatingIfNeeded: try reader.varint())
            case (2, .varint): credit.acknowledgedOffset = try reader.varint()
            case (3, .varint): credit.endReceived = try reader.varint() != 0
            default: throw NotOnFastPath()
            }
        }
        return credit
    }
}
