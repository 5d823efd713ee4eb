import Foundation
import Handoff
import Logging
import ServiceLifecycle
import UnixSignals
import ZeroMQ

/// A program the end-to-end tests start as a separate process.
///
///     HandoffTestNode broker
///         Runs a broker on ephemeral loopback ports; prints `READY <frontend> <backend>`.
///     HandoffTestNode advertise <frontend> <backend> <interval-ms> <activity-type> <count>
///         Joins the bus through the broker and makes <count> activities current (userInfo:
///         everyKindOfUserInfo); prints `READY <id> ...`.
///
/// Both run until SIGTERM or SIGINT (graceful: activities are withdrawn) or until killed.
@main
struct HandoffTestNode {
    static func main() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .warning
            return handler
        }
        let arguments = Array(CommandLine.arguments.dropFirst())
        let logger = Logger(label: "handoff.test-node")
        switch arguments.first {
        case "broker":
            let context = try Context()
            let broker = try Broker.start(
                Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
            announce("READY \(broker.frontendEndpoint) \(broker.backendEndpoint)")
            let group = ServiceGroup(services: [broker], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            try await group.run()
        case "advertise" where arguments.count == 6:
            let interval = Duration.milliseconds(Int(arguments[3]) ?? 200)
            var configuration = Node.Configuration(
                name: "advertiser-\(getpid())", bus: .broker(frontend: arguments[1], backend: arguments[2]),
                advertiseInterval: interval)
            configuration.lease = interval * 3
            let node = try Node(configuration: configuration)
            var ids: [String] = []
            for index in 0..<(Int(arguments[5]) ?? 1) {
                let activity = try UserActivity(activityType: arguments[4])
                activity.title = "Activity \(index) of \(getpid())"
                activity.userInfo = everyKindOfUserInfo
                activity.requiredUserInfoKeys = ["string"]
                try await activity.becomeCurrent(on: node)
                ids.append(activity.id)
            }
            announce("READY " + ids.joined(separator: " "))
            let group = ServiceGroup(services: [node], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
            try await group.run()
        default:
            FileHandle.standardError.write(Data("usage: HandoffTestNode broker | advertise <frontend> <backend> <interval-ms> <type> <count>\n".utf8))
            exit(2)
        }
    }
}

/// Writes a line to standard output at once (the tests read it through a pipe).
func announce(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
