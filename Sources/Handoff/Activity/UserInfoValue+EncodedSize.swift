import Foundation
import HandoffWire

/// The encoded size of a userInfo dictionary in bytes: what the size limit is measured against —
/// the `user_info` field of an `Activity` alone, as SwiftProtobuf writes it.
///
/// Counted from the values, by protobuf's rules, without building the wire messages: a continue
/// checks the limit before it encodes its reply, and building and encoding the map twice was a
/// tenth of the answering node's loop (`UserInfoSizeTests` holds it to the encoder's figure).
func encodedSize(ofUserInfo userInfo: [String: UserInfoValue]) -> Int {
    mapFieldSize(userInfo)  // field 4 of Activity
}

/// A `map<string, Value>` field of a one-byte tag: per pair, the tag, a length, and the entry —
/// its key (field 1) and value (field 2), each with its one tag byte, written even when empty.
private func mapFieldSize(_ entries: [String: UserInfoValue]) -> Int {
    entries.reduce(0) { size, entry in
        size + lengthDelimited(lengthDelimited(entry.key.utf8.count) + lengthDelimited(entry.value.encodedSize))
    }
}

/// A length-delimited field of a one-byte tag: the tag, the length as a varint, the bytes.
private func lengthDelimited(_ count: Int) -> Int {
    1 + varintSize(UInt64(count)) + count
}

private func varintSize(_ value: UInt64) -> Int {
    value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7
}

extension UserInfoValue {
    /// The size of the `Value` message: its one field of the oneof, which is written even when it
    /// holds a default (an empty string, zero, false).
    fileprivate var encodedSize: Int {
        switch self {
        case .string(let string): return lengthDelimited(string.utf8.count)
        case .int(let int): return 1 + varintSize(UInt64(bitPattern: (int << 1) ^ (int >> 63)))  // zigzag
        case .double: return 1 + 8
        case .bool: return 1 + 1
        case .bytes(let bytes): return lengthDelimited(bytes.count)
        case .url(let url): return lengthDelimited(url.absoluteString.utf8.count)
        case .date(let date):
            // A Timestamp leaves out its zero fields; nanos is an int32, sign-extended when negative.
            let timestamp = WireTimestamp(date)
            let seconds = timestamp.seconds == 0 ? 0 : 1 + varintSize(UInt64(bitPattern: timestamp.seconds))
            let nanos = timestamp.nanos == 0 ? 0 : 1 + varintSize(UInt64(bitPattern: Int64(timestamp.nanos)))
            return lengthDelimited(seconds + nanos)
        case .list(let values):
            // A ValueList: each value a field 1.
            return lengthDelimited(values.reduce(0) { $0 + lengthDelimited($1.encodedSize) })
        case .map(let entries):
            // A ValueMap: its entries as field 1.
            return lengthDelimited(mapFieldSize(entries))
        }
    }
}
