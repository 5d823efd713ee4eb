import ArgumentParser
import Foundation
import Handoff
import Logging
import ZeroMQ

/// `handoff top`: the live page in the terminal (like `nats-top`): the nodes on the bus with
/// their traffic, the activities by type, the streams in flight, refreshed every second.
struct TopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "top",
        abstract: "Watch the bus as a table refreshed every second: nodes and their traffic, activities by type, streams.",
        discussion: """
            Watches a broker's backend itself (as `monitor` does), or reads a live page with --from \
            (a broker's or agent's --metrics address; that adds the process's refusals). Keys: 1-9 \
            sort by that column (again: reverse), q quits.
            """)

    @Option(help: "The broker's backend to watch (default: the backend of --broker, else of $HANDOFF_BROKER, else tcp://127.0.0.1:5556).")
    var bus: String?
    @Option(name: .customLong("broker"), parsing: .upToNextOption,
            help: ArgumentHelp("The broker's frontend and backend, as every other command names it (or $HANDOFF_BROKER).", valueName: "frontend backend"))
    var broker: [String] = []
    @Option(help: ArgumentHelp("Read the live page of a broker or agent started with --metrics HOST:PORT (HOST:PORT, or the page's URL) instead of watching the bus.", valueName: "host:port"))
    var from: String?
    @Option(help: "Sort the nodes by: \(TopTable.Column.allCases.map(\.rawValue).joined(separator: ", ")).")
    var sort: TopTable.Column = .name
    @Flag(help: "Print one snapshot as JSON (after --wait) and exit.") var json = false
    @Option(help: "With --json, or the first screen: how long to listen first, in seconds (a node says it is there every 2 s).")
    var wait: Double = 2.5
    @Option(help: "Stop after this many screens.") var count: Int?
    @OptionGroup var security: SecurityOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard count.map({ $0 > 0 }) ?? true else { throw ValidationError("--count takes a positive number") }
        guard wait >= 0 else { throw ValidationError("--wait takes a number of seconds, 0 or more") }
        if let from { _ = try MetricsOptions.parseServed(from) }
        guard from == nil || (bus == nil && broker.isEmpty) else { throw ValidationError("give --from or the bus (--bus, --broker), not both") }
    }

    func run() async throws {
        logging.bootstrap(defaultLevel: .warning)
        let source = try TopSource(self)
        defer { Task { await source.stop() } }
        // Start watching now (a page's view starts when first asked too): the first screen then
        // shows what a presence interval brought, not an empty bus.
        _ = try await source.snapshot()
        if json {
            try await Task.sleep(for: .milliseconds(Int(wait * 1000)))
            let snapshot = try await source.snapshot()
            announce(String(decoding: try LivePage.encoder.encode(snapshot), as: UTF8.self))
            return
        }
        var table = TopTable(sort: sort)
        let keys = TerminalKeys()
        defer { keys.restore() }
        var screens = 0
        let firstScreen = ContinuousClock.now + .milliseconds(Int(min(wait, 2.5) * 1000))
        while count.map({ screens < $0 }) ?? true {
            for key in keys.read() {
                if key == "q" { return }
                table.press(key)
            }
            if ContinuousClock.now >= firstScreen || screens > 0 {
                let snapshot = try await source.snapshot()
                // On a terminal, what fits its width; to a file or a pipe, every cell whole.
                let width = keys.isTerminal ? TerminalKeys.width : .max
                FileHandle.standardOutput.write(Data(table.render(snapshot, width: width, interactive: keys.isTerminal).utf8))
                screens += 1
            }
            try await Task.sleep(for: .milliseconds(ContinuousClock.now >= firstScreen ? 1000 : 100))
        }
    }
}

/// Where `top` takes its snapshots: its own watch of the bus, or a live page's `/view.json`.
enum TopSource {
    case bus(BusObserver)
    case page(host: String, port: Int)

    init(_ command: TopCommand) throws {
        if let from = command.from {
            let (host, port) = try MetricsOptions.parseServed(from)
            self = .page(host: host == "0.0.0.0" ? "127.0.0.1" : host, port: port)
            return
        }
        let bus = try WatchedBus(bus: command.bus, broker: command.broker, security: command.security, what: "watch it")
        self = .bus(BusObserver(BusObserver.Settings(endpoint: bus.endpoint, curve: bus.curve, source: "top on \(bus.endpoint)"), context: try Context()))
    }

    func snapshot() async throws -> BusViewSnapshot {
        switch self {
        case .bus(let observer):
            return await observer.snapshot()
        case .page(let host, let port):
            let answer = try HealthProbe.get(host: host, port: port, path: "/view.json", timeout: 5)
            guard answer.status == 200 else {
                throw HandoffError(.connectionUnavailable, "http://\(host):\(port)/view.json answered \(answer.status): \(answer.body.prefix(300))")
            }
            return try JSONDecoder().decode(BusViewSnapshot.self, from: Data(answer.body.utf8))
        }
    }

    func stop() async {
        if case .bus(let observer) = self { await observer.stop() }
    }
}
