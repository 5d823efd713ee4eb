// Hand-written: a reader of the protobuf binary format over borrowed bytes, for the few hot paths
// that need some fields of a message and not the whole of it (WireBusFields). It accepts and
// rejects what SwiftProtobuf's BinaryDecoder does for the fields it is asked for.

import Foundation
import SwiftProtobuf

/// Reads protobuf fields one at a time from bytes it does not own (no copy, no allocation).
///
/// The caller keeps the bytes alive while the reader and any slice it returned are in use.
struct ProtobufReader {
    /// The protobuf wire types (`WireFormat` in SwiftProtobuf).
    enum WireType: UInt8 {
        case varint = 0, fixed64 = 1, lengthDelimited = 2, startGroup = 3, endGroup = 4, fixed32 = 5
    }

    /// SwiftProtobuf's default `messageDepthLimit`.
    static let depthLimit = 100

    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    /// How deep this reader is (the outermost message is 1; nested messages and skipped groups
    /// add one each), checked against ``depthLimit``.
    private(set) var depth: Int
    /// Where ``repeatedString()`` and ``repeatedBytes()`` look first, if anywhere: the table's
    /// memory, not the object (no reference count for each nested reader or each string). The
    /// caller keeps the table alive while it reads, as it does the bytes.
    private let strings: WireStrings.Slots?

    init(_ bytes: UnsafeRawBufferPointer, depth: Int = 1, strings: WireStrings? = nil) throws(BinaryDecodingError) {
        try self.init(bytes, depth: depth, slots: strings?.slots)
    }

    private init(_ bytes: UnsafeRawBufferPointer, depth: Int, slots: WireStrings.Slots?) throws(BinaryDecodingError) {
        self.bytes = bytes
        self.depth = depth
        self.strings = slots
        guard depth <= Self.depthLimit else { throw .messageDepthLimit }
    }

    /// A reader of a nested message's bytes, one level deeper.
    func nested(_ body: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> ProtobufReader {
        try ProtobufReader(body, depth: depth + 1, slots: strings)
    }

    /// The next field's number and wire type, or `nil` at the end of the bytes.
    ///
    /// A tag is a varint of at most 5 bytes below 2³², with a field number above 0 and a wire type
    /// of 0–5; an end-group tag here (not inside a skipped group) is malformed.
    @inline(__always)
    mutating func nextField() throws(BinaryDecodingError) -> (number: Int, type: WireType)? {
        guard index < bytes.count else { return nil }
        // Fields 1–15 (every field a broker reads) have one-byte tags.
        let first = bytes[index]
        if first < 0x80, first >> 3 != 0, let type = WireType(rawValue: first & 7), type != .endGroup {
            index += 1
            return (Int(first >> 3), type)
        }
        var tag: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.count, shift < 35 else { throw .malformedProtobuf }
            let byte = bytes[index]
            index += 1
            tag |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { break }
            shift += 7
        }
        guard tag < 1 << 32, tag >> 3 != 0, let type = WireType(rawValue: UInt8(tag & 7)), type != .endGroup else {
            throw .malformedProtobuf
        }
        return (Int(tag >> 3), type)
    }

    /// A varint of at most 10 bytes.
    @inline(__always)
    mutating func varint() throws(BinaryDecodingError) -> UInt64 {
        guard index < bytes.count else { throw .truncated }
        // Most are one byte: lengths under 128, small numbers.
        let first = bytes[index]
        if first < 0x80 {
            index += 1
            return UInt64(first)
        }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.count, shift <= 63 else { throw .malformedProtobuf }
            let byte = bytes[index]
            index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    /// A fixed64 field's value (a double's bits), little-endian.
    mutating func fixed64() throws(BinaryDecodingError) -> UInt64 {
        guard bytes.count - index >= 8 else { throw .truncated }
        defer { index += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self))
    }

    /// A length-delimited field's body (a string, bytes or a nested message), borrowed.
    @inline(__always)
    mutating func lengthDelimited() throws(BinaryDecodingError) -> UnsafeRawBufferPointer {
        let length = try varint()
        guard length < 0x7FFF_FFFF else { throw .malformedProtobuf }
        guard length <= UInt64(bytes.count - index) else { throw .truncated }
        let body = UnsafeRawBufferPointer(rebasing: bytes[index..<index + Int(length)])
        index += Int(length)
        return body
    }

    /// A string field: its body as UTF-8, which it must be.
    mutating func string() throws(BinaryDecodingError) -> String {
        try Self.string(of: lengthDelimited())
    }

    /// A string field that likely repeats from message to message (an id, a name, a type): the
    /// same as ``string()``, found in the reader's ``WireStrings`` when it has one.
    mutating func repeatedString() throws(BinaryDecodingError) -> String {
        let body = try lengthDelimited()
        guard let strings else { return try Self.string(of: body) }
        return try strings.string(body) { () throws(BinaryDecodingError) in try Self.string(of: body) }
    }

    /// A bytes field that likely repeats from message to message (a CURVE key): its bytes, found in
    /// the reader's ``WireStrings`` when it has one.
    mutating func repeatedBytes() throws(BinaryDecodingError) -> Data {
        let body = try lengthDelimited()
        guard let strings else { return Data(body) }
        return strings.data(body)
    }

    private static func string(of body: UnsafeRawBufferPointer) throws(BinaryDecodingError) -> String {
        // ASCII (ids, names, hosts) is UTF-8 as it is. `String(validating:as:)` looks up generic
        // metadata on every call: 6 % of the broker's samples in a profile of `handoff-bench adverts`.
        if isASCII(body) { return String(decoding: body, as: UTF8.self) }
        guard let string = String(validating: body, as: UTF8.self) else { throw .invalidUTF8 }
        return string
    }

    /// A string field read only to check that it is UTF-8, without making a `String` of it (a
    /// broker reads a sender's name and host so, once per message).
    mutating func checkString() throws(BinaryDecodingError) {
        _ = try checkedString()
    }

    /// A string field's body, checked to be UTF-8 and borrowed (``WireBusFields`` keeps where it
    /// lies, not a copy).
    @inline(__always)
    mutating func checkedString() throws(BinaryDecodingError) -> UnsafeRawBufferPointer {
        let body = try lengthDelimited()
        guard !Self.isASCII(body) else { return body }
        guard String(validating: body, as: UTF8.self) != nil else { throw .invalidUTF8 }
        return body
    }

    /// Whether every byte is below 0x80, eight at a time: a broker checks every string of every
    /// envelope, and a byte at a time was a tenth of its thread's time in `broker-capacity`.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= count {
            high |= base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < count {
            high |= UInt64(base.load(fromByteOffset: index, as: UInt8.self))
            index += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// Skips a field's value (a field this reader was not asked for), checking only that it is
    /// well formed, as SwiftProtobuf does for unknown fields.
    mutating func skip(_ type: WireType, number: Int) throws(BinaryDecodingError) {
        switch type {
        case .varint:
            _ = try varint()
        case .fixed64:
            try advance(8)
        case .fixed32:
            try advance(4)
        case .lengthDelimited:
            let length = try varint()
            guard length <= UInt64(bytes.count - index) else { throw .truncated }
            index += Int(length)
        case .startGroup:
            depth += 1
            guard depth <= Self.depthLimit else { throw .messageDepthLimit }
            while true {
                let (innerNumber, innerType) = try groupTag()  // truncated at the end of the bytes
                if innerType == .endGroup {
                    guard innerNumber == number else { throw .malformedProtobuf }
                    break
                }
                try skip(innerType, number: innerNumber)
            }
            depth -= 1
        case .endGroup:
            throw .truncated
        }
    }

    private mutating func advance(_ count: Int) throws(BinaryDecodingError) {
        guard bytes.count - index >= count else { throw .truncated }
        index += count
    }

    /// A tag inside a skipped group, read as SwiftProtobuf does there (end-group tags allowed).
    private mutating func groupTag() throws(BinaryDecodingError) -> (Int, WireType) {
        let tag = try varint()
        guard tag < UInt64(UInt32.max), tag >> 3 != 0, let type = WireType(rawValue: UInt8(tag & 7)) else {
            throw .malformedProtobuf
        }
        return (Int(tag >> 3), type)
    }
}
