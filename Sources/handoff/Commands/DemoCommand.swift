import ArgumentParser
import Dispatch
import Foundation
import Handoff
import HandoffWire
import Synchronization

/// `handoff demo`: the seeds' contacts story, end to end, with no configuration.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Start a broker and two agents on loopback and play the contacts story end to end.")

    @Option(help: "Where the plugin libraries are (default: beside this executable).") var plugins: String?
    @Option(help: "The broker's frontend (default: a free loopback port).") var frontend = "tcp://127.0.0.1:*"
    @Option(help: "The broker's backend, where `handoff monitor --bus` can watch (default: a free loopback port).") var backend = "tcp://127.0.0.1:*"
    @Flag(help: "Run without CURVE (by default the demo makes keys for the broker and both agents and runs secure).") var insecure = false
    @Option(help: ArgumentHelp(
        "Keep the account's keys in this folder: broker.key, node-a.key and node-b.key are made there when missing and reused when present, and every .pub in it is in the account — so a monitor with a key of its own there (`handoff keygen monitor --out DIR`, then `handoff monitor --bus BACKEND --key DIR/monitor.key`) can watch the secure demo. Default: a temporary folder, removed at the end.",
        valueName: "folder")) var keys: String?

    func run() async throws {
        let started = ContinuousClock.now
        func say(_ text: String) {
            announce(String(format: "[%8.1f ms] ", milliseconds(ContinuousClock.now - started)) + text)
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-demo-\(getpid())")
        let pluginFolder = work.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: pluginFolder, withIntermediateDirectories: true)
        let children = Children(logFolder: work)
        defer {
            children.stopAll()
            try? FileManager.default.removeItem(at: work)
        }
        children.stopOnSignals {
            try? FileManager.default.removeItem(at: work)
        }

        let source = plugins ?? executableFolder
        let contactsLibrary = (source as NSString).appendingPathComponent("libHandoffContactsPlugin.so")
        guard FileManager.default.fileExists(atPath: contactsLibrary) else {
            throw HandoffError(.invalidConfiguration, "the Contacts plugin is not at \(contactsLibrary); build it: swift build -c release --product HandoffContactsPlugin")
        }
        try FileManager.default.createSymbolicLink(atPath: pluginFolder.appendingPathComponent("libHandoffContactsPlugin.so").path, withDestinationPath: contactsLibrary)

        announce("Handoff demo: a broker and two agents, each its own process, on loopback. The seeds' contacts story:")
        // The account: a key pair each for the broker and both agents, their public keys in one folder.
        var keyArguments: [String: [String]] = [:]
        if !insecure {
            let keys = self.keys.map { URL(fileURLWithPath: $0) } ?? work.appendingPathComponent("account")
            for name in ["broker", "node-a", "node-b"] {
                var secret = keys.appendingPathComponent("\(name).key")
                if !FileManager.default.fileExists(atPath: secret.path) {
                    secret = try KeyFile.generate(name: name, in: keys).secret
                }
                keyArguments[name] = ["--key", secret.path]
            }
            say("security: CURVE on every socket; made key pairs for broker, node-a and node-b (the account, in \(keys.path))")
        } else {
            say("security: none (--insecure): traffic is plain text and any process on this machine may join")
        }
        let brokerLine = try children.start("broker", ["broker", "--frontend", frontend, "--backend", backend, "--exit-with-parent", "--log-level", "warning"] + keyArguments["broker", default: []], waitFor: "broker ready")
        let words = brokerLine.split(separator: " ").map(String.init)
        func word(after key: String) -> String { words[words.firstIndex(of: key)! + 1] }
        let (frontend, backend) = (word(after: "frontend"), word(after: "backend"))
        say("broker up (pid \(children.pid("broker"))): publishers → \(frontend), subscribers ← \(backend)")

        var controls: [String: String] = [:]
        for name in ["node-a", "node-b"] {
            let data = work.appendingPathComponent(name)
            let control = "ipc://\(work.path)/\(name).sock"
            controls[name] = control
            try children.start(name, ["agent", "--name", name, "--broker", frontend, backend, "--plugins", pluginFolder.path,
                                      "--data", data.path, "--control", control, "--exit-with-parent", "--log-level", "warning"]
                                      + keyArguments[name, default: []])
        }
        for name in ["node-a", "node-b"] {
            let plugins = try await waitForAgent(controls[name]!, children: children, name: name)
            say("\(name) up (pid \(children.pid(name))), hosting \(plugins.joined(separator: ", "))")
        }
        let a = controls["node-a"]!, b = controls["node-b"]!

        func contacts(_ agent: String, _ arguments: String...) async throws -> [String] {
            var command = WirePluginCommand()
            command.plugin = "contacts"
            command.arguments = arguments
            return try await askAgent(agent, .pluginCommand(command)).lines
        }
        func continueType(_ agent: String, _ type: String) async throws -> String {
            var command = WireContinueCommand()
            command.activityType = type
            return try await askAgent(agent, .continueActivity(command)).lines.joined(separator: "; ")
        }

        let ada = try await contacts(a, "add", "Ada", "Lovelace", "+44-20-7946-0000", "ada@example.org")[0]
        _ = try await contacts(a, "add", "Alan", "Turing", "+44-161-496-0000", "alan@example.org")
        let grace = try await contacts(a, "add", "Grace", "Hopper", "+1-202-555-0100", "grace@example.org")[0]
        say("node-a added 3 contacts")

        _ = try await contacts(a, "edit", ada)
        say("node-a edits Ada Lovelace: edit-contact is current, the draft form in userInfo")
        say("node-b " + (try await continueType(b, "org.handoff.contacts.edit-contact")))
        say("node-b's draft is now: " + (try await contacts(b, "draft")).joined(separator: " ").replacingOccurrences(of: "\t", with: "  "))

        let list = try await contacts(a, "list")
        say("node-a shows its list:")
        for line in list { announce("               " + line.replacingOccurrences(of: "\t", with: "  ")) }

        _ = try await contacts(a, "share")
        say("node-a shares the list: list-contacts is current, the count (\(list.count)) in userInfo")
        say("node-b " + (try await continueType(b, "org.handoff.contacts.list-contacts")) + ", the whole list over a continuation stream")
        let received = try await contacts(b, "list")
        guard received == list else { throw HandoffError(.handoffFailed, "node-b's list differs from node-a's after list-contacts:\n\(received)\nvs\n\(list)") }
        say("node-b's list now equals node-a's (\(received.count) contacts), replaced as in the seeds")

        _ = try await contacts(a, "view", grace)
        say("node-a views Grace Hopper: view-contact is current")
        say("node-b " + (try await continueType(b, "org.handoff.contacts.view-contact")))
        say("node-b shows: " + (try await contacts(b, "viewing")).joined(separator: " ").replacingOccurrences(of: "\t", with: "  "))

        children.stopAll()
        say("demo complete; agents and broker stopped (activities withdrawn)")
    }

    /// Polls an agent's control socket until it answers; returns its plugins.
    private func waitForAgent(_ control: String, children: Children, name: String) async throws -> [String] {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if !children.isRunning(name) { throw HandoffError(.handoffFailed, "\(name) exited early:\n\(children.log(name))") }
            if let reply = try? await askAgent(control, timeout: .milliseconds(500), .listPlugins(WireListPlugins())) {
                return reply.plugins.map(\.name)
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HandoffError(.remoteApplicationTimedOut, "\(name) did not come up within 20 s:\n\(children.log(name))")
    }
}

/// The demo's child processes: started, watched, and always stopped.
final class Children: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `children` is a Mutex; `signalSources` is only appended to,
    // under `sourcesLock`, to keep the sources alive.
    private struct Child { let process: Process; let log: URL; let started: ContinuousClock.Instant }
    private let children = Mutex<[String: Child]>([:])
    private let logFolder: URL
    private let sourcesLock = NSLock()
    private var signalSources: [any DispatchSourceSignal] = []

    init(logFolder: URL) { self.logFolder = logFolder }

    /// Starts `handoff <arguments>`; with `waitFor`, returns the first line of its output that starts so.
    @discardableResult
    func start(_ name: String, _ arguments: [String], waitFor prefix: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        process.arguments = arguments
        // The demo's broker and agents end with it, even when it is killed (ParentWatch).
        process.environment = ProcessInfo.processInfo.environment.merging([ParentWatch.variable: "1"]) { $1 }
        let log = logFolder.appendingPathComponent("\(name).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: log)
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        children.withLock { $0[name] = Child(process: process, log: log, started: .now) }
        guard let prefix else { return "" }
        var buffer = Data()
        while true {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { throw HandoffError(.handoffFailed, "\(name) exited before it was ready:\n\(self.log(name))") }
            buffer.append(chunk)
            if let line = String(decoding: buffer, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                return String(line)
            }
        }
    }

    func pid(_ name: String) -> Int32 { children.withLock { $0[name]?.process.processIdentifier ?? 0 } }
    func isRunning(_ name: String) -> Bool { children.withLock { $0[name]?.process.isRunning ?? false } }
    func log(_ name: String) -> String {
        children.withLock { $0[name] }.flatMap { try? String(contentsOf: $0.log, encoding: .utf8) } ?? ""
    }

    /// Stops the children in the reverse of the order they started (agents before the broker, so
    /// their withdrawals still cross it): SIGTERM (graceful), then SIGKILL after 3 s.
    func stopAll() {
        let all = children.withLock { state in
            defer { state.removeAll() }
            return state.values.sorted { $0.started > $1.started }
        }
        for child in all where child.process.isRunning {
            kill(child.process.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(3)
            while child.process.isRunning && Date() < deadline { usleep(10_000) }
            if child.process.isRunning { kill(child.process.processIdentifier, SIGKILL) }
        }
    }

    /// On Ctrl-C or SIGTERM: stop the children, clean up, exit 130.
    func stopOnSignals(_ cleanUp: @escaping @Sendable () -> Void) {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler { [self] in
                announce("interrupted: stopping the agents and the broker")
                stopAll()
                cleanUp()
                exit(130)
            }
            source.resume()
            sourcesLock.withLock { signalSources.append(source) }
        }
    }
}
