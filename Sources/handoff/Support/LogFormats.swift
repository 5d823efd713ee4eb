import ArgumentParser
import Foundation
import Logging
import Synchronization

/// How log lines are written to standard error.
enum LogFormat: String, CaseIterable, ExpressibleByArgument, Sendable {
    /// Plain lines for people (and, under systemd, lines that carry their journal priority).
    case text
    /// One JSON object a line, for log shippers (Vector, Fluent Bit, Loki's promtail…).
    case json
}

/// Logging for every subcommand.
struct LoggingOptions: ParsableArguments {
    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical (or $HANDOFF_LOG_LEVEL). Default: info for the services (broker, agent, advertise), warning for the commands that print what they find (activities, nodes, continue, trace, monitor, top).")
    var logLevel: Logger.Level?
    @Option(help: "Log format: text, or json (one object a line, for log shippers) (or $HANDOFF_LOG_FORMAT). Default: text.")
    var logFormat: LogFormat?

    func validate() throws {
        _ = try Environment.logLevel()
        _ = try Environment.logFormat()
    }

    /// Logs to standard error at the level and in the format of the flags, else the configured
    /// ones (an agent's configuration file), else the environment's, else `defaultLevel` and text.
    /// Text goes to the journal with priorities when standard error is the journal.
    ///
    /// A service logs its life at info by default; a command that prints what it finds passes
    /// `.warning`, so that its output is what it found, not its own node starting and stopping.
    func bootstrap(configuredLevel: Logger.Level? = nil, configuredFormat: LogFormat? = nil, defaultLevel: Logger.Level = .info) {
        let level = logLevel ?? configuredLevel ?? (try? Environment.logLevel()) ?? defaultLevel
        let format = logFormat ?? configuredFormat ?? (try? Environment.logFormat()) ?? .text
        let journal = Systemd.standardErrorIsJournal()
        JSONLogHandler.isActive.store(format == .json, ordering: .relaxed)
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = switch format {
            case .json: JSONLogHandler(label: label)
            case .text where journal: JournalLogHandler(label: label)
            case .text: StreamLogHandler.standardError(label: label)
            }
            handler.logLevel = level
            return handler
        }
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// Log lines as JSON objects, one a line: `time` (RFC 3339, UTC, microseconds), `level`, `logger`
/// (the label), `message`, `source` (the module), and the metadata's keys as `metadata`.
struct JSONLogHandler: LogHandler {
    /// Whether the process logs JSON: then its last words (a command's error) are JSON too.
    static let isActive = Atomic(false)

    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        FileHandle.standardError.write(Data((Self.line(event, label: label, metadata: metadata) + "\n").utf8))
    }

    /// One event as a JSON object, without the newline.
    static func line(_ event: LogEvent, label: String, metadata: Logger.Metadata, at date: Date = Date()) -> String {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        var line = "{\"time\":\(quote(timestamp(date))),\"level\":\(quote(event.level.rawValue)),\"logger\":\(quote(label))"
        line += ",\"message\":\(quote(event.message.description)),\"source\":\(quote(event.source))"
        if !merged.isEmpty { line += ",\"metadata\":" + json(.dictionary(merged)) }
        return line + "}"
    }

    private static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let text): quote(text)
        case .stringConvertible(let value): quote(value.description)
        case .array(let values): "[" + values.map(json).joined(separator: ",") + "]"
        case .dictionary(let entries): "{" + entries.sorted { $0.key < $1.key }.map { quote($0.key) + ":" + json($0.value) }.joined(separator: ",") + "}"
        }
    }

    /// A JSON string literal (RFC 8259: quote, backslash and control characters escaped).
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let control where control.value < 0x20:
                out += "\\u" + String(repeating: "0", count: 4 - String(control.value, radix: 16).count) + String(control.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    private static func timestamp(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let micros = Int((date.timeIntervalSince1970 - Double(seconds)) * 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, micros)
    }
}
