import Foundation
import Glibc
@testable import Handoff
import Testing
import HandoffTestSupport

/// Debian's `faketime`, which runs a program with its wall clock shifted (libfaketime): where it is
/// installed. (Run as its wrapper: a Swift program started with libfaketime in `LD_PRELOAD` by
/// `posix_spawn` read no arguments here.)
let faketimeTool: String? = ["/usr/bin/faketime", "/usr/local/bin/faketime"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// A host whose clock goes back across a node's restart (NTP stepping a clock that ran ahead), with
/// real processes: `handoff broker` and `handoff advertise`, one of them under libfaketime.
@Suite("A node's host clock stepped back across a restart, with real processes", .exclusive)
struct ClockStepTests {
    /// What the simulator found (docs/testing.md, "Not simulated yet"): replay protection kept per
    /// key alone refused the next process's presence, numbered from a clock gone back, as a replay
    /// of the first's, and the follower lost its activity when the advertisement's lease ran out.
    @Test("secure, through a broker: an advertiser's next process, started with its host's clock 30 s behind the first's, keeps its activity at a follower past every lease: its presence is its own process's, not a replay of the first's",
          // Required, not skipped, where promtool is (CI and scripts/test install both: scripts/lib.sh).
          .enabled(if: faketimeTool != nil || promtoolRequired, "faketime is not installed (Debian's faketime); scripts/test and CI install it and require it"))
    func nextProcessAfterClockWentBack() async throws {
        let faketime = try #require(faketimeTool, "faketime is not installed (apt-get install faketime)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-clock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let account = folder.appendingPathComponent("account")
        for name in ["broker", "advertiser", "follower"] {
            let made = try await runHandoff(["keygen", name, "--out", account.path])
            try #require(made.status == 0, "\(made.error)")
        }
        let ports = try freePorts(2)
        let (frontend, backend) = (ports[0], ports[1])
        // Serving metrics once its sockets are bound: so it is ready.
        let (broker, _) = try await startServingMetrics(
            ["broker", "--frontend", frontend, "--backend", backend, "--key", account.appendingPathComponent("broker.key").path],
            log: folder.appendingPathComponent("broker.log"), environment: [ParentWatch.variable: "1"])
        defer { reap(broker) }
        /// `handoff advertise` of an activity titled `title`, its wall clock `ahead` seconds ahead (under
        /// `faketime`, whose child it then is: it stops when its parent goes, ParentWatch); its log in
        /// `title`.log.
        func advertise(_ title: String, ahead: Int) throws -> Process {
            let log = folder.appendingPathComponent("\(title).log")
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
            let handle = try FileHandle(forWritingTo: log)
            let handoff = buildFolder.appendingPathComponent("handoff").path
            let arguments = ["advertise", "--type", "org.test.clock", "--title", title, "--broker", frontend, backend,
                             "--key", account.appendingPathComponent("advertiser.key").path, "--log-level", "info"]
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ahead == 0 ? handoff : faketime)
            process.arguments = ahead == 0 ? arguments : ["-f", "+\(ahead)s", handoff] + arguments
            process.environment = ProcessInfo.processInfo.environment.merging([ParentWatch.variable: "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"]) { $1 }
            process.standardOutput = handle
            process.standardError = handle
            try process.spawn()
            return process
        }
        func log(_ title: String) -> String { (try? String(contentsOf: folder.appendingPathComponent("\(title).log"), encoding: .utf8)) ?? "" }
        var configuration = Node.Configuration(
            name: "follower", bus: .broker(frontend: frontend, backend: backend),
            advertiseInterval: .milliseconds(200), continueTimeout: .seconds(5), connectTimeout: .milliseconds(500))
        configuration.security = Security(
            keyPair: try KeyFile.readKeyPair(at: account.appendingPathComponent("follower.key").path),
            authorizedKeys: try KeyFile.readPublicKeys(at: account.path),
            brokerKey: try KeyFile.readPublicKey(account.appendingPathComponent("broker.pub").path))
        try await Node.withRunning(configuration) { node in
            func knows(_ title: String) async -> Bool { await node.activities().contains { $0.title == title } }
            // The first process, its clock 30 s ahead (within the 60-s replay window): believed.
            let first = try advertise("first", ahead: 30)
            defer { reap(first) }
            let firstArrived = await eventually(within: .seconds(15)) { await knows("first") }
            let knownFirst = await node.activities().map(\.title)
            #expect(firstArrived, "the first process's activity never arrived; known: \(knownFirst); running: \(first.isRunning) \(first.isRunning ? 0 : first.terminationStatus); its log: \(log("first"))")
            try await Task.sleep(for: .seconds(2))  // a presence of it heard, its sequence remembered
            // `faketime` killed, its child stops (ParentWatch: it withdraws its activity).
            kill(first.processIdentifier, SIGKILL)
            first.waitUntilExit()
            #expect(await eventually(within: .seconds(10)) { await !knows("first") }, "the first process did not stop: \(log("first"))")
            // The next process: its host's clock now 30 s behind where the first's was, its
            // sequences below the first's.
            let next = try advertise("next", ahead: 0)
            defer { reap(next) }
            let nextArrived = await eventually(within: .seconds(15)) { await knows("next") }
            let knownNext = await node.activities().map(\.title)
            #expect(nextArrived, "the next process's activity never arrived; known: \(knownNext); its log: \(log("next"))")
            // Its advertisement leases it for 6 s (three presences of 2 s); after that, only its
            // presences renew it. Refused as replays, it went at 6 s.
            let since = ContinuousClock.now
            var lostAfter: Duration?
            while ContinuousClock.now < since + .seconds(10), lostAfter == nil {
                if await !knows("next") { lostAfter = ContinuousClock.now - since }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(lostAfter == nil, "the next process's activity was lost \(lostAfter.map { "\($0)" } ?? "") after it arrived: its presences were refused")
        }
    }
}
