// Hand-written: recognises, without decoding it, a node's own advertisement or withdrawal that the
// broker sent back to it (every subscriber gets what it publishes). A node that advertises much
// would otherwise decode each of its own messages a second time only to drop it.

import SwiftProtobuf

/// Whether a bus envelope is one of a node's own advertisements or withdrawals.
public enum WireOwnEcho {
    /// True only when the envelope is well formed at its top level, names `nodeID` as its sender
    /// exactly once, and carries exactly one body, an advertisement or a withdrawal, whose origin
    /// (named exactly once) is `nodeID` too. Anything else, merged fields and malformed bytes
    /// included, is `false`: the caller decodes it as usual, and the decoder judges it. The body's
    /// other fields are only walked, not checked (their UTF-8 is not looked at): damaged bytes that
    /// name the node as both sender and origin may be dropped here where a full decode would have
    /// counted them malformed.
    ///
    /// - Parameters:
    ///   - bytes: The envelope frame.
    ///   - nodeID: The node's id, as UTF-8.
    public static func matches(_ bytes: UnsafeRawBufferPointer, nodeID: [UInt8]) -> Bool {
        guard var reader = try? ProtobufReader(bytes) else { return false }
        var senderMatches = false, senders = 0, bodies = 0
        var body: (number: Int, bytes: UnsafeRawBufferPointer)?
        do {
            while let (number, type) = try reader.nextField() {
                switch (number, type) {
                case (3, .lengthDelimited):
                    senders += 1
                    senderMatches = try nodeIDMatches(reader.nested(reader.lengthDelimited()), nodeID)
                    // Another node's message (nearly every one a watcher reads): no later field
                    // can make it this node's, so the rest is not walked.
                    guard senderMatches, senders == 1 else { return false }
                case (10...19, _):
                    bodies += 1
                    guard type == .lengthDelimited else { return false }
                    body = (number, try reader.lengthDelimited())
                default:
                    try reader.skip(type, number: number)
                }
            }
        } catch {
            return false
        }
        guard senders == 1, senderMatches, bodies == 1, let body else { return false }
        // The origin's field: 4 in an Advertisement, 3 in a Withdrawal.
        let originField: Int
        switch body.number {
        case 10: originField = 4
        case 11: originField = 3
        default: return false
        }
        do {
            let inner = try ProtobufReader(body.bytes, depth: 2)
            guard let origin = try onlyField(originField, in: inner) else { return false }
            return try nodeIDMatches(inner.nested(origin), nodeID)
        } catch {
            return false
        }
    }

    /// Whether a NodeRef names `nodeID`, in a single `node_id` field.
    private static func nodeIDMatches(_ reader: ProtobufReader, _ nodeID: [UInt8]) throws(BinaryDecodingError) -> Bool {
        guard let id = try onlyField(1, in: reader) else { return false }
        return id.elementsEqual(nodeID)
    }

    /// The body of length-delimited field `number` when the message has exactly one, else `nil`;
    /// every other field is walked, so the bytes must be well formed.
    private static func onlyField(_ number: Int, in reader: ProtobufReader) throws(BinaryDecodingError) -> UnsafeRawBufferPointer? {
        var reader = reader
        var found: UnsafeRawBufferPointer?, count = 0
        while let (field, type) = try reader.nextField() {
            if field == number, type == .lengthDelimited {
                count += 1
                found = try reader.lengthDelimited()
            } else {
                try reader.skip(type, number: field)
            }
        }
        return count == 1 ? found : nil
    }
}
