import Foundation
import Glibc
import HandoffTestSupport
import Testing

@Suite("Programs not ours end with the test process (HandoffTestNode watch)", .exclusive)
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

    /// Starts `starter`, which starts the sleeper (saying its pid in `file`) through a watcher,
    /// kills `starter` with -9, and expects the sleeper to end.
    private static func sleeperEnds(killing starter: Process, file: URL, _ comment: Comment) async throws {
        defer { try? FileManager.default.removeItem(at: file) }
        try starter.spawn()
        let said = await pid(in: file)
        guard let pid = said else {
            reap(starter)  // and, through its watcher, whatever it started
            Issue.record("the sleeper never said its pid")
            return
        }
        #expect(!ended(pid))
        reap(starter)
        // (A watcher whose parent is gone sees it within 200 ms.)
        #expect(await eventually(within: .seconds(5)) { ended(pid) }, comment)
    }

    private static func pidFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("watched-\(UUID().uuidString)")
    }

    @Test("the watcher killed with -9 (a test's reap): the program is killed with it")
    func reapedWatcherEndsTheProgram() async throws {
        let file = Self.pidFile()
        let command = Self.sleeper(saying: file)
        let watcher = Process.watched(URL(fileURLWithPath: command[0]), Array(command.dropFirst()))
        try await Self.sleeperEnds(killing: watcher, file: file, "the program outlived its watcher")
    }

    @Test("the process that started the watcher killed with -9: the watcher and the program end")
    func parentGoneEndsTheProgram() async throws {
        let file = Self.pidFile()
        // A shell stands for the test process: it starts the watcher and is then killed.
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "\"$0\" watch -- \"$@\" & wait", ChildProcess.testNodeURL.path] + Self.sleeper(saying: file)
        try await Self.sleeperEnds(killing: shell, file: file, "the program outlived the process that started it")
    }

    @Test("the program's exit status is the watcher's")
    func exitStatusPassedOn() async throws {
        let watcher = Process.watched(URL(fileURLWithPath: "/bin/sh"), ["-c", "exit 7"])
        try watcher.spawn()
        watcher.waitUntilExit()
        #expect(watcher.terminationStatus == 7)
    }
}
