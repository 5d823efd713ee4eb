import Foundation
import Testing
import HandoffTestSupport

/// A process that says it is ready can be stopped gracefully from that moment: scripts, chaos runs
/// and systemd send SIGTERM on seeing the line, and the process must not die of the signal's
/// default action because its handlers were not in place yet.
@Suite("Stopped the moment it is ready", .exclusive)
struct StopOnReadyTests {
    /// Runs `handoff arguments`, sends SIGTERM from the reading thread as soon as a line of its
    /// standard output contains `ready`, and returns how it ended.
    func stopOnReady(_ arguments: [String], ready: String) throws -> (reason: Process.TerminationReason, status: Int32, sawReady: Bool) {
        let process = Process()
        process.executableURL = buildFolder.appendingPathComponent("handoff")
        process.arguments = arguments
        let output = Spawning.pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.spawn()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) }; process.waitUntilExit() }
        var seen = Data()
        var sawReady = false
        let deadline = Date() + 20
        while !sawReady, Date() < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // end of file: it exited
            seen.append(chunk)
            if String(decoding: seen, as: UTF8.self).contains(ready) {
                sawReady = true
                kill(process.processIdentifier, SIGTERM)
            }
        }
        let stopDeadline = Date() + 15
        while process.isRunning, Date() < stopDeadline { usleep(10_000) }
        return (process.terminationReason, process.isRunning ? -1 : process.terminationStatus, sawReady)
    }

    @Test("`handoff broker` sent SIGTERM the moment it prints `broker ready` exits 0, every time (20 rounds)")
    func brokerStopsGracefully() throws {
        for round in 0..<20 {
            let ended = try stopOnReady(["broker", "--frontend", "tcp://127.0.0.1:*", "--backend", "tcp://127.0.0.1:*", "--log-level", "error"], ready: "broker ready")
            #expect(ended.sawReady, "round \(round): no ready line")
            #expect(ended.reason == .exit && ended.status == 0, "round \(round): ended by \(ended.reason == .uncaughtSignal ? "signal" : "exit") \(ended.status)")
            if ended.reason != .exit || ended.status != 0 { return }
        }
    }
}
