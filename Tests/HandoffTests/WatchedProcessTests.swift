import Foundation
import Glibc
import HandoffTestSupport
import Testing

@Suite("Programs not ours end with the test process (HandoffTestNode watch)")
struct WatchedProcessTests {
    /// A program that says its pid in `file` and then sleeps a minute: `sh` execs `sleep` in its
    /// own place, so the pid is the sleeper's.
    private static func sleeper(saying file: URL) -> [String] {
        ["/bin/sh", "-c", "echo $$ > \"$0\"; exec sleep 60", file.path]
    }

    private static func pid(in file: URL) async -> pid_t? {
        var pid: pid_t?
        _ = await eventually(within: .seconds(10)) {
            pid = (try? String(contentsOf: file, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return pid != nil
        }
        return pid
    }

    /// Gone, or a zombie its new parent has not reaped yet.
    private static func ended(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return true }
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }

    @Test("the watcher killed with -9 (a test's reap): the program is killed with it")
    func reapedWatcherEndsTheProgram() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("watched-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let command = Self.sleeper(saying: file)
        let watcher = Process.watched(URL(fileURLWithPath: command[0]), Array(command.dropFirst()))
        try watcher.run()
        let pid = try #require(await Self.pid(in: file))
        #expect(!Self.ended(pid))
        reap(watcher)
        #expect(await eventually(within: .seconds(5)) { Self.ended(pid) }, "the program outlived its watcher")
    }

    @Test("the process that started the watcher killed with -9: the watcher and the program end")
    func parentGoneEndsTheProgram() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("watched-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        // A shell stands for the test process: it starts the watcher and is then killed.
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "\"$0\" watch -- /bin/sh -c 'echo $$ > \"$0\"; exec sleep 60' \"$1\" & wait",
                           ChildProcess.testNodeURL.path, file.path]
        try shell.run()
        let pid = try #require(await Self.pid(in: file))
        #expect(!Self.ended(pid))
        reap(shell)
        // The watcher reads its parent every 200 ms.
        #expect(await eventually(within: .seconds(5)) { Self.ended(pid) }, "the program outlived the process that started it")
    }

    @Test("the program's exit status is the watcher's")
    func exitStatusPassedOn() async throws {
        let watcher = Process.watched(URL(fileURLWithPath: "/bin/sh"), ["-c", "exit 7"])
        try watcher.run()
        watcher.waitUntilExit()
        #expect(watcher.terminationStatus == 7)
    }
}
