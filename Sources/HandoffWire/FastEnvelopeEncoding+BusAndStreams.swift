// Hand-written writers of the envelope bodies a member sends at the rate of its activities or its
// chunks, beside FastEnvelopeEncoding.swift's and under its rule: byte for byte what SwiftProtobuf
// writes (FastEnvelopeCodingTests), anything else (unknown fields, a rarer kind) left to it.

import SwiftProtobuf

/// An activity ended: as many of them on the bus as advertisements, where activities come and go.
extension WireWithdrawal: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.string(1, activityID)
        writer.string(2, activityType)
        if hasOrigin { try writer.message(3, origin) }
        writer.uint(4, UInt64(bitPattern: Int64(reason.rawValue)))  // an enum is an int32
    }
}

/// A node's presence: every member hears every node's, each presence interval, listing what is current.
extension WireNodePresence: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        if hasNode { try writer.message(1, node) }
        writer.string(2, continueEndpoint)
        writer.uint(3, UInt64(leaseMs))
        writer.strings(4, activityIds)
        writer.bool(5, partial)
        if hasTraffic { try writer.message(6, traffic) }
    }
}

extension WireNodeTraffic: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, messagesIn)
        writer.uint(2, bytesIn)
        writer.uint(3, messagesOut)
        writer.uint(4, bytesOut)
    }
}

/// A stream's frame: of its kinds, only those sent for every chunk (its data, and the credit that
/// grants it back); an open, end, resume and the rest go to SwiftProtobuf.
extension WireStreamFrame: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, streamID)
        switch kind {
        case .data(let data)?: try writer.message(3, data)
        case .credit(let credit)?: try writer.message(4, credit)
        default: throw NotOnFastPath()
        }
    }
}

extension WireStreamData: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, offset)
        writer.bytes(2, payload)
        writer.uint(3, UInt64(length))
        writer.uint(4, totalLength)
    }
}

extension WireStreamCredit: FastEncodable {
    func write(to writer: inout ProtobufWriter) throws(NotOnFastPath) {
        guard unknownFields.data.isEmpty else { throw NotOnFastPath() }
        writer.uint(1, UInt64(chunks))
        writer.uint(2, acknowledgedOffset)
        writer.bool(3, endReceived)
    }
}
