import Foundation
import Handoff
import HandoffWire

/// One hop of a trace as `handoff trace` and `handoff continue --trace` print it: who, what, and
/// its time relative to the trace's start (on each party's clock).
struct TraceHopLine: Encodable {
    let node: String
    let nodeID: String
    let hop: String
    let milliseconds: Double
    let detail: String

    init(node: String, nodeID: String, hop: String, at date: Date, since start: Date, detail: String) {
        self.node = node
        self.nodeID = nodeID
        self.hop = hop
        milliseconds = (date.timeIntervalSince(start) * 1_000_000).rounded() / 1_000
        self.detail = detail
    }

    /// A hop a party reported on the bus.
    init(_ sender: WireNodeRef, _ hop: WireTraceHop, since start: Date) {
        self.init(node: sender.name, nodeID: sender.nodeID, hop: Self.name(hop.kind), at: hop.at.date, since: start, detail: hop.detail)
    }

    static func name(_ kind: WireTraceHop.Kind) -> String {
        switch kind {
        case .sent: "sent"
        case .brokerReceived: "broker received"
        case .brokerCached: "broker cached"
        case .brokerForwarded: "broker forwarded"
        case .received: "received"
        case .delivered: "delivered"
        case .notDelivered: "not delivered"
        case .continueReceived: "continue received"
        case .continueAnswered: "continue answered"
        case .streamOpened: "stream opened"
        case .streamEnded: "stream ended"
        default: "hop"
        }
    }

    /// Prints `lines` (under their header), in columns as wide as their longest entry (a node's
    /// name is never cut).
    static func announce(_ lines: [TraceHopLine]) {
        for line in format(lines) { handoff.announce(line) }
    }

    /// The lines ``announce(_:)`` prints.
    static func format(_ lines: [TraceHopLine]) -> [String] {
        let nodeWidth = max(16, lines.map(\.node.count).max() ?? 0)
        let text = lines.map { line in
            let time = String(format: "%9.3f ms", line.milliseconds)
            return "  \(time)  \(line.node.padding(toLength: nodeWidth, withPad: " ", startingAt: 0))  \(line.hop.padding(toLength: 17, withPad: " ", startingAt: 0))  \(line.detail)"
        }
        return text.isEmpty ? ["  (no hop reported)"] : text
    }
}
