import Foundation
import Glibc
import Testing
import HandoffTestSupport

@Suite("Processes end with whoever started them, when asked (HANDOFF_EXIT_WITH_PARENT)", .exclusive)
struct ParentWatchTests {
    /// A broker started by a shell that is then killed with -9: its pid, and whether it outlived
    /// the shell by `wait`.
    func brokerAfterItsStarterIsKilled(asked: Bool, wait: Duration) async throws -> (pid: pid_t, alive: Bool) {
        let ports = try freePorts(2)
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "\"$0\" broker --frontend \"$1\" --backend \"$2\" --log-level error & echo $!; wait",
                           buildFolder.appendingPathComponent("handoff").path, ports[0], ports[1]]
        var environment = ProcessInfo.processInfo.environment
        environment["HANDOFF_EXIT_WITH_PARENT"] = asked ? "1" : nil
        shell.environment = environment
        let output = Spawning.pipe()
        shell.standardOutput = output
        try shell.spawn()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let pid = pid_t(line) else {
            kill(shell.processIdentifier, SIGKILL)
            Issue.record("the shell said \(line)")
            throw CancellationError()
        }
        do {
            try await Task.sleep(for: .milliseconds(500))
            #expect(running(pid), "the broker did not start")
            kill(shell.processIdentifier, SIGKILL)
            // (Not waitUntilExit: Foundation waits there for every holder of a descriptor it gave
            // the shell, the broker among them.)
            #expect(await eventually(within: .seconds(2)) { !running(shell.processIdentifier) }, "the shell outlived SIGKILL")
            try await Task.sleep(for: wait)
        } catch {
            // Cancelled: neither the shell nor the broker (a daemon, when not asked) outlives the test.
            kill(shell.processIdentifier, SIGKILL)
            kill(pid, SIGKILL)
            throw error
        }
        return (pid, running(pid))
    }

    /// Whether `pid` runs (a zombie nobody reaped has ended).
    func running(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(close, offsetBy: 2)...].hasPrefix("Z")
    }

    @Test("asked, a broker whose starter is killed with -9 ends within a second; not asked, it runs on as a daemon does")
    func endsWithItsStarter() async throws {
        // Within a second, or later by what the machine held the processes back.
        let asked = try await brokerAfterItsStarterIsKilled(asked: true, wait: .zero)
        let ended = await eventually(within: .seconds(1)) { !running(asked.pid) }
        #expect(ended, "the broker outlived the shell that started it")
        if !ended { kill(asked.pid, SIGKILL) }
        let daemon = try await brokerAfterItsStarterIsKilled(asked: false, wait: .seconds(1))
        #expect(daemon.alive, "a broker nobody asked to end with its starter ended")
        kill(daemon.pid, SIGKILL)
    }
}
