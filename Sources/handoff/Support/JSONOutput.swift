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
enum JSONValue: Decodable {
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
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
    return String(decoding: data, as: UTF8.self)
}
