import Foundation
import Glibc
import Testing

/// Starts a `handoff broker` or `handoff agent` serving `--metrics` on a port the kernel picks
/// when it binds (`127.0.0.1:0`), and returns it with that port, read from its log line
/// "metrics at http://HOST:PORT/metrics". A port found free beforehand can be
/// taken by another process's ephemeral bind before the process binds it, and the process then
/// exits at start: in one CI run an agent did, and its test waited for it until it timed out.
/// The log (`logLevel`, at least `info` for the line) stays in `log` for the test to read.
func startServingMetrics(
    _ arguments: [String], log: URL, logLevel: String = "info", environment: [String: String] = [:]
) async throws -> (process: Process, port: Int) {
    _ = FileManager.default.createFile(atPath: log.path, contents: nil)
    let process = try startHandoff(
        arguments + ["--metrics", "127.0.0.1:0"], logLevel: logLevel, standardError: try FileHandle(forWritingTo: log), environment: environment)
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline {
        let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        if let port = servedMetricsPort(said) { return (process, port) }
        if !process.isRunning {
            throw ProcessFailure("handoff \(arguments.joined(separator: " ")) exited (status \(process.terminationStatus)) before serving metrics; its log:\n\(said)")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    reap(process)
    let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
    throw ProcessFailure("handoff \(arguments.joined(separator: " ")) did not serve metrics within 20 s; its log:\n\(said)")
}

/// The port in a log's "metrics at http://HOST:PORT/metrics" line, if it has one.
func servedMetricsPort(_ log: String) -> Int? {
    guard let line = log.split(separator: "\n").first(where: { $0.contains("metrics at http://") }),
          let url = line.range(of: "metrics at http://"),
          let end = line[url.upperBound...].range(of: "/metrics") else { return nil }
    let address = line[url.upperBound..<end.lowerBound]
    guard let colon = address.lastIndex(of: ":") else { return nil }
    return Int(address[address.index(after: colon)...])
}

/// A broker and agents in processes of their own, each serving `--metrics` on a port it picked:
/// what the tests of operators' tools (the live page, Prometheus, `trace`) run against. Each
/// agent hosts the built plugins (contacts among them) and has a control socket in `folder`.
struct ServedDeployment {
    struct Agent {
        let process: Process
        let port: Int
        let control: String
    }

    let folder: URL
    let frontend: String
    let backend: String
    let broker: Process
    let brokerPort: Int
    let agents: [String: Agent]

    /// - Parameter environments: Variables for some agents' processes (a `DISPLAY`), by name.
    static func start(
        agents names: [String], brokerArguments: [String] = [], environments: [String: [String: String]] = [:]
    ) async throws -> ServedDeployment {
        let ports = try freePorts(2)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("deployment-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var started: [Process] = []
        do {
            let (broker, brokerPort) = try await startServingMetrics(
                ["broker", "--frontend", ports[0], "--backend", ports[1]] + brokerArguments, log: folder.appendingPathComponent("broker.log"))
            started.append(broker)
            var agents: [String: Agent] = [:]
            for name in names {
                let control = "ipc://\(folder.path)/\(name).sock"
                let (process, port) = try await startServingMetrics([
                    "agent", "--name", name, "--broker", ports[0], ports[1], "--plugins", buildFolder.path,
                    "--data", folder.appendingPathComponent(name).path, "--control", control],
                    log: folder.appendingPathComponent("\(name).log"),
                    // No desktop's clipboard (a developer's $DISPLAY) unless a test gives one.
                    environment: ["HANDOFF_CLIPBOARD_DISPLAY": "", "HANDOFF_CLIPBOARD_WAYLAND_DISPLAY": ""].merging(environments[name] ?? [:]) { $1 })
                started.append(process)
                agents[name] = Agent(process: process, port: port, control: control)
            }
            return ServedDeployment(folder: folder, frontend: ports[0], backend: ports[1], broker: broker, brokerPort: brokerPort, agents: agents)
        } catch {
            for process in started { reap(process) }
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
    }

    func agent(_ name: String) -> Agent { agents[name]! }

    /// A process's log so far (an agent's name, or "broker").
    func log(_ name: String) -> String {
        (try? String(contentsOf: folder.appendingPathComponent("\(name).log"), encoding: .utf8)) ?? ""
    }

    /// The last `lines` lines of a process's log: for a failure's message, since the folder goes
    /// with ``stop()``.
    func logTail(_ name: String, lines: Int = 40) -> String {
        log(name).split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// The subscriptions the broker's backend has seen (it is verbose: duplicates too), from its
    /// `/metrics`; `nil` when the page has no such sample.
    func brokerSubscriptions() throws -> Double? {
        metricValue(try httpGet(port: brokerPort, path: "/metrics").body, #"handoff_broker_subscriptions_total{kind="subscribe"}"#)
    }

    /// Ends every process (SIGKILL where still running), reaps it, and removes the folder.
    func stop() {
        for agent in agents.values { reap(agent.process) }
        reap(broker)
        try? FileManager.default.removeItem(at: folder)
    }

    /// Whether every agent is on the bus (`/healthz` 200), within `timeout`.
    func untilHealthy(within timeout: Duration = .seconds(15)) async -> Bool {
        await eventually(within: timeout) { agents.values.allSatisfy { healthStatus($0.port) == 200 } }
    }

    /// The contacts story's first steps: `names` added on `origin`, and its list shared.
    func shareContacts(_ names: [String], on origin: String) async throws {
        for name in names {
            let added = try await runHandoff(["plugin", "contacts", "add", name, "Test", "+1-555-0100", "\(name)@example.org", "--agent", agent(origin).control])
            #expect(added.status == 0, "\(added.error)")
        }
        let shared = try await runHandoff(["plugin", "contacts", "share", "--agent", agent(origin).control])
        #expect(shared.status == 0, "\(shared.error)")
    }
}
