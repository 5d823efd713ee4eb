import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// A JSON value, decoded exactly (booleans stay booleans, integers stay integers).
enum JSONValue: Codable {
    case bool(Bool), int(Int64), double(Double), string(String), list([JSONValue]), map([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .int(value) }
        else if let value = try? container.decode(Double.self) { self = .double(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .list(value) }
        else { self = .map(try container.decode([String: JSONValue].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .list(let values): try container.encode(values)
        case .map(let entries): try container.encode(entries)
        }
    }

    /// How dates print (in userInfo, an expiry): ISO 8601 with fractions of a second, so none is lost.
    static let dateFormat = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// A userInfo value as JSON has it: the kinds JSON lacks become strings (bytes in base64, a
    /// URL as written, a date in ISO 8601).
    init(_ value: UserInfoValue) {
        switch value {
        case .string(let value): self = .string(value)
        case .int(let value): self = .int(value)
        case .double(let value): self = .double(value)
        case .bool(let value): self = .bool(value)
        case .bytes(let value): self = .string(value.base64EncodedString())
        case .url(let value): self = .string(value.absoluteString)
        case .date(let value): self = .string(value.formatted(Self.dateFormat))
        case .list(let values): self = .list(values.map(JSONValue.init))
        case .map(let entries): self = .map(entries.mapValues(JSONValue.init))
        }
    }

    var userInfoValue: UserInfoValue {
        switch self {
        case .bool(let value): .bool(value)
        case .int(let value): .int(value)
        case .double(let value): .double(value)
        case .string(let value): .string(value)
        case .list(let values): .list(values.map(\.userInfoValue))
        case .map(let entries): .map(entries.mapValues(\.userInfoValue))
        }
    }
}

/// One JSON object on a line, keys sorted: what every `--json` prints. Each command's lines are
/// `Encodable` types of its own, so the fields and their types are declared, not assembled; a
/// field that is `nil` is left out.
func jsonLine(_ value: some Encodable) -> String {
    let data = (try? jsonEncoder().encode(value)) ?? Data("{}".utf8)
    return String(decoding: data, as: UTF8.self)
}

/// How the command writes JSON, in its lines and on the live page: keys sorted, "tcp://…" rather
/// than "tcp:\/\/…", and a double JSON has no number for as a string (a userInfo value may be
/// infinite or NaN, and then the whole line was {}).
func jsonEncoder() -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "Infinity", negativeInfinity: "-Infinity", nan: "NaN")
    return encoder
}
