import Foundation
import HandoffWire
import SwiftProtobuf

/// A value in an activity's `userInfo`: the types NSUserActivity accepts, and nothing that cannot
/// cross a process boundary intact.
public enum UserInfoValue: Hashable, Sendable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case bytes(Data)
    case url(URL)
    case date(Date)
    case list([UserInfoValue])
    case map([String: UserInfoValue])

    /// The string, when this is one.
    public var stringValue: String? { if case .string(let value) = self { value } else { nil } }
    /// The integer, when this is one.
    public var intValue: Int64? { if case .int(let value) = self { value } else { nil } }
    /// The double, when this is one (integers convert).
    public var doubleValue: Double? {
        switch self {
        case .double(let value): value
        case .int(let value): Double(value)
        default: nil
        }
    }
    /// The Boolean, when this is one.
    public var boolValue: Bool? { if case .bool(let value) = self { value } else { nil } }
    /// The bytes, when this is bytes.
    public var bytesValue: Data? { if case .bytes(let value) = self { value } else { nil } }
    /// The URL, when this is one.
    public var urlValue: URL? { if case .url(let value) = self { value } else { nil } }
    /// The date, when this is one.
    public var dateValue: Date? { if case .date(let value) = self { value } else { nil } }
    /// The list, when this is one.
    public var listValue: [UserInfoValue]? { if case .list(let value) = self { value } else { nil } }
    /// The map, when this is one.
    public var mapValue: [String: UserInfoValue]? { if case .map(let value) = self { value } else { nil } }
}

extension UserInfoValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: UserInfoValue...) { self = .list(elements) }
    public init(dictionaryLiteral elements: (String, UserInfoValue)...) {
        self = .map(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

extension UserInfoValue: CustomStringConvertible {
    public var description: String {
        switch self {
        case .string(let value): "\"\(value)\""
        case .int(let value): String(value)
        case .double(let value): String(value)
        case .bool(let value): String(value)
        case .bytes(let value): "<\(value.count) bytes>"
        case .url(let value): value.absoluteString
        case .date(let value): value.formatted(.iso8601)
        case .list(let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        case .map(let entries):
            "[" + entries.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ") + "]"
        }
    }
}

// MARK: - Wire

extension UserInfoValue {
    /// The value as it travels on the wire.
    var wire: WireValue {
        var value = WireValue()
        switch self {
        case .string(let string): value.stringValue = string
        case .int(let int): value.intValue = int
        case .double(let double): value.doubleValue = double
        case .bool(let bool): value.boolValue = bool
        case .bytes(let bytes): value.bytesValue = bytes
        case .url(let url): value.urlValue = url.absoluteString
        case .date(let date): value.dateValue = WireTimestamp(date)
        case .list(let values):
            var list = WireValueList()
            list.values = values.map(\.wire)
            value.listValue = list
        case .map(let entries):
            var map = WireValueMap()
            map.entries = entries.mapValues(\.wire)
            value.mapValue = map
        }
        return value
    }

    /// A value received from the wire; `nil` for one with no kind set, which the contract
    /// (activity.proto, `Value`) says stands for null or for a kind a newer version added: it is
    /// left out (its key, or its place in a list), and the rest of the userInfo is kept. Refused, it
    /// made every continue of such an activity fail on this node.
    ///
    /// - Throws: ``HandoffError`` with `malformedMessage` for an unparseable URL.
    static func decoded(_ wire: WireValue) throws(HandoffError) -> UserInfoValue? {
        try decoded(WirePlainValue(wire))
    }

    /// A value read in plain values (a continue reply's, ``WireReplyEnvelope``): `nil` for null,
    /// which is left out (its key, or its place in a list).
    ///
    /// - Throws: ``HandoffError`` with `malformedMessage` for an unparseable URL.
    static func decoded(_ plain: WirePlainValue) throws(HandoffError) -> UserInfoValue? {
        switch plain {
        case .null: return nil
        case .string(let string): return .string(string)
        case .int(let int): return .int(int)
        case .double(let double): return .double(double)
        case .bool(let bool): return .bool(bool)
        case .bytes(let bytes): return .bytes(bytes)
        case .url(let text):
            guard let url = URL(string: text) else {
                throw HandoffError(.malformedMessage, "userInfo holds an unparseable URL: \(text)")
            }
            return .url(url)
        case .date(let time): return .date(time.date)
        case .list(let list):
            var values: [UserInfoValue] = []
            values.reserveCapacity(list.count)
            for element in list { if let value = try decoded(element) { values.append(value) } }
            return .list(values)
        case .map(let map):
            return .map(try userInfo(fromPlain: map))
        }
    }
}

/// Encodes a whole userInfo dictionary for the wire.
func wireUserInfo(_ userInfo: [String: UserInfoValue]) -> [String: WireValue] {
    userInfo.mapValues(\.wire)
}

/// Decodes a whole userInfo dictionary from the wire.
func userInfo(fromWire wire: [String: WireValue]) throws(HandoffError) -> [String: UserInfoValue] {
    try userInfo(fromPlain: wire.mapValues(WirePlainValue.init))
}

/// Decodes a whole userInfo dictionary read in plain values (a map's, or a reply's entries as they
/// came: a key given twice keeps its last value).
func userInfo(fromPlain plain: some Collection<(key: String, value: WirePlainValue)>) throws(HandoffError) -> [String: UserInfoValue] {
    // Made at its size (not `reserveCapacity`, which runs unspecialized: FastEnvelopeDecoding+Replies.swift).
    var result = [String: UserInfoValue](minimumCapacity: plain.count)
    for (key, value) in plain { result[key] = try UserInfoValue.decoded(value) }
    return result
}
