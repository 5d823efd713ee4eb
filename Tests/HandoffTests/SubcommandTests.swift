import Foundation
import Handoff
import Synchronization
import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("handoff plugin", .exclusive)
struct PluginCommandTests {
    @Test("`handoff plugin NAME ...` runs any hosted plugin's command through the agent; an unknown plugin is an error")
    func genericPluginCommand() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("plugin-command-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (agent, control) = try startAgent("plugin-host", in: folder, broker: (frontend, backend))
        defer { agent.terminate(); agent.waitUntilExit() }
        let plugins = try #require(try await Self.answer(["plugins", "list", "--agent", control]), "the agent never answered").output
        #expect(plugins.contains("notes") && plugins.contains("contacts"), "\(plugins)")

        let made = try await runHandoff(["plugin", "notes", "new", "Shopping", "milk and bread", "--agent", control])
        #expect(made.status == 0, "\(made.error)")
        #expect(UUID(uuidString: made.output.trimmingCharacters(in: .whitespacesAndNewlines)) != nil, "\(made.output)")
        let added = try await runHandoff(["plugin", "contacts", "add", "Ada", "Lovelace", "+44-20-7946-0000", "ada@example.org", "--agent", control])
        #expect(added.status == 0, "\(added.error)")
        let listed = try await runHandoff(["plugin", "contacts", "list", "--agent", control])
        #expect(listed.output.contains("Ada Lovelace"), "\(listed.output)")
        // `handoff contacts` is the same command.
        #expect(try await runHandoff(["contacts", "--agent", control, "list"]).output == listed.output)

        let unknown = try await runHandoff(["plugin", "nosuch", "list", "--agent", control])
        #expect(unknown.status != 0)
        #expect(unknown.error.contains("nosuch"), "\(unknown.error)")
        let bare = try await runHandoff(["plugin", "notes", "--agent", control])
        #expect(bare.status != 0)
        #expect(bare.error.contains("name the plugin's command"), "\(bare.error)")
        _ = broker
    }
}

extension PluginCommandTests {
    /// An agent hosting the built plugins on `folder` (its data, its control socket there).
    func startAgent(_ name: String, in folder: URL, broker: (frontend: String, backend: String)) throws -> (Process, control: String) {
        let control = "ipc://\(folder.path)/control.sock"
        let agent = Process()
        agent.executableURL = buildFolder.appendingPathComponent("handoff")
        agent.arguments = ["agent", "--name", name, "--broker", broker.frontend, broker.backend, "--plugins", buildFolder.path,
                           "--data", folder.path, "--control", control, "--log-level", "error"]
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = FileHandle.nullDevice
        try agent.spawn()
        return (agent, control)
    }

    /// The first successful run of `arguments` within 20 s (an agent is up once its control socket
    /// answers), or `nil`.
    static func answer(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String)? {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let run = try await runHandoff(arguments)
            if run.status == 0 { return run }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    @Test("a command to an agent that is not there (killed with -9, its ipc socket file left behind; or nothing ever at a tcp port) ends with a typed error in seconds, not at the 60 s reply timeout")
    func noAgentThere() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("no-agent-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let (agent, control) = try startAgent("killed-host", in: folder, broker: (frontend, backend))
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) }; agent.waitUntilExit() }
        try #require(try await Self.answer(["contacts", "--agent", control, "list"]) != nil, "the agent never answered")
        kill(agent.processIdentifier, SIGKILL)
        agent.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: "\(folder.path)/control.sock"), "the killed agent's socket file is the case under test")

        // Bounded well under the reply timeout: before, each waited the whole 60 s.
        for endpoint in [control, try freePort()] {
            let asked = try await runHandoff(["contacts", "--agent", endpoint, "list"], timeout: .seconds(30))
            #expect(asked.status == 1)
            #expect(asked.error.contains("no agent answers at \(endpoint)"), "\(asked.error)")
        }
        _ = broker
    }

    @Test("a command whose agent goes away after the request reached it (killed: its connection closes) ends with a typed peer-lost error at once, not at the 60 s reply timeout")
    func agentGoneBeforeAnswering() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gone-agent-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // A stand-in for the agent that takes the request and dies without answering: closing its
        // socket closes the connection as the kernel does for a process killed with -9.
        let control = "ipc://\(folder.path)/control.sock"
        let context = try Context()
        let agent = try context.socket(.router)
        try agent.bind(control)
        let asking = Task { try await runHandoff(["contacts", "--agent", control, "list"], timeout: .seconds(30)) }
        let ready = try await agent.waitUntilReady(for: .readable, timeout: .seconds(20))
        try #require(ready.contains(.readable), "the request never reached the stand-in agent")
        let request = try #require(try await agent.receiveMultipart(maxFrames: 3))
        #expect(request.count == 3, "routing id, empty delimiter, the request")
        let requestReached = ContinuousClock.now
        agent.close()
        let asked = try await asking.value
        let waited = ContinuousClock.now - requestReached
        #expect(asked.status == 1)
        #expect(asked.error.contains("went away before it answered"), "\(asked.error)")
        #expect(waited < .seconds(10), "waited \(waited) after the agent went away")
    }
}

@Suite("handoff advertise", .exclusive)
struct AdvertiseCommandTests {
    @Test("`handoff advertise --seconds 30` stopped with SIGTERM exits at once and gracefully (status 0), not after the 30 s")
    func stopsOnSignal() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let process = try await startAdvertising(["--type", "org.handoff.test.signal", "--seconds", "30", "--broker", frontend, backend])
        defer { reap(process) }
        let signalled = ContinuousClock.now, bound = WaitDeadline(.seconds(3))
        kill(process.processIdentifier, SIGTERM)
        while process.isRunning, ContinuousClock.now - signalled < .seconds(10) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let took = ContinuousClock.now - signalled
        #expect(!process.isRunning)
        #expect(!bound.passed, "it took \(took) to stop: \(bound.account)")
        #expect(process.terminationStatus == 0)
        _ = broker
    }
}

@Suite("handoff continue with streams", .exclusive)
struct ContinueStreamTests {
    @Test("`handoff continue --save` receives a 64 MiB stream with a progress bar, and the file holds every byte")
    func continueWithProgress() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let size = 64 << 20
        let source = try ChildProcess(["stream-source", frontend, backend, String(size)])
        let id = try #require(try await source.ready().first)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("saved-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await runHandoff(["continue", "--id", id, "--save", file.path, "--broker", frontend, backend, "--log-level", "error"])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("continued \""))
        #expect(result.error.contains("of 64.0 MiB"), "no progress shown: \(result.error)")
        let saved = try Data(contentsOf: file)
        #expect(saved.count == size)
        #expect(BulkPattern().matches(saved, at: 0))
        _ = broker
    }

    @Test("`handoff continue --save --stall-timeout 2` gives up with a typed error when the originator keeps its stream open but stops writing, and leaves no partial file")
    func stalledOriginator() async throws {
        let (broker, frontend, backend) = try await startBroker()
        // At one byte a second, the source writes its first block and then waits for days: its
        // node keeps the stream alive meanwhile, so only the stall timeout ends the wait.
        let source = try ChildProcess(["stream-source", frontend, backend, String(64 << 20), "1"])
        let id = try #require(try await source.ready().first)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("stalled-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let started = ContinuousClock.now
        let result = try await runHandoff(["continue", "--id", id, "--save", file.path, "--stall-timeout", "2",
                                           "--broker", frontend, backend, "--log-level", "error"], timeout: .seconds(60))
        #expect(result.status == 1)
        #expect(result.error.contains("remote application timed out") && result.error.contains("sent nothing new for 2") && result.error.contains("--stall-timeout"), "\(result.error)")
        #expect(!FileManager.default.fileExists(atPath: file.path), "a partial file was left")
        #expect(ContinuousClock.now - started < .seconds(30))
        let refused = try await runHandoff(["continue", "--id", id, "--save", file.path, "--stall-timeout", "-1", "--broker", frontend, backend])
        #expect(refused.status != 0 && refused.error.contains("--stall-timeout"), "\(refused.error)")
        _ = broker
    }

    @Test("`handoff continue --save` of an activity without streams is refused by its originator before the handover (want_streams): a typed error, no file")
    func saveWithoutStreams() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let advertiser = try ChildProcess(["advertise", frontend, backend, "200", "org.handoff.contacts.edit-contact", "1"])
        let id = try #require(try await advertiser.ready().first)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("no-streams-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await runHandoff(["continue", "--id", id, "--save", file.path, "--broker", frontend, backend, "--log-level", "error"])
        #expect(result.status == 1)
        #expect(result.error.contains("streams not supported") && result.error.contains("does not support them"), "\(result.error)")
        #expect(!FileManager.default.fileExists(atPath: file.path))
        _ = broker
    }
}

/// `ss`, which can kill TCP connections (`ss -K`, root and a kernel with INET_DIAG_DESTROY).
let socketKiller = ["/usr/bin/ss", "/bin/ss", "/usr/sbin/ss", "/sbin/ss"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// Kills every established TCP connection to or from `port` on this host, as a broken network
/// would (both ends see the connection reset); returns whether `ss` ran.
@discardableResult
func killConnections(port: String) -> Bool {
    guard let socketKiller else { return false }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: socketKiller)
    process.arguments = ["-K", "-t", "dport = :\(port) or sport = :\(port)"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    guard (try? process.spawn()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}

@Suite("handoff continue across a broken connection", .exclusive)
struct ContinueResumeTests {
    @Test(
        "`handoff continue --save` resumes when its TCP connection is killed mid-stream: the file holds every byte once",
        .enabled(if: socketKiller != nil && getuid() == 0, "needs `ss -K` (iproute2) and root")
    )
    func resumesAfterCut() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let size = 48 << 20
        // Paced at 16 MiB/s, so the cut lands mid-transfer.
        let source = try ChildProcess(["stream-source", frontend, backend, String(size), String(16 << 20)])
        let ready = try await source.ready()
        try #require(ready.count == 2, "\(ready)")
        let port = String(try #require(ready[1].split(separator: ":").last))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("resumed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }

        async let run = runHandoff(["continue", "--id", ready[0], "--save", file.path, "--broker", frontend, backend, "--log-level", "info"])
        var savedBeforeCut = 0
        let deadline = ContinuousClock.now + .seconds(20)
        while savedBeforeCut == 0, ContinuousClock.now < deadline {
            let written = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
            if written >= 12 << 20 {
                #expect(killConnections(port: port))
                savedBeforeCut = written
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        let result = try await run
        #expect(savedBeforeCut > 0 && savedBeforeCut < size, "the cut must land mid-transfer (\(savedBeforeCut) bytes saved)")
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.contains("resumed with the originator"), "no resume reported: \(result.error)")
        let saved = try Data(contentsOf: file)
        #expect(saved.count == size)
        #expect(BulkPattern().matches(saved, at: 0))
        _ = broker
    }
}
