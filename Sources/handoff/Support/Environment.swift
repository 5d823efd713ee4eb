import ArgumentParser
import Foundation
import Handoff
import Logging

/// What the binary reads from its environment, so that a shell (or a unit file) names the broker,
/// the log level and the keys once instead of on every command. A flag always wins.
enum Environment {
    /// The broker when nothing names it: loopback, the ports `handoff broker` binds by default.
    static let defaultBroker = ["tcp://127.0.0.1:5555", "tcp://127.0.0.1:5556"]

    /// `$HANDOFF_BROKER`: the frontend and the backend, separated by a space or a comma.
    static func broker() throws -> [String]? {
        guard let text = ProcessInfo.processInfo.environment["HANDOFF_BROKER"], !text.isEmpty else { return nil }
        let endpoints = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
        guard endpoints.count >= 2, endpoints.count % 2 == 0 else {
            throw ValidationError("HANDOFF_BROKER takes each broker's two endpoints, the frontend and the backend (e.g. \"tcp://broker:5555 tcp://broker:5556\", and the second broker's after them for a pair), not \"\(text)\"")
        }
        return endpoints
    }

    /// The bus of `endpoints`: one broker's frontend and backend, or several brokers' in turn.
    static func bus(_ endpoints: [String]) throws -> Node.Configuration.Bus {
        guard endpoints.count >= 2, endpoints.count % 2 == 0 else {
            throw ValidationError("--broker takes each broker's frontend and backend (repeat it for a pair of brokers), not \(endpoints.count) endpoints")
        }
        if endpoints.count == 2 { return .broker(frontend: endpoints[0], backend: endpoints[1]) }
        return .brokers(stride(from: 0, to: endpoints.count, by: 2).map {
            Node.Configuration.BrokerEndpoints(frontend: endpoints[$0], backend: endpoints[$0 + 1])
        })
    }

    /// The broker when no flag names it: `$HANDOFF_BROKER`, else ``defaultBroker``.
    static func brokerOrDefault() throws -> [String] {
        try broker() ?? defaultBroker
    }

    /// `$HANDOFF_LOG_LEVEL`: trace, debug, info, notice, warning, error or critical.
    static func logLevel() throws -> Logger.Level? {
        guard let text = ProcessInfo.processInfo.environment["HANDOFF_LOG_LEVEL"], !text.isEmpty else { return nil }
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ValidationError("HANDOFF_LOG_LEVEL must be one of trace, debug, info, notice, warning, error, critical, not \"\(text)\"")
        }
        return level
    }

    /// `$HANDOFF_LOG_FORMAT`: text or json.
    static func logFormat() throws -> LogFormat? {
        guard let text = ProcessInfo.processInfo.environment["HANDOFF_LOG_FORMAT"], !text.isEmpty else { return nil }
        guard let format = LogFormat(rawValue: text.lowercased()) else {
            throw ValidationError("HANDOFF_LOG_FORMAT must be text or json, not \"\(text)\"")
        }
        return format
    }
}
