import Foundation
import Glibc
import Handoff
import Testing
import HandoffTestSupport

/// A `handoff broker` or `handoff agent` process of a metrics test, its standard output
/// discarded, its log (errors only, unless `logLevel` says otherwise) in `standardError`.
func startHandoff(
    _ arguments: [String], logLevel: String = "error", standardOutput: FileHandle = .nullDevice, standardError: FileHandle = .nullDevice,
    environment: [String: String] = [:]
) throws -> Process {
    let process = Process()
    process.executableURL = buildFolder.appendingPathComponent("handoff")
    process.arguments = arguments + ["--log-level", logLevel]
    if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    process.standardOutput = standardOutput
    process.standardError = standardError
    try process.spawn()
    return process
}

/// Ends `process` (SIGKILL) if it still runs, and reaps it.
func reap(_ process: Process) {
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
}

/// `/healthz`'s status, or 0 while nothing answers.
func healthStatus(_ port: Int) -> Int {
    (try? httpGet(port: port, path: "/healthz", timeout: .seconds(2)))?.status ?? 0
}

/// Where `promtool` (Debian's `prometheus` package) is, if it is installed.
let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// Whether a missing `promtool` fails the test rather than skipping it: in CI and under
/// `scripts/test`, which install it (scripts/lib.sh), a check that silently skipped would pass
/// without checking anything.
let promtoolRequired = ProcessInfo.processInfo.environment["CI"] != nil
    || ProcessInfo.processInfo.environment["HANDOFF_REQUIRE_PROMTOOL"] == "1"

/// `promtool check metrics` on an exposition: its exit status and what it said.
func promtoolCheck(_ exposition: String) throws -> (status: Int32, output: String) {
    try runPromtool(["check", "metrics"], input: exposition)
}

/// Runs promtool with `arguments` (in `folder`, feeding it `input`): its exit status and what it said.
func runPromtool(_ arguments: [String], input text: String? = nil, in folder: URL? = nil) throws -> (status: Int32, output: String) {
    guard let promtool else { throw ProcessFailure("promtool is not installed (apt-get install prometheus)") }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: promtool)
    process.arguments = arguments
    process.currentDirectoryURL = folder
    let input = Spawning.pipe(), output = Spawning.pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    try process.spawn()
    if let text { input.fileHandleForWriting.write(Data(text.utf8)) }
    try input.fileHandleForWriting.close()
    let said = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: said, as: UTF8.self))
}

@Suite("Metrics and health over HTTP (`--metrics`)", .exclusive, .serialized)
struct MetricsTests {
    @Test("a broker and two agents with --metrics: a continuation and a stream move the scraped counters; /healthz is 200, and 503 while an agent is cut off from the broker")
    func scrapeAndHealth() async throws {
        let ports = try freePorts(2)
        let frontend = ports[0], backend = ports[1]
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let brokerArguments = ["broker", "--frontend", frontend, "--backend", backend]
        var (broker, brokerPort) = try await startServingMetrics(brokerArguments, log: folder.appendingPathComponent("broker.log"))
        defer { reap(broker) }
        func agent(_ name: String) async throws -> (Process, port: Int, control: String) {
            let control = "ipc://\(folder.path)/\(name).sock"
            let (process, port) = try await startServingMetrics([
                "agent", "--name", name, "--broker", frontend, backend, "--plugins", buildFolder.path,
                "--data", folder.appendingPathComponent(name).path, "--control", control],
                log: folder.appendingPathComponent("\(name).log"))
            return (process, port, control)
        }
        let (origin, originPort, originControl) = try await agent("origin")
        defer { origin.terminate(); origin.waitUntilExit() }
        let (continuer, continuerPort, continuerControl) = try await agent("continuer")
        defer { continuer.terminate(); continuer.waitUntilExit() }

        // Healthy once each agent's own presence has come back through the broker.
        for (name, port) in [("broker", brokerPort), ("origin", originPort), ("continuer", continuerPort)] {
            let log = folder.appendingPathComponent("\(name).log")
            #expect(await eventually(within: .seconds(15)) { healthStatus(port) == 200 },
                    "\(name): /healthz never answered 200; its log:\n\((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
        }

        // `handoff health` asks the same endpoint (container health checks use it).
        let healthy = try await runHandoff(["health", "127.0.0.1:\(originPort)", "--json"])
        #expect(healthy.status == 0, "\(healthy.output) \(healthy.error)")
        let report = try JSONSerialization.jsonObject(with: Data(healthy.output.utf8)) as? [String: Any]
        #expect(report?["healthy"] as? Bool == true && report?["status"] as? Int == 200, "\(healthy.output)")
        // The address as a browser shows the page works too; https, or no port, is a clear error.
        for url in ["http://127.0.0.1:\(originPort)", "http://127.0.0.1:\(originPort)/healthz"] {
            let asked = try await runHandoff(["health", url])
            #expect(asked.status == 0, "\(url): \(asked.output) \(asked.error)")
        }
        let secure = try await runHandoff(["health", "https://127.0.0.1:\(originPort)/"])
        #expect(secure.status != 0 && secure.error.contains("plain HTTP"), "\(secure.error)")
        let portless = try await runHandoff(["health", "http://127.0.0.1/healthz"])
        #expect(portless.status != 0 && portless.error.contains("expected HOST:PORT"), "\(portless.error)")

        // A continuation with a stream: the continuer pulls the origin's contact list.
        for name in ["Ada", "Grace", "Edsger"] {
            let added = try await runHandoff(["plugin", "contacts", "add", name, "Test", "+1-555-0100", "\(name)@example.org", "--agent", originControl])
            #expect(added.status == 0, "\(added.error)")
        }
        #expect(try await runHandoff(["plugin", "contacts", "share", "--agent", originControl]).status == 0)
        let continued = try await runHandoff(["continue", "--type", "org.handoff.contacts.list-contacts", "--agent", continuerControl])
        #expect(continued.status == 0, "\(continued.error)")
        #expect(continued.output.contains("continued"), "\(continued.output)")

        let originMetrics = try httpGet(port: originPort, path: "/metrics")
        #expect(originMetrics.status == 200)
        let o = originMetrics.body
        #expect(metricValue(o, #"handoff_node_continuations_answered_total{result="restored"}"#) ?? 0 >= 1, "\(o)")
        #expect(metricValue(o, #"handoff_node_stream_bytes_total{direction="out"}"#) ?? 0 > 0)
        #expect(metricValue(o, #"handoff_node_messages_total{socket="continuation_server",direction="in"}"#) ?? 0 >= 2)
        #expect(metricValue(o, #"handoff_node_messages_total{socket="bus",direction="out"}"#) ?? 0 >= 1)
        #expect(metricValue(o, "handoff_node_current_activities") != nil)

        let c = try httpGet(port: continuerPort, path: "/metrics").body
        #expect(metricValue(c, #"handoff_node_continue_requests_total{result="succeeded"}"#) == 1, "\(c)")
        #expect(metricValue(c, "handoff_node_continue_duration_seconds_count") == 1)
        #expect(metricValue(c, #"handoff_node_snapshot_rounds_total{reason="reconnected"}"#) == 0, "no bus connection came back yet")
        #expect(metricValue(c, #"handoff_node_continue_duration_seconds_bucket{le="+Inf"}"#) == 1)
        #expect(metricValue(c, #"handoff_node_stream_bytes_total{direction="in"}"#) ?? 0 > 0)
        #expect(metricValue(c, #"handoff_node_messages_total{socket="continuation_client",direction="out"}"#) ?? 0 >= 1)

        let b = try httpGet(port: brokerPort, path: "/metrics").body
        #expect(metricValue(b, #"handoff_broker_messages_total{socket="frontend",direction="in"}"#) ?? 0 > 0, "\(b)")
        #expect(metricValue(b, #"handoff_broker_bytes_total{socket="backend",direction="out"}"#) ?? 0 > 0)
        #expect(metricValue(b, #"handoff_broker_subscriptions_total{kind="subscribe"}"#) ?? 0 >= 2)
        #expect(metricValue(b, "handoff_broker_cached_activities") ?? 0 >= 1)
        #expect(metricValue(b, "handoff_broker_snapshots_total") ?? 0 >= 2)
        // A broker of no site still serves the sites' families, at 0, for dashboards to find.
        #expect(metricValue(b, #"handoff_broker_site_messages_total{link="upstream",direction="out"}"#) == 0, "\(b)")
        #expect(metricValue(b, #"handoff_broker_site_dropped_total{reason="returned"}"#) == 0)
        #expect(metricValue(b, #"handoff_broker_readvertise_requests_total{kind="everyone"}"#) == 0)
        #expect(metricValue(b, "handoff_broker_readvertise_lapsed_total") == 0)
        #expect(metricValue(b, "handoff_broker_site_interests_refused_total") == 0)

        // Cut off: the broker dies. The agents say so, and recover when it is back.
        kill(broker.processIdentifier, SIGKILL)
        broker.waitUntilExit()
        #expect(await eventually(within: .seconds(10)) { healthStatus(originPort) == 503 }, "/healthz stayed \(healthStatus(originPort)) without a broker")
        let cutOff = try httpGet(port: originPort, path: "/healthz")
        #expect(cutOff.body.contains("unavailable") && cutOff.body.contains("broker"), "\(cutOff.body)")
        let unhealthy = try await runHandoff(["health", "127.0.0.1:\(originPort)"])
        #expect(unhealthy.status == 1 && unhealthy.output.contains("unavailable"), "\(unhealthy.output)")
        #expect(try await runHandoff(["health", "127.0.0.1:\(brokerPort)"]).status == 1, "a dead broker's endpoint answered")
        reap(broker)
        (broker, brokerPort) = try await startServingMetrics(brokerArguments, log: folder.appendingPathComponent("broker-again.log"))
        #expect(await eventually(within: .seconds(15)) { healthStatus(originPort) == 200 && healthStatus(brokerPort) == 200 }, "/healthz did not recover")
        // The counters went on from where they were: a restarted endpoint is not a reset node.
        let after = try httpGet(port: originPort, path: "/metrics").body
        #expect(metricValue(after, #"handoff_node_continuations_answered_total{result="restored"}"#) ?? 0 >= 1)
        // The continuer follows every type: back on the bus, it asked for its snapshots again.
        #expect(await eventually(within: .seconds(10)) {
            (try? httpGet(port: continuerPort, path: "/metrics").body).flatMap { metricValue($0, #"handoff_node_snapshot_rounds_total{reason="reconnected"}"#) } ?? 0 >= 1
        }, "the continuer counted no round of snapshots after the broker came back")
    }

    @Test(
        "promtool check metrics accepts a broker's and an agent's /metrics (processes): every family has # HELP and # TYPE, with process_* and handoff_build_info",
        .enabled(if: promtool != nil || promtoolRequired, "promtool is not installed (Debian's prometheus package); scripts/test and CI install it and require it"))
    func promtoolAcceptsMetrics() async throws {
        try #require(promtool != nil, "promtool is missing, and this run requires it (CI or HANDOFF_REQUIRE_PROMTOOL=1): apt-get install prometheus")
        let ports = try freePorts(2)
        let frontend = ports[0], backend = ports[1]
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("promtool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (broker, brokerPort) = try await startServingMetrics(
            ["broker", "--frontend", frontend, "--backend", backend], log: folder.appendingPathComponent("broker.log"))
        defer { reap(broker) }
        let (agent, agentPort) = try await startServingMetrics([
            "agent", "--name", "scraped", "--broker", frontend, backend, "--plugins", buildFolder.path,
            "--data", folder.appendingPathComponent("data").path, "--control", "ipc://\(folder.path)/control.sock"],
            log: folder.appendingPathComponent("agent.log"))
        defer { reap(agent) }
        for port in [brokerPort, agentPort] {
            #expect(await eventually(within: .seconds(15)) { healthStatus(port) == 200 }, "port \(port): /healthz never answered 200")
        }

        var exposed: Set<String> = []
        for (what, port, prefix) in [("broker", brokerPort, "handoff_broker_"), ("agent", agentPort, "handoff_node_")] {
            let scrape = try httpGet(port: port, path: "/metrics")
            #expect(scrape.status == 200)
            let checked = try promtoolCheck(scrape.body)
            #expect(checked.status == 0 && checked.output.isEmpty, "promtool on the \(what)'s /metrics (exit \(checked.status)):\n\(checked.output)")
            // Every family of ours has its own words, not the fallback for families nobody described.
            let families = scrape.body.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
            #expect(families.contains { $0.hasPrefix(prefix) })
            for family in families {
                #expect(scrape.body.contains("# HELP \(family) "), "\(what): \(family) has no # HELP")
            }
            #expect(!scrape.body.contains("no description in this build"), "\(what): a family without help text in MetricHelp")
            let version = "version=\"\(HandoffVersion.release)\",wire=\"\(HandoffVersion.wire)\",abi=\"\(HandoffVersion.abi)\",libzmq=\"\(HandoffVersion.libzmq)\""
            #expect(metricValue(scrape.body, "handoff_build_info{\(version)}") == 1, "\(what): \(scrape.body)")
            #expect(metricValue(scrape.body, "process_cpu_seconds_total") ?? 0 > 0)
            #expect(metricValue(scrape.body, "process_resident_memory_bytes") ?? 0 > 1_000_000)
            #expect(metricValue(scrape.body, "process_virtual_memory_bytes") ?? 0 > 1_000_000)
            #expect(metricValue(scrape.body, "process_open_fds") ?? 0 >= 3)
            #expect(metricValue(scrape.body, "process_max_fds") ?? 0 >= metricValue(scrape.body, "process_open_fds") ?? .infinity)
            let started = metricValue(scrape.body, "process_start_time_seconds") ?? 0
            #expect(abs(started - Date().timeIntervalSince1970) < 120, "\(what) started at \(started)")
            exposed.formUnion(families.map(String.init))
        }
        // What deploy/monitoring's dashboard and alert rules query is what a broker and an agent serve.
        let queried = try MonitoringFiles.queriedFamilies()
        #expect(queried.count >= 20)
        #expect(queried.subtracting(exposed).isEmpty, "queried but served by neither: \(queried.subtracting(exposed).sorted())")
    }
}
