import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// `handoff nodes`: the nodes on the bus, as their presence describes them.
struct NodesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nodes", abstract: "List the nodes on the bus (by their presence).")
    @OptionGroup var bus: BusOptions
    @Option(help: "How long to listen, in seconds: a node says it is there once every advertise interval (2 s by default).")
    var wait: Double = 2.5
    @Flag(help: "One JSON object a line.") var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        logging.bootstrap(defaultLevel: .warning)
        // Presence only: no activity prefix to follow.
        let configuration = try bus.configuration(name: "handoff-nodes", subscriptions: [])
        let nodes = try await Node.withRunning(configuration) { node in
            try await Task.sleep(for: .milliseconds(Int(wait * 1000)))
            if let refusal = await node.busRefusal { throw refusal }
            return await node.nodes()
        }
        for node in nodes {
            let ago = max(0, Date().timeIntervalSince(node.lastHeard))
            if json {
                announce(jsonLine(NodeLine(
                    id: node.info.id, name: node.info.name, host: node.info.host, activities: node.activityCount,
                    partial: node.listIsPartial, continuation: node.continueEndpoint,
                    lastHeardSecondsAgo: (ago * 10).rounded() / 10, key: node.info.publicKey?.z85 ?? "")))
            } else {
                let count = "\(node.activityCount)\(node.listIsPartial ? "+" : "") activit\(node.activityCount == 1 ? "y" : "ies")"
                announce("\(node.info.name)  on \(node.info.host)  \(count)  heard \(String(format: "%.1f", ago)) s ago  \(node.info.id)  \(node.continueEndpoint)")
            }
        }
        if nodes.isEmpty && !json { announce("no nodes heard on the bus within \(wait) s") }
    }
}

/// `nodes --json`: one node on the bus.
private struct NodeLine: Encodable {
    let id: String
    let name: String
    let host: String
    let activities: Int
    let partial: Bool
    let continuation: String
    let lastHeardSecondsAgo: Double
    let key: String
}
