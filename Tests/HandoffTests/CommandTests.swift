import Foundation
import Handoff
import Synchronization
import Testing
import ZeroMQ
import HandoffTestSupport

/// Runs the built `handoff` binary to completion; returns exit status, standard output and error.
func runHandoff(
    _ arguments: [String], environment: [String: String] = [:], timeout: Duration = .seconds(60)
) async throws -> (status: Int32, output: String, error: String) {
    let process = Process()
    process.executableURL = buildFolder.appendingPathComponent("handoff")
    process.arguments = arguments
    // It ends with the test process (ParentWatch), whatever ends that.
    process.environment = ProcessInfo.processInfo.environment.merging([ParentWatch.variable: "1"]) { $1 }.merging(environment) { $1 }
    let output = Spawning.pipe(), error = Spawning.pipe()
    process.standardOutput = output
    process.standardError = error
    try process.spawn()
    // Reaped however this returns: a timeout, or a cancelled sleep.
    defer { reap(process) }
    let deadline = ContinuousClock.now + timeout
    while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
    if process.isRunning {
        throw ProcessFailure("handoff \(arguments.joined(separator: " ")) did not finish within \(timeout)")
    }
    let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let err = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    return (process.terminationStatus, out, err)
}

/// How many `handoff agent` and `handoff broker` processes on this machine name `endpoint` in their
/// arguments (a test's own: scripts/test runs other scenarios' brokers and agents beside the suite),
/// read from /proc (no `ps` needed: a missing one read as none would let a leak pass).
func handoffProcesses(naming endpoint: String) -> Int {
    let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    precondition(!pids.isEmpty, "/proc is not readable")
    return pids.filter { $0.allSatisfy(\.isNumber) }.count { pid in
        guard let bytes = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
        let command = bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
        return (command.contains("/handoff agent") || command.contains("/handoff broker")) && command.contains(endpoint)
    }
}

@Suite("The handoff command", .exclusive)
struct CommandTests {
    @Test("`handoff demo` plays the contacts story end to end, exits 0 and leaves no process behind; `monitor --json` sees its traffic")
    func demoAndMonitor() async throws {
        let ports = try freePorts(2)
        let frontend = ports[0], backend = ports[1]
        // The demo runs secure: the monitor joins its account with a key of its own, made beside the
        // broker's key that the demo will then use.
        let keys = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-demo-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: keys) }
        for name in ["broker", "monitor"] {
            let made = try await runHandoff(["keygen", name, "--out", keys.path])
            #expect(made.status == 0, "keygen \(name): \(made.error)")
        }
        let monitor = Process()
        monitor.executableURL = buildFolder.appendingPathComponent("handoff")
        monitor.arguments = ["monitor", "--bus", backend, "--json", "--seconds", "60", "--key", keys.appendingPathComponent("monitor.key").path]
        let monitorOutput = Spawning.pipe()
        monitor.standardOutput = monitorOutput
        try monitor.spawn()
        // Stopped once the demo has ended (it sees the demo's last withdrawals, however long the demo
        // takes on a loaded machine), and reaped whatever happens below.
        defer { reap(monitor) }
        try await Task.sleep(for: .milliseconds(200))

        let demo = try await runHandoff(["demo", "--frontend", frontend, "--backend", backend, "--keys", keys.path])
        #expect(demo.output.contains("security: CURVE on every socket"))
        #expect(demo.status == 0, "demo failed: \(demo.output)\n\(demo.error)")
        for step in ["node-b continued \"Editing Ada Lovelace\"", "node-b's draft is now:", "node-a shows its list:",
                     "node-b's list now equals node-a's (3 contacts)", "node-b continued \"Viewing Grace Hopper\"", "demo complete"] {
            #expect(demo.output.contains(step), "missing: \(step)\n\(demo.output)")
        }
        #expect(await eventually(within: .seconds(10)) { handoffProcesses(naming: backend) == 0 }, "the demo left agents or a broker running")

        monitor.interrupt()
        monitor.waitUntilExit()
        let events = String(decoding: monitorOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let advertised = Set(events.filter { $0["event"] as? String == "advertisement" }.compactMap { $0["type"] as? String })
        #expect(advertised.isSuperset(of: ["org.handoff.contacts.edit-contact", "org.handoff.contacts.list-contacts", "org.handoff.contacts.view-contact"]),
                "monitor saw \(advertised)")
        #expect(events.contains { $0["event"] as? String == "withdrawal" && $0["reason"] as? String == "nodeShutdown" })
        #expect(events.allSatisfy { $0["node"] == nil || ["node-a", "node-b"].contains($0["node"] as? String) })
        // Continuations and streams are reported too: node-a answered three continue requests from
        // node-b, and the contact list's stream opened and finished on both sides.
        let continued = events.filter { $0["event"] as? String == "continued" }
        #expect(continued.count == 3)
        #expect(continued.allSatisfy { $0["node"] as? String == "node-a" && $0["peer"] as? String == "node-b" })
        for kind in ["stream-opened", "stream-finished"] {
            let nodes = Set(events.filter { $0["event"] as? String == kind && $0["type"] as? String == "org.handoff.contacts.list-contacts" }
                .compactMap { $0["node"] as? String })
            #expect(nodes == ["node-a", "node-b"], "\(kind) reported by \(nodes)")
        }
        let finishedOnB = events.first { $0["event"] as? String == "stream-finished" && $0["node"] as? String == "node-b" }
        #expect((finishedOnB?["received"] as? Int ?? 0) > 0)
    }

    @Test("`handoff continue` of an unknown id fails with a clear message and a non-zero exit")
    func continueUnknown() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let result = try await runHandoff(["continue", "--id", "no-such-activity", "--broker", frontend, backend, "--wait", "0.3", "--log-level", "error"])
        #expect(result.status != 0)
        // The code first, as for every error of the command (HandoffError's one shape).
        #expect(result.error.contains("activity not found: no activity with id no-such-activity is on the bus"), "stderr: \(result.error)")
        _ = broker
    }

    @Test("`handoff activities` and `handoff monitor` with a key outside the account, or none, fail with a clear message")
    func strangerKeyIsReported() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-stranger-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let brokerKeys = try KeyFile.generate(name: "broker", in: folder.appendingPathComponent("account"))
        let stranger = try KeyFile.generate(name: "stranger", in: folder.appendingPathComponent("elsewhere"))
        var configuration = Broker.Configuration(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*")
        configuration.security = Security(keyPair: brokerKeys.keyPair, authorizedKeys: [brokerKeys.keyPair.publicKey])
        let broker = try Broker.start(configuration, context: try Context())
        let keyArguments = ["--key", stranger.secret.path, "--broker-key", brokerKeys.public.path, "--log-level", "critical"]

        let listed = try await runHandoff(["activities", "--broker", broker.frontendEndpoint, broker.backendEndpoint, "--wait", "1"] + keyArguments)
        #expect(listed.status != 0)
        #expect(listed.error.contains("refused this node's key at the CURVE handshake"), "stderr: \(listed.error)")
        #expect(!listed.output.contains("no activities on the bus"))

        let watched = try await runHandoff(["monitor", "--bus", broker.backendEndpoint, "--seconds", "3"] + keyArguments)
        #expect(watched.status != 0)
        #expect(watched.error.contains("refused this key at the CURVE handshake"), "stderr: \(watched.error)")

        // No key at all: told that the broker runs CURVE.
        let keyless = try await runHandoff(["activities", "--broker", broker.frontendEndpoint, broker.backendEndpoint, "--wait", "1", "--log-level", "critical"])
        #expect(keyless.status != 0)
        #expect(keyless.error.contains("this node has no key"), "stderr: \(keyless.error)")
        let keylessMonitor = try await runHandoff(["monitor", "--bus", broker.backendEndpoint, "--seconds", "3", "--log-level", "critical"])
        #expect(keylessMonitor.status != 0)
        #expect(keylessMonitor.error.contains("it runs CURVE"), "stderr: \(keylessMonitor.error)")
        await broker.stop()
    }

    @Test("`handoff broker` reloads its account on SIGHUP: a key added to the folder gets in without a restart")
    func brokerReloadsAccount() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-hup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let account = folder.appendingPathComponent("account")
        let brokerKeys = try KeyFile.generate(name: "broker", in: account)
        let newcomer = try KeyFile.generate(name: "newcomer", in: folder.appendingPathComponent("newcomer"))
        let ports = try freePorts(2)
        let frontend = ports[0], backend = ports[1]
        let broker = Process()
        broker.executableURL = buildFolder.appendingPathComponent("handoff")
        broker.arguments = ["broker", "--frontend", frontend, "--backend", backend, "--key", brokerKeys.secret.path, "--log-level", "error"]
        let brokerOutput = Spawning.pipe()
        broker.standardOutput = brokerOutput
        try broker.spawn()
        defer { reap(broker) }
        let ready = String(decoding: brokerOutput.fileHandleForReading.availableData, as: UTF8.self)
        #expect(ready.contains("broker ready (CURVE)"), "\(ready)")

        let asNewcomer = ["activities", "--broker", frontend, backend, "--wait", "0.5", "--key", newcomer.secret.path,
                          "--broker-key", brokerKeys.public.path, "--log-level", "critical"]
        let before = try await runHandoff(asNewcomer)
        #expect(before.status != 0)
        #expect(before.error.contains("refused this node's key"), "stderr: \(before.error)")

        try FileManager.default.copyItem(at: newcomer.public, to: account.appendingPathComponent("newcomer.pub"))
        kill(broker.processIdentifier, SIGHUP)
        // The broker reads its account when it takes the signal: asked again until it has (a
        // fixed wait need not be long enough on a loaded machine).
        var after = try await runHandoff(asNewcomer)
        let deadline = WaitDeadline(.seconds(10))
        while after.status != 0, !deadline.passed {
            try await Task.sleep(for: .milliseconds(200))
            after = try await runHandoff(asNewcomer)
        }
        #expect(after.status == 0, "stderr: \(after.error)")
        #expect(after.output.contains("no activities on the bus"))
        #expect(broker.isRunning)
    }

    @Test("`handoff broker` and `handoff agent` without a key live through SIGHUP (`systemctl reload`) and say there is nothing to reload")
    func keylessProcessesTakeHangup() async throws {
        let deployment = try await ServedDeployment.start(agents: ["solo"])
        defer { deployment.stop() }
        #expect(await deployment.untilHealthy())
        let agent = deployment.agent("solo")
        for (process, name) in [(deployment.broker, "broker"), (agent.process, "solo")] {
            kill(process.processIdentifier, SIGHUP)
            #expect(await eventually(within: .seconds(5)) { deployment.log(name).contains("nothing to reload") },
                    "\(name)'s log says nothing of the SIGHUP: \(deployment.logTail(name))")
            #expect(process.isRunning, "SIGHUP's default action ended \(name)'s process")
        }
        // Both still serve: the agent's node is on the bus through the broker.
        #expect(await deployment.untilHealthy())
        let listed = try await runHandoff(["activities", "--broker", deployment.frontend, deployment.backend, "--wait", "0.5", "--log-level", "critical"])
        #expect(listed.status == 0, "stderr: \(listed.error)")
    }

    @Test("`handoff agent` refuses a configuration with an unknown key, naming it and the closest known one, or a value out of range")
    func agentConfigurationTypos() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for (json, expected) in [
            (#"{"name": "a", "securty": {"key": "/etc/handoff/keys/a.key"}}"#, #"unknown key "securty"; did you mean "security"?"#),
            (#"{"name": "a", "security": {"kye": "/etc/handoff/keys/a.key"}}"#, #"unknown key "kye" in "security"; did you mean "key"?"#),
            (#"{"name": "a", "broker": {"frontend": "tcp://127.0.0.1:1", "backedn": "tcp://127.0.0.1:2"}}"#, #"unknown key "backedn" in "broker"; did you mean "backend"?"#),
            (#"{"name": "a", "#, "is not valid JSON"),
            (#"{"name": "a", "streamStalTimeoutSeconds": 30}"#, #"unknown key "streamStalTimeoutSeconds"; did you mean "streamStallTimeoutSeconds"?"#),
            (#"{"name": "a", "streamStallTimeoutSeconds": -1}"#, "must be 0 (none) or a number of seconds, not -1.0"),
            (#"{"name": "a", "streamChecksum": "md5"}"#, #"streamChecksum "md5" in the configuration: expected one of crc32c, xxh64, sha256"#),
            (#"{"name": "a", "requireVerifiedStreamEnd": true}"#, #"unknown key "requireVerifiedStreamEnd"; did you mean "requireVerifiedStreamEnds"?"#),
            (#"{"name": "a", "logLevel": "verbose"}"#, #"logLevel "verbose" in the configuration: expected one of trace, debug, info, notice, warning, error, critical"#),
            (#"{"name": "a", "logFormat": "xml"}"#, #"logFormat "xml" in the configuration: expected one of text, json"#),
            (#"{"name": "a", "livePage": "public"}"#, #"livePage "public" in the configuration: expected one of loopback, anywhere, off"#),
        ] {
            let file = folder.appendingPathComponent("agent.json")
            try json.write(to: file, atomically: true, encoding: .utf8)
            let result = try await runHandoff(["agent", "--config", file.path])
            #expect(result.status != 0)
            #expect(result.error.contains(expected), "stderr: \(result.error)")
        }
    }

    @Test("`handoff plugins list` shows what the built plugins handle")
    func pluginsList() async throws {
        let result = try await runHandoff(["plugins", "list", "--plugins", buildFolder.path])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("contacts 1.0.0"))
        #expect(result.output.contains("org.handoff.contacts.list-contacts"))
        #expect(result.output.contains("notes 1.0.0"))
        #expect(result.output.contains("clipboard 1.1.0") && result.output.contains("org.handoff.clipboard"), "\(result.output)")

        // A folder that cannot be read is a failure, not an empty listing.
        let missing = try await runHandoff(["plugins", "list", "--plugins", "/nonexistent/handoff-plugins"])
        #expect(missing.status != 0)
        #expect(missing.output.contains("/nonexistent/handoff-plugins: plugin folder cannot be read"), "\(missing.output)")
    }

    @Test("`handoff monitor` filters by type and node, stops after --count, shows raw frames and per-type rates")
    func monitorFilters() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let edits = try ChildProcess(["advertise", frontend, backend, "100", "org.handoff.contacts.edit-contact", "2"])
        let notes = try ChildProcess(["advertise", frontend, backend, "100", "org.handoff.notes.edit", "1"])
        _ = try await edits.ready()
        _ = try await notes.ready()
        let environment = ["HANDOFF_BROKER": "\(frontend) \(backend)"]
        // Refreshes come every 25 s: the monitor sees presence within an interval, and the type
        // filter leaves it (and the notes) out; so an edit to one activity is what it waits for.
        let typedOutput = Spawning.pipe()
        let typed = try startHandoff(
            ["monitor", "--json", "--type", "org.handoff.contacts.", "--count", "1", "--seconds", "20"],
            standardOutput: typedOutput.fileHandleForWriting, environment: environment)
        defer { reap(typed) }
        // A monitor still starting misses an advertisement made before its subscription reached the
        // broker: another view-contact advertiser each second until it has shown one and stopped.
        var viewers: [ChildProcess] = []
        while typed.isRunning, viewers.count < 15 {
            let viewer = try ChildProcess(["advertise", frontend, backend, "100", "org.handoff.contacts.view-contact", "1"])
            _ = try await viewer.ready()
            viewers.append(viewer)
            for _ in 0..<10 where typed.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        }
        typed.waitUntilExit()
        try typedOutput.fileHandleForWriting.close()
        let output = String(decoding: typedOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(typed.terminationStatus == 0)
        let lines = output.split(separator: "\n").filter { $0.hasPrefix("{") }
        #expect(lines.count == 1, "\(output)")
        #expect(lines.first?.contains("org.handoff.contacts.view-contact") == true, "\(output)")

        // By node: only presence and news of the notes advertiser.
        let notesNode = "advertiser-\(notes.process.processIdentifier)"
        let filtered = try await runHandoff(["monitor", "--json", "--node", notesNode, "--seconds", "2"], environment: environment)
        let filteredNodes = Set(filtered.output.split(separator: "\n").compactMap { line -> String? in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["node"] as? String
        })
        #expect(filteredNodes == [notesNode], "\(filtered.output)")

        // --broker names the broker as on every other command (the monitor watches its backend).
        let raw = try await runHandoff(["monitor", "--raw", "--count", "1", "--seconds", "5", "--broker", frontend, backend])
        #expect(raw.output.contains("P:"), "\(raw.output)")
        let rawLine = try #require(raw.output.split(separator: "\n").last)
        #expect(rawLine.split(separator: " ").last.map { $0.allSatisfy(\.isHexDigit) } == true, "\(rawLine)")

        let stats = try await runHandoff(["monitor", "--stats", "--seconds", "2.5"], environment: environment)
        #expect(stats.output.contains("(presence)"), "\(stats.output)")
        #expect(stats.output.contains("msg/s"), "\(stats.output)")
        #expect(stats.output.contains("total"), "\(stats.output)")
        _ = broker
    }

    @Test("`handoff nodes` lists the nodes on the bus by their presence, and logs nothing of its own node unless asked (--log-level info); `activities` fails when no broker answers")
    func nodesAndNoBroker() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let advertiser = try ChildProcess(["advertise", frontend, backend, "200", "org.handoff.contacts.edit-contact", "3"])
        _ = try await advertiser.ready()
        let listed = try await runHandoff(["nodes", "--json", "--wait", "1", "--broker", frontend, backend])
        #expect(listed.status == 0, "\(listed.error)")
        let lines = listed.output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let advertising = lines.first { ($0["name"] as? String)?.hasPrefix("advertiser-") == true }
        #expect(advertising?["activities"] as? Int == 3, "\(listed.output)")
        #expect((advertising?["lastHeardSecondsAgo"] as? Double ?? 99) < 1)
        #expect((advertising?["continuation"] as? String)?.hasPrefix("tcp://") == true)
        let text = try await runHandoff(["nodes", "--wait", "1", "--broker", frontend, backend])
        #expect(text.output.contains("3 activities"), "\(text.output)")
        // What it found, and nothing of its own node starting and stopping (info, not the default here).
        #expect(text.error.isEmpty, "\(text.error)")
        let logged = try await runHandoff(["nodes", "--wait", "1", "--broker", frontend, backend, "--log-level", "info"])
        #expect(logged.error.contains("node running"), "\(logged.error)")
        _ = broker

        // Nobody at the broker's address: a failure that says so, not an empty bus.
        let ports = try freePorts(2)
        let nowhere = ports[0], nobody = ports[1]
        let failed = try await runHandoff(["activities", "--wait", "1", "--broker", nowhere, nobody])
        #expect(failed.status != 0)
        #expect(failed.error.contains("no broker answered at \(nobody)"), "\(failed.error)")
    }

    @Test("HANDOFF_BROKER names the broker for every command; a malformed one, a bad HANDOFF_LOG_LEVEL or HANDOFF_INSECURE, or --broker with one endpoint for a command that watches the bus, is a clear error")
    func environment() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let advertiser = try ChildProcess(["advertise", frontend, backend, "200", "org.handoff.contacts.edit-contact", "1"])
        let id = try #require(try await advertiser.ready().first)
        let listed = try await runHandoff(["activities", "--wait", "2"], environment: ["HANDOFF_BROKER": "\(frontend) \(backend)", "HANDOFF_LOG_LEVEL": "error"])
        #expect(listed.status == 0, "\(listed.error)")
        #expect(listed.output.contains(id), "\(listed.output)")
        let watched = try await runHandoff(["monitor", "--seconds", "1"], environment: ["HANDOFF_BROKER": "\(frontend),\(backend)"])
        #expect(watched.output.contains("watching \(backend)"), "\(watched.output)")

        let malformed = try await runHandoff(["activities", "--wait", "1"], environment: ["HANDOFF_BROKER": frontend])
        #expect(malformed.status != 0)
        #expect(malformed.error.contains("HANDOFF_BROKER takes each broker's two endpoints"), "\(malformed.error)")
        let badLevel = try await runHandoff(["activities", "--wait", "1"], environment: ["HANDOFF_BROKER": "\(frontend) \(backend)", "HANDOFF_LOG_LEVEL": "loud"])
        #expect(badLevel.status != 0)
        #expect(badLevel.error.contains("HANDOFF_LOG_LEVEL must be one of"), "\(badLevel.error)")
        let badInsecure = try await runHandoff(["activities", "--wait", "1"], environment: ["HANDOFF_BROKER": "\(frontend) \(backend)", "HANDOFF_INSECURE": "true"])
        #expect(badInsecure.status != 0)
        #expect(badInsecure.error.contains("HANDOFF_INSECURE must be 1"), "\(badInsecure.error)")
        // Each command that watches the bus refuses one endpoint as monitor does (top crashed on it).
        for command in [["top", "--count", "1"], ["trace", "--id", "x"], ["monitor", "--seconds", "1"]] {
            let lone = try await runHandoff(command + ["--broker", frontend])
            #expect(lone.status != 0 && lone.error.contains("--broker takes each broker's frontend and backend"), "\(command): \(lone.error)")
        }
        _ = broker
    }

    @Test("`handoff --version` names the release, the wire protocol, the plugin ABI and libzmq")
    func version() async throws {
        let result = try await runHandoff(["--version"])
        #expect(result.status == 0, "\(result.error)")
        let line = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line == HandoffVersion.description)
        #expect(line.hasPrefix("handoff \(HandoffVersion.release) (wire protocol 1, plugin ABI 1."), "\(line)")
        #expect(line.contains("libzmq \(ZeroMQLibrary.version.major)."))
    }
}
