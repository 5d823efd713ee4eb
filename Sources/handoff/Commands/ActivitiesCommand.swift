import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// `handoff activities`: what is current on the bus.
struct ActivitiesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activities", abstract: "List the activities current on the bus.")
    @OptionGroup var bus: BusOptions
    @Option(help: "Only types with this prefix.") var type: String?
    @Option(help: "Only activities with this search keyword (repeatable: any of them).") var keyword: [String] = []
    @Option(help: "How long to wait for the bus's snapshot, in seconds (it comes at once from a running broker).") var wait: Double = 3
    @Flag(help: "One JSON object a line (id, type, title, node, nodeID, version, streams; keywords, webpageURL, expires and teamID when set).") var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        logging.bootstrap(defaultLevel: .warning)
        let configuration = try bus.configuration(name: "handoff-activities", subscriptions: [type ?? ""])
        let activities = try await Node.withRunning(configuration) { node in
            // The snapshot is the whole answer: what was current when the node joined.
            let synchronized = await node.untilSynchronized(timeout: .milliseconds(Int(wait * 1000)))
            if let refusal = await node.busRefusal { throw refusal }
            guard synchronized else {
                let reason = switch configuration.bus {
                case .broker, .brokers: "no broker answered at \((configuration.bus.brokerEndpoints ?? []).map(\.backend).joined(separator: " or ")) within \(wait) s: is it running, and reachable from here?"
                case .direct: "not every peer answered within \(wait) s: is each of them running, and reachable from here?"
                }
                throw HandoffError(.connectionUnavailable, reason)
            }
            return await node.activities(matching: ActivityFilter(keywords: keyword.isEmpty ? nil : Set(keyword)))
        }
        for activity in activities {
            let line = ActivityLine(activity)
            announce(json ? jsonLine(line) : line.text)
        }
        if activities.isEmpty && !json { announce("no activities on the bus") }
    }
}

/// `activities --json`: one current activity (what its advertisement says; a field not set is left out).
private struct ActivityLine: Encodable {
    let id: String
    let type: String
    let title: String
    let node: String
    let nodeID: String
    let version: UInt64
    let streams: Bool
    let keywords: [String]?
    let webpageURL: String?
    /// ISO 8601.
    let expires: String?
    let teamID: String?

    init(_ activity: DiscoveredActivity) {
        id = activity.id
        type = activity.activityType
        title = activity.title
        node = activity.origin.name
        nodeID = activity.origin.id
        version = activity.version
        streams = activity.supportsContinuationStreams
        keywords = activity.keywords.isEmpty ? nil : activity.keywords.sorted()
        webpageURL = activity.webpageURL?.absoluteString
        expires = activity.expirationDate?.formatted(JSONValue.dateFormat)
        teamID = activity.teamID
    }

    /// The same for people: one line, what is set at its end.
    var text: String {
        var text = "\(id)  \(type)  \"\(title)\"  from \(node)  v\(version)"
        if let keywords { text += "  keywords: " + keywords.joined(separator: ", ") }
        if let webpageURL { text += "  \(webpageURL)" }
        if let expires { text += "  expires \(expires)" }
        return text
    }
}
