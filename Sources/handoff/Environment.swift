import ArgumentParser
import Foundation
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
        guard endpoints.count == 2 else {
            throw ValidationError("HANDOFF_BROKER takes two endpoints, the frontend and the backend (e.g. \"tcp://broker:5555 tcp://broker:5556\"), not \"\(text)\"")
        }
        return endpoints
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
}
