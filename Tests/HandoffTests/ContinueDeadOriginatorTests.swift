import Foundation
import Testing
import HandoffTestSupport

@Suite("handoff continue when the originator dies", .exclusive)
struct ContinueDeadOriginatorTests {
    @Test("`handoff continue --save` shows what it waits for while the originator is stopped, and fails within 3 s of its kill -9 (peer lost, no file), not after the 30 s resume window")
    func originatorStoppedThenKilled() async throws {
        let (broker, frontend, backend) = try await startBroker()
        // 64 MiB paced at 8 MiB/s: the stop and the kill land mid-transfer.
        let source = try ChildProcess(["stream-source", frontend, backend, String(64 << 20), String(8 << 20)])
        let ready = try await source.ready()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("dead-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }

        async let run = runHandoff(["continue", "--id", ready[0], "--save", file.path, "--broker", frontend, backend, "--log-level", "error"])
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let written = (try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int) ?? 0
            if written >= 8 << 20 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        // Stopped, the originator still holds its connection: the continuing side waits, and says so.
        // (It says so after a second without news, at most once a second: 2.5 s gives it room, and a
        // machine that held the processes back meanwhile gives it that much longer.)
        source.signal(SIGSTOP)
        let stopped = StallProbe.start()
        try await Task.sleep(for: .milliseconds(2_500))
        try await Task.sleep(for: stopped.stop())
        source.signal(SIGKILL)
        let killed = ContinuousClock.now
        let probe = StallProbe.start()
        let result = try await run
        let taken = ContinuousClock.now - killed, stall = probe.stop()
        print("`handoff continue --save` ended \(taken) after the originator's kill: \(result.error.split(separator: "\n").suffix(3))")
        #expect(result.status == 1)
        #expect(taken < .seconds(3) + stall, "it took \(taken) to give up on a dead originator (stalled \(stall))")
        #expect(result.error.contains("nothing new from the originator"), "no waiting shown: \(result.error)")
        #expect(result.error.contains("peer lost") && result.error.contains("refuses connections"), "\(result.error)")
        #expect(!FileManager.default.fileExists(atPath: file.path), "a partial file was left")
        _ = broker
    }
}
