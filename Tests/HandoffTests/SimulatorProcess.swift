import Foundation
import Handoff
import HandoffTestSupport

/// `handoff-sim` as a process (it runs with deterministic hashing, which a test process does not),
/// its output and status. It is pure computation on a virtual clock, so the suite runs it beside
/// the `.exclusive` tests (as one of them it added a chain of about 140 s to the parallel pass),
/// where it must take only the CPU they leave idle and none of the test process's own time:
/// - at SCHED_IDLE priority (`chrt --idle`; nice 19 where that is refused), as scripts/test's own
///   runs are (at nice 10, two dozen of these outweighed the test process and failed tests whose
///   sockets wait 5 s);
/// - at most three at once (``simulatorRuns``: each is a process its kernel must switch to);
/// - its end awaited, not polled, and its output read from a file once it has exited: a trace is
///   larger than a pipe's buffer, a blocking read of a pipe holds a thread of Swift's pool (two
///   here) for the whole run, and two dozen runs polling every 20 ms kept that pool busy waking
///   them (both failed tests that wait on the pool for a socket's answer).
func runSimulator(_ arguments: [String], timeout: Duration = .seconds(600)) async throws -> (status: Int32, output: String) {
    try await simulatorRuns.run {
        // The launcher is probed with a process of its own at the first run (``Spawning``).
        try await Spawning.untilFewDescriptors()
        let process = Process()
        let (launcher, launcherArguments) = idleLauncher
        process.executableURL = URL(fileURLWithPath: launcher)
        process.arguments = launcherArguments + [buildFolder.appendingPathComponent("handoff-sim").path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging([ParentWatch.variable: "1"]) { $1 }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-sim-\(UUID().uuidString).out")
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw ProcessFailure("cannot create \(file.path) for handoff-sim's output")
        }
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try FileHandle(forWritingTo: file)
        defer { try? output.close() }
        process.standardOutput = output
        process.standardError = output
        let (exited, exit) = AsyncStream<Void>.makeStream()
        process.terminationHandler = { _ in exit.finish() }
        try await process.spawnWhenFewDescriptors()
        defer { reap(process) }
        let ended = await within(timeout) { () async -> Bool in
            for await _ in exited {}
            return true
        }
        guard ended != nil else {
            throw ProcessFailure("handoff-sim \(arguments.joined(separator: " ")) did not finish within \(timeout)")
        }
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: try Data(contentsOf: file), as: UTF8.self))
    }
}

/// How many `handoff-sim` processes the simulator's tests run at once.
private let simulatorRuns = TaskLimit(width: 3)

/// A command that runs what follows it at SCHED_IDLE, or at nice 19 where SCHED_IDLE is refused.
private let idleLauncher: (path: String, arguments: [String]) = {
    let chrt = Process()
    chrt.executableURL = URL(fileURLWithPath: "/usr/bin/chrt")
    chrt.arguments = ["--idle", "0", "true"]
    if (try? chrt.spawn()) != nil {
        chrt.waitUntilExit()
        if chrt.terminationStatus == 0 { return ("/usr/bin/chrt", ["--idle", "0"]) }
    }
    return ("/usr/bin/nice", ["-n", "19"])
}()
