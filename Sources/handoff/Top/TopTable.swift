import ArgumentParser
import Foundation
import Handoff

/// What `handoff top` draws: a header of bus-wide figures, the nodes sorted by a column, the
/// activities by type, the streams in flight, the refusals.
struct TopTable {
    /// The node table's columns, in order; `1`…`9` sort by the column of that number.
    enum Column: String, CaseIterable, ExpressibleByArgument {
        case name, host, activities, `in`, out, bytesIn = "bytes-in", bytesOut = "bytes-out", published, heard

        var title: String {
            switch self {
            case .name: "NODE"
            case .host: "HOST"
            case .activities: "ACTS"
            case .in: "MSG/S IN"
            case .out: "MSG/S OUT"
            case .bytesIn: "BYTES IN"
            case .bytesOut: "BYTES OUT"
            case .published: "PUBLISHED"
            case .heard: "HEARD"
            }
        }

        /// Text columns sort up, figures down (the busiest first).
        var descendingFirst: Bool { self != .name && self != .host && self != .heard }
    }

    var sort: Column
    var descending: Bool

    init(sort: Column) {
        self.sort = sort
        descending = sort.descendingFirst
    }

    /// A key pressed: a column's number sorts by it (again: the other way).
    mutating func press(_ key: Character) {
        guard let number = key.wholeNumberValue, number >= 1, number <= Column.allCases.count else { return }
        let column = Column.allCases[number - 1]
        if column == sort { descending.toggle() } else { (sort, descending) = (column, column.descendingFirst) }
    }

    func sorted(_ nodes: [BusViewSnapshot.Node]) -> [BusViewSnapshot.Node] {
        func less(_ a: BusViewSnapshot.Node, _ b: BusViewSnapshot.Node) -> Bool {
            switch sort {
            case .name: (a.name, a.id) < (b.name, b.id)
            case .host: (a.host, a.name) < (b.host, b.name)
            case .activities: a.activities < b.activities
            case .in: (a.traffic?.messagesInPerSecond ?? -1) < (b.traffic?.messagesInPerSecond ?? -1)
            case .out: (a.traffic?.messagesOutPerSecond ?? -1) < (b.traffic?.messagesOutPerSecond ?? -1)
            case .bytesIn: (a.traffic?.bytesIn ?? 0) < (b.traffic?.bytesIn ?? 0)
            case .bytesOut: (a.traffic?.bytesOut ?? 0) < (b.traffic?.bytesOut ?? 0)
            case .published: a.publishedMessages < b.publishedMessages
            case .heard: a.lastHeardSecondsAgo < b.lastHeardSecondsAgo
            }
        }
        return nodes.sorted { descending ? less($1, $0) : less($0, $1) }
    }

    /// The screen: on a terminal, cleared first (ANSI), at most `width` columns.
    func render(_ view: BusViewSnapshot, width: Int, interactive: Bool) -> String {
        var lines: [String] = []
        let live = view.nodes.filter { !$0.gone }.count
        let activities = view.types.reduce(0) { $0 + $1.activities }
        lines.append("handoff top — \(view.source)   \(Self.figure(view.messagesPerSecond)) msg/s  \(Self.figure(view.bytesPerSecond)) B/s   \(live) nodes  \(activities) activities  \(view.continuations) continued  \(view.malformed) malformed" + (view.overflow > 0 ? "  \(view.overflow) over the view's bounds" : ""))
        lines.append("")
        let header = Column.allCases.enumerated().map { index, column in
            let title = "\(index + 1)·" + column.title + (column == sort ? (descending ? "↓" : "↑") : "")
            return column == .name || column == .host ? Self.pad(title, 20) : Self.padLeft(title, 12)
        }
        lines.append(header.joined(separator: " "))
        for node in sorted(view.nodes) {
            let row = [
                Self.pad(node.name, 20), Self.pad(node.host, 20), Self.padLeft("\(node.activities)\(node.partial ? "+" : "")", 12),
                Self.padLeft(Self.figure(node.traffic?.messagesInPerSecond), 12), Self.padLeft(Self.figure(node.traffic?.messagesOutPerSecond), 12),
                Self.padLeft(Self.figure(node.traffic.map { Double($0.bytesIn) }), 12), Self.padLeft(Self.figure(node.traffic.map { Double($0.bytesOut) }), 12),
                Self.padLeft(Self.figure(Double(node.publishedMessages)), 12),
                Self.padLeft(node.gone ? "gone" : String(format: "%.1f s", node.lastHeardSecondsAgo), 12),
            ]
            lines.append(row.joined(separator: " "))
        }
        if view.nodes.isEmpty { lines.append("(no node heard yet: each says it is there every 2 s)") }
        if !view.types.isEmpty {
            lines.append("")
            lines.append(Self.pad("TYPE", 44) + Self.padLeft("CURRENT", 10) + Self.padLeft("NODES", 8))
            for type in view.types { lines.append(Self.pad(type.type, 44) + Self.padLeft("\(type.activities)", 10) + Self.padLeft("\(type.nodes)", 8)) }
        }
        if !view.streams.isEmpty {
            lines.append("")
            lines.append("STREAMS")
            for stream in view.streams {
                let done = max(stream.sent, stream.received)
                let progress = stream.expected > 0 ? String(format: "%3.0f %%", 100 * Double(done) / Double(stream.expected)) : Self.figure(Double(done)) + " B"
                lines.append("  \(stream.node) → \(stream.peer)  \(stream.type) #\(stream.id)  \(progress)  \(stream.state.rawValue)\(stream.detail.isEmpty ? "" : " (\(stream.detail))")")
            }
        }
        let refusals = view.refusals.filter { $0.value > 0 }.sorted { $0.value > $1.value }
        if !refusals.isEmpty {
            lines.append("")
            lines.append("REFUSALS  " + refusals.map { "\($0.key) \($0.value)" }.joined(separator: "  "))
        }
        if interactive { lines.append(""); lines.append("1-9 sort, again to reverse; q quits") }
        let clipped = lines.map { $0.count > width ? String($0.prefix(width)) : $0 }
        return (interactive ? "\u{1B}[H\u{1B}[2J" : "") + clipped.joined(separator: "\n") + "\n" + (interactive ? "" : "\n")
    }

    static func figure(_ value: Double?) -> String {
        guard let value else { return "–" }
        switch value {
        case 1e9...: return String(format: "%.1fG", value / 1e9)
        case 1e6...: return String(format: "%.1fM", value / 1e6)
        case 1e4...: return String(format: "%.1fk", value / 1e3)
        case _ where value == value.rounded(): return String(Int(value))
        default: return String(format: "%.1f", value)
        }
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? String(text.prefix(width)) : text + String(repeating: " ", count: width - text.count)
    }

    static func padLeft(_ text: String, _ width: Int) -> String {
        text.count >= width ? String(text.prefix(width)) : String(repeating: " ", count: width - text.count) + text
    }
}
