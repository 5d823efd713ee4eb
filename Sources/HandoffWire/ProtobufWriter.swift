// Hand-written: a writer of the protobuf binary format for the hot envelopes (FastEnvelopeEncoding),
// byte for byte what SwiftProtobuf's BinaryEncodingVisitor writes for the same fields in the same order.

import Foundation

/// Appends protobuf fields to a byte array, nested messages in one pass: a nested message's length
/// is given one byte before its body is written, and the body is moved up in the rare case its
/// length needs more.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        Self.forEachVarintByte(value) { bytes.append($0) }
    }

    /// Hands `body` the bytes of `value`'s varint, low group first: where they go is the caller's.
    @inline(__always)
    static func forEachVarintByte(_ value: UInt64, _ body: (UInt8) -> Void) {
        var value = value
        while value >= 0x80 {
            body(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        body(UInt8(value))
    }

    @inline(__always)
    mutating func tag(_ number: Int, _ type: ProtobufReader.WireType) {
        varint(UInt64(number) << 3 | UInt64(type.rawValue))
    }

    /// A varint field (uint32, uint64, int64, bool), written whatever its value.
    @inline(__always)
    mutating func varintField(_ number: Int, _ value: UInt64) {
        tag(number, .varint)
        varint(value)
    }

    /// A string field, written whatever its value.
    mutating func stringField(_ number: Int, _ value: String) {
        tag(number, .lengthDelimited)
        // A native string's bytes in place (copying it into a `var` for `withUTF8` was a retain and
        // a release per string written); a bridged one is made contiguous in a copy.
        func write(_ utf8: UnsafeBufferPointer<UInt8>) {
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
        if value.utf8.withContiguousStorageIfAvailable(write) == nil {
            var value = value
            value.withUTF8(write)
        }
    }

    /// A bytes field, written whatever its value.
    mutating func bytesField(_ number: Int, _ value: Data) {
        tag(number, .lengthDelimited)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A length-delimited field holding `bytes` as they are (an encoded message, made before).
    mutating func lengthDelimitedField(_ number: Int, _ value: [UInt8]) {
        tag(number, .lengthDelimited)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A double field (fixed64, little-endian).
    mutating func doubleField(_ number: Int, _ value: Double) {
        tag(number, .fixed64)
        withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// A nested message field: its tag, its length, and what `body` writes.
    mutating func messageField<Failure: Error>(_ number: Int, _ body: (inout ProtobufWriter) throws(Failure) -> Void) throws(Failure) {
        tag(number, .lengthDelimited)
        let lengthAt = bytes.count
        bytes.append(0)
        try body(&self)
        let length = bytes.count - lengthAt - 1
        guard length >= 0x80 else {
            bytes[lengthAt] = UInt8(length)
            return
        }
        // A longer length takes more than the byte kept for it: its varint, made on the stack (no
        // array per nested message), goes in its place and the body moves up.
        var varint: (UInt64, UInt64) = (0, 0)
        let count = withUnsafeMutableBytes(of: &varint) { buffer in
            var count = 0
            Self.forEachVarintByte(UInt64(length)) { byte in
                buffer[count] = byte
                count += 1
            }
            return count
        }
        withUnsafeBytes(of: varint) { bytes.replaceSubrange(lengthAt..<lengthAt + 1, with: $0.prefix(count)) }
    }

    // MARK: proto3's defaults: a field holding its type's default is not written

    mutating func string(_ number: Int, _ value: String) {
        if !value.isEmpty { stringField(number, value) }
    }

    mutating func uint(_ number: Int, _ value: UInt64) {
        if value != 0 { varintField(number, value) }
    }

    mutating func bool(_ number: Int, _ value: Bool) {
        if value { varintField(number, 1) }
    }

    mutating func bytes(_ number: Int, _ value: Data) {
        if !value.isEmpty { bytesField(number, value) }
    }

    mutating func strings(_ number: Int, _ values: [String]) {
        for value in values { stringField(number, value) }
    }
}
