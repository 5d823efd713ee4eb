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
        let nodes = sorted(view.nodes)
        let titles = Column.allCases.enumerated().map { index, column in
            "\(index + 1)·" + column.title + (column == sort ? (descending ? "↓" : "↑") : "")
        }
        let rows = nodes.map { node in
            [
                node.name, node.host, "\(node.activities)\(node.partial ? "+" : "")",
                Self.figure(node.traffic?.messagesInPerSecond), Self.figure(node.traffic?.messagesOutPerSecond),
                Self.figure(node.traffic.map { Double($0.bytesIn) }), Self.figure(node.traffic.map { Double($0.bytesOut) }),
                Self.figure(Double(node.publishedMessages)),
                node.gone ? "gone" : String(format: "%.1f s", node.lastHeardSecondsAgo),
            ]
        }
        let widths = Self.columnWidths(titles: titles, rows: rows, textColumns: [0, 1], fitting: width)
        func line(_ cells: [String]) -> String {
            zip(cells, widths).enumerated().map { index, cell in
                index < 2 ? Self.pad(cell.0, cell.1) : Self.padLeft(cell.0, cell.1)
            }.joined(separator: "  ")
        }
        lines.append(line(titles))
        for row in rows { lines.append(line(row)) }
        if view.nodes.isEmpty { lines.append("(no node heard yet: each says it is there every 2 s)") }
        if !view.types.isEmpty {
            lines.append("")
            // As wide as the longest type, less what a narrow terminal lacks (CURRENT and NODES take 18).
            let longest = view.types.reduce(4) { max($0, $1.type.count) }
            let typeWidth = min(longest, max(12, width - 18))
            lines.append(Self.pad("TYPE", typeWidth) + Self.padLeft("CURRENT", 10) + Self.padLeft("NODES", 8))
            for type in view.types { lines.append(Self.pad(type.type, typeWidth) + Self.padLeft("\(type.activities)", 10) + Self.padLeft("\(type.nodes)", 8)) }
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

    /// Each column as wide as its title and its longest cell. When the row would not fit in
    /// `width`, the text columns (names, hosts, types) give up room, the widest first, down to
    /// `minimumText` each; a cell cut short then reads "…" in its middle (``shortened(_:to:)``).
    static func columnWidths(titles: [String], rows: [[String]], textColumns: [Int], fitting width: Int, minimumText: Int = 12) -> [Int] {
        var widths = titles.enumerated().map { index, title in rows.reduce(title.count) { max($0, $1[index].count) } }
        var excess = widths.reduce(2 * (widths.count - 1), +) - width
        while excess > 0 {
            guard let widest = textColumns.filter({ widths[$0] > max(minimumText, titles[$0].count) }).max(by: { widths[$0] < widths[$1] }) else { break }
            widths[widest] -= 1
            excess -= 1
        }
        return widths
    }

    /// `text` left-aligned in `width` columns, cut short in the middle (``shortened(_:to:)``).
    static func pad(_ text: String, _ width: Int) -> String {
        text.count > width ? shortened(text, to: width) : text + String(repeating: " ", count: width - text.count)
    }

    /// `text` right-aligned in `width` columns, cut short in the middle (``shortened(_:to:)``).
    static func padLeft(_ text: String, _ width: Int) -> String {
        text.count > width ? shortened(text, to: width) : String(repeating: " ", count: width - text.count) + text
    }

    /// `text` in `width` characters, its middle replaced by "…": names alike in their start
    /// (site-b-agent-host-01, site-b-agent-host-02) differ at their end, which stays.
    static func shortened(_ text: String, to width: Int) -> String {
        guard width > 1 else { return String(text.prefix(width)) }
        let tail = (width - 1) / 2
        return String(text.prefix(width - 1 - tail)) + "…" + String(text.suffix(tail))
    }
}
