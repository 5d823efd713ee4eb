import Foundation
import HandoffExecutor
import Testing
@testable import ZeroMQ
import HandoffTestSupport

/// The process's shared loops, which wait on the sockets' readiness between jobs.
@Suite("Event loops", .exclusive)
struct EventLoopsTests {
    /// Sends and receives 200 messages on a PUSH/PULL pair; returns in how many rounds the receiving
    /// task ran on a shared loop.
    static func roundsOnLoops() async throws -> Int {
        let context = try Context()
        let pull = try context.socket(.pull)
        try pull.bind("tcp://127.0.0.1:*")
        let push = try context.socket(.push)
        try push.connect(try pull.lastEndpoint)
        var onLoops = 0
        for round in 0..<200 {
            try await push.send(Array("round \(round)".utf8))
            let frame = try #require(await pull.receive(timeout: .seconds(5)))
            #expect(frame.data == Data("round \(round)".utf8))
            if EventLoops.shared.isCurrent { onLoops += 1 }
        }
        return onLoops
    }

    @Test("a message wakes the loop that waits for its socket, and a task preferring the loops receives it there")
    func receiveOnLoop() async throws {
        let onLoops = try await withTaskExecutorPreference(EventLoops.shared) { try await Self.roundsOnLoops() }
        #expect(onLoops == 200)
    }

    @Test("a task on Swift's own pool waits on sockets too: the loops watch their readiness for it")
    func receiveOffLoop() async throws {
        let onLoops = try await Self.roundsOnLoops()
        #expect(onLoops == 0)
    }

    @Test("by default one loop per CPU but one (libzmq's I/O thread keeps a CPU), at most two, at least one")
    func defaultLoopCount() {
        #expect(EventLoops.defaultThreads(processors: 1) == 1)
        #expect(EventLoops.defaultThreads(processors: 2) == 1)
        #expect(EventLoops.defaultThreads(processors: 3) == 2)
        #expect(EventLoops.defaultThreads(processors: 16) == 2)
        #expect(EventLoops.defaultThreads(processors: 192) == 2)
    }

    @Test("as many loops as HANDOFF_EVENT_LOOP_THREADS asks for (scripts/test's second pass: one)")
    func loopCountFollowsTheEnvironment() async throws {
        let expected = EventLoops.requestedThreads ?? EventLoops.defaultThreads
        #expect(EventLoops.shared.threadCount == expected)
        #expect(!EventLoops.configure(threads: expected + 1), "configured after the loops started")
        // Each loop thread names itself once it runs, so look for a while.
        func loopNames() throws -> Set<String> {
            let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
            return Set(tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
                .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { $0.hasPrefix("handoff-loop-") })
        }
        let wanted = Set((0..<expected).map { "handoff-loop-\($0)" })
        let deadline = ContinuousClock.now + .seconds(2)
        var names = try loopNames()
        while names != wanted, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            names = try loopNames()
        }
        #expect(names == wanted)
    }
}
