import Foundation
import Handoff
import HandoffTestSupport
import Testing

/// Alone among the `.exclusive` tests: the others open and close sockets and pipes all the time,
/// and start processes, which these refuse while they hold more than 1,200 descriptors.
@Suite("Counting this process's open descriptors, and starting processes only while few are open", .exclusive(.alone))
struct OpenDescriptorsTests {
    /// `count` pipes, both ends open until `body` returns.
    private func withPipes<Result>(_ count: Int, _ body: () async throws -> Result) async throws -> Result {
        var ends: [Int32] = []
        defer { ends.forEach { close($0) } }
        for _ in 0..<count {
            var pair: [Int32] = [0, 0]
            try #require(pipe(&pair) == 0, "pipe: errno \(errno)")
            ends += pair
        }
        return try await body()
    }

    private func trueProcess() -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/true")
        return process
    }

    @Test("the count follows descriptors opened and closed, and agrees with the names /proc/self/fd lists")
    func countFollowsDescriptors() async throws {
        // The tests that run beside these (the simulator's runs, the wire's) may open a descriptor
        // or two meanwhile: one attempt of five undisturbed is enough.
        var attempts: [(before: Int?, during: Int?, listed: Int, after: Int?)] = []
        for _ in 0..<5 {
            let before = OpenDescriptors.count()
            // A few hundred: few enough that listing the names (the count's check) is safe too.
            let (during, listed) = try await withPipes(150) {
                (OpenDescriptors.count(), try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count)
            }
            let after = OpenDescriptors.count()
            attempts.append((before, during, listed, after))
            // The listing's own descriptor is in both (each lists while it holds the folder open).
            if let before, during == before + 300, during == listed, after == before { return }
        }
        Issue.record("no attempt counted 300 more descriptors, as many as listed, and as many as before after: \(attempts)")
    }

    @Test("with more than 1,200 descriptors open, starting a process is refused in words (Foundation's Process.run() could crash), and a start that waits starts once they are closed")
    func spawnRefusedWithManyDescriptors() async throws {
        let open = try #require(OpenDescriptors.count())
        let waiting = trueProcess()
        // 150 over the limit: the tests beside this one (the wire's, the simulator's runs) close
        // descriptors of their own meanwhile, and 20 over it was once not enough (CI, 2026-12-07:
        // the refusal and the wait both saw the count back under the limit).
        let started = try await withPipes((Spawning.descriptorLimit - open) / 2 + 75) { () async throws -> Task<Void, any Error> in
            let refused = #expect(throws: Spawning.TooManyDescriptors.self) { try trueProcess().spawn() }
            #expect(refused?.open ?? 0 > Spawning.descriptorLimit)
            #expect("\(refused.map { "\($0)" } ?? "")".contains("swift-corelibs-foundation#5472"))
            let start = Task { try await waiting.spawnWhenFewDescriptors() }
            try await Task.sleep(for: .milliseconds(200))
            #expect(!waiting.isRunning && waiting.processIdentifier == 0, "started with the descriptors open")
            return start
        }
        try await started.value
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus == 0)
    }

    @Test("while a test says it holds many descriptors, no process starts: one is refused, one that waits starts after")
    func spawnRefusedWhileManyHeld() async throws {
        let waiting = trueProcess()
        let started = try await Spawning.withManyDescriptors { () async throws -> Task<Void, any Error> in
            let refused = #expect(throws: Spawning.TooManyDescriptors.self) { try trueProcess().spawn() }
            #expect(refused?.open == nil)
            let start = Task { try await waiting.spawnWhenFewDescriptors() }
            try await Task.sleep(for: .milliseconds(200))
            #expect(waiting.processIdentifier == 0, "started while many were held")
            return start
        }
        try await started.value
        waiting.waitUntilExit()
        #expect(waiting.terminationStatus == 0)
    }
}
