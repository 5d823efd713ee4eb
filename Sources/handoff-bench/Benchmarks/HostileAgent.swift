import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// What the hostile benchmarks attack: a `handoff broker` and a `handoff agent` (real processes on
/// loopback) hosting the contacts plugin with a list of `contacts`, shared as list-contacts.
struct HostileAgent {
    let folder: URL
    let frontend: String, backend: String
    let broker: SpawnedProcess, agent: SpawnedProcess
    /// The shared list's activity and where the agent answers continues and streams.
    let activityID: String, endpoint: String

    /// Starts both, waits until the agent shares its list and a node on the bus sees it.
    /// `agentArguments` go to `handoff agent` (a stall timeout, say); its log goes to standard error
    /// at warning, or all of it to `$HANDOFF_BENCH_AGENT_LOG`.
    static func start(contacts: Int, context: Context, agentArguments: [String] = []) async throws -> HostileAgent {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-hostile-\(UUID().uuidString)")
        let plugins = folder.appendingPathComponent("plugins"), data = folder.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: data.appendingPathComponent("contacts"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: benchFolder().appendingPathComponent("libHandoffContactsPlugin.so"),
                                         to: plugins.appendingPathComponent("contacts.so"))
        var list = ContactList()
        list.contacts = (0..<contacts).map { index in
            var contact = Contact()
            contact.id = String(format: "c-%06d", index)
            contact.firstName = "First\(index)"
            contact.lastName = "Last\(index)"
            contact.phoneNumber = "+1-555-\(String(format: "%07d", index))"
            contact.email = "person\(index)@example.org"
            return contact
        }
        try Data(try list.serializedBytes() as [UInt8]).write(to: data.appendingPathComponent("contacts/contacts.pb"))

        let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
        let logFile = ProcessInfo.processInfo.environment["HANDOFF_BENCH_AGENT_LOG"]
        if let logFile { _ = FileManager.default.createFile(atPath: logFile, contents: nil) }
        let log = FileHandle(forWritingAtPath: logFile ?? "/dev/stderr")
        let broker = try startHandoff(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"], output: FileHandle.nullDevice)
        let agent = try startHandoff(["agent", "--name", "victim", "--broker", frontend, backend, "--plugins", plugins.path,
                                      "--data", data.path, "--exit-with-parent", "--log-level", logFile == nil ? "warning" : "debug"] + agentArguments,
                                     output: log)
        var scenario = HostileAgent(folder: folder, frontend: frontend, backend: backend, broker: broker, agent: agent, activityID: "", endpoint: "")
        do {
            // The agent is up when its control socket answers; then it shares the list.
            var shared = false
            for _ in 0..<200 where !shared {
                let share = try startHandoff(["contacts", "--agent", "ipc://\(data.path)/control.sock", "share"], output: FileHandle.nullDevice)
                share.waitUntilExit()
                shared = share.terminationStatus == 0
                if !shared { try await Task.sleep(for: .milliseconds(50)) }
            }
            guard shared else { throw HandoffError(.handoffFailed, "the agent did not start") }
            let found = try await Node.withRunning(Node.Configuration(name: "finder", bus: .broker(frontend: frontend, backend: backend))) { node in
                while true {
                    if let found = await node.activities().first(where: { $0.activityType == "org.handoff.contacts.list-contacts" }) {
                        return (found.id, found.continueEndpoint)
                    }
                    try await Task.sleep(for: .milliseconds(10))
                }
            }
            scenario = HostileAgent(folder: folder, frontend: frontend, backend: backend, broker: broker, agent: agent,
                                    activityID: found.0, endpoint: found.1)
        } catch {
            scenario.stop()
            throw error
        }
        return scenario
    }

    /// `handoff continue --save` of the whole list, as a legitimate user runs it meanwhile.
    func legitimateContinue() throws -> (seconds: Double, contacts: Int, error: String) {
        try handoff_bench.legitimateContinue(frontend: frontend, backend: backend, folder: folder)
    }

    /// Kills both and removes the folder.
    func stop() {
        for process in [agent, broker] { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try? FileManager.default.removeItem(at: folder)
    }
}
