import Foundation
import Glibc
import Testing
import HandoffTestSupport

/// A unix datagram socket where a test plays systemd's notification socket.
private final class NotifySocket {
    let fd: Int32
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString.prefix(8))").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw ProcessFailure("bind \(path): errno \(errno)") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// The next datagram, or nil after 10 s.
    func receive() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
    }
}

@Suite("systemd: readiness and journal priorities", .exclusive, .serialized)
struct SystemdTests {
    @Test("`handoff broker` and `handoff agent` tell systemd they are ready (Type=notify), and stopping")
    func readiness() async throws {
        let notify = try NotifySocket()
        let ports = try freePorts(2)
        let (frontend, backend) = (ports[0], ports[1])
        let broker = Process()
        broker.executableURL = buildFolder.appendingPathComponent("handoff")
        broker.arguments = ["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"]
        broker.environment = ProcessInfo.processInfo.environment.merging(["NOTIFY_SOCKET": notify.path]) { $1 }
        broker.standardOutput = FileHandle.nullDevice
        try broker.spawn()
        defer { if broker.isRunning { kill(broker.processIdentifier, SIGKILL) } }
        let ready = try #require(notify.receive())
        #expect(ready.hasPrefix("READY=1"), "\(ready)")
        #expect(ready.contains("STATUS=frontend \(frontend)"), "\(ready)")

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("notify-agent-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("plugins"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let agent = Process()
        agent.executableURL = buildFolder.appendingPathComponent("handoff")
        agent.arguments = ["agent", "--name", "notified", "--broker", frontend, backend, "--plugins", folder.appendingPathComponent("plugins").path,
                           "--data", folder.path, "--log-level", "error"]
        agent.environment = ProcessInfo.processInfo.environment.merging(["NOTIFY_SOCKET": notify.path]) { $1 }
        agent.standardOutput = FileHandle.nullDevice
        try agent.spawn()
        defer { if agent.isRunning { kill(agent.processIdentifier, SIGKILL) } }
        let agentReady = try #require(notify.receive())
        #expect(agentReady.hasPrefix("READY=1") && agentReady.contains("notified"), "\(agentReady)")
        agent.terminate()
        #expect(notify.receive() == "STOPPING=1")
        broker.terminate()
        #expect(notify.receive() == "STOPPING=1")
    }

    @Test("when standard error is the journal, every log line carries its syslog priority")
    func journalPriorities() async throws {
        let error = Spawning.pipe()
        var status = stat()
        try #require(fstat(error.fileHandleForWriting.fileDescriptor, &status) == 0)
        let process = Process()
        process.executableURL = buildFolder.appendingPathComponent("handoff")
        process.arguments = ["activities", "--wait", "0.3", "--log-level", "info", "--broker"] + (try freePorts(2))
        process.environment = ProcessInfo.processInfo.environment.merging(["JOURNAL_STREAM": "\(status.st_dev):\(status.st_ino)"]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = error
        try process.spawn()
        process.waitUntilExit()
        try error.fileHandleForWriting.close()
        let lines = String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        let logged = lines.filter { $0.hasPrefix("<") }
        #expect(logged.contains { $0.hasPrefix("<6>handoff.node: node running") }, "\(lines)")
        #expect(logged.allSatisfy { $0.dropFirst().first.map { "234567".contains($0) } ?? false })
    }

    @Test("--log-format json (and HANDOFF_LOG_FORMAT=json, and an agent's logFormat) writes one JSON object a line, every field a shipper needs")
    func jsonLogs() async throws {
        let ports = try freePorts(2)
        let (frontend, backend) = (ports[0], ports[1])
        func check(_ stderr: String, _ what: String) {
            let lines = stderr.split(separator: "\n")
            #expect(!lines.isEmpty, "\(what): nothing logged")
            for line in lines {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object != nil, "\(what): not a JSON object: \(line)")
                guard let object else { continue }
                for key in ["time", "level", "logger", "message", "source"] {
                    #expect(object[key] is String, "\(what): no \(key) in \(line)")
                }
            }
            let running = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                .first { $0["message"] as? String == "node running" }
            #expect(running?["level"] as? String == "info", "\(what): \(lines)")
            #expect((running?["metadata"] as? [String: Any])?["node"] as? String == "handoff-activities", "\(what): \(lines)")
        }
        let flagged = try await runHandoff(["activities", "--wait", "0.3", "--broker", frontend, backend, "--log-format", "json", "--log-level", "info"])
        check(flagged.error, "--log-format json")
        // No broker: the command's error is the last line, its code a field.
        let final = flagged.error.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let finalMetadata = final?["metadata"] as? [String: Any]
        #expect(final?["level"] as? String == "error", "\(flagged.error)")
        #expect(finalMetadata?["code"] as? String == "connection unavailable", "\(flagged.error)")
        let environment = try await runHandoff(["activities", "--wait", "0.3", "--broker", frontend, backend], environment: ["HANDOFF_LOG_FORMAT": "json", "HANDOFF_LOG_LEVEL": "info"])
        check(environment.error, "HANDOFF_LOG_FORMAT=json")
        let wrong = try await runHandoff(["activities", "--broker", frontend, backend], environment: ["HANDOFF_LOG_FORMAT": "xml"])
        #expect(wrong.status != 0)
        #expect(wrong.error.contains("HANDOFF_LOG_FORMAT must be text or json"), "\(wrong.error)")

        // An agent's configuration file: its logFormat, with a message that needs escaping.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("json-logs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("agent.json")
        try #"{"name": "quoted \"agent\"\tname", "logFormat": "json", "data": "\#(folder.path)", "plugins": ["\#(folder.path)"]}"#.write(to: file, atomically: true, encoding: .utf8)
        let agent = Process()
        agent.executableURL = buildFolder.appendingPathComponent("handoff")
        agent.arguments = ["agent", "--config", file.path, "--broker", frontend, backend]
        // Its log in a file, read until a line names the node (a fixed second need not be enough
        // for a slow start on a loaded machine), then the agent ended and every line read.
        let logFile = folder.appendingPathComponent("agent.log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let error = try FileHandle(forWritingTo: logFile)
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = error
        try agent.spawn()
        try error.close()
        func log() -> String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }
        _ = await eventually(within: .seconds(10)) { log().contains(#""node":"quoted"#) }
        agent.terminate()
        agent.waitUntilExit()
        let lines = log().split(separator: "\n")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == lines.count && !lines.isEmpty, "\(lines)")
        #expect(objects.contains { ($0["metadata"] as? [String: Any])?["node"] as? String == "quoted \"agent\"\tname" }, "\(lines)")
    }
}
