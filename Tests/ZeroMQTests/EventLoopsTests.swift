import Foundation
import Synchronization
import Testing
@testable import ZeroMQ

/// The event loops as the process's executor. `scripts/test` runs the whole suite on them
/// (`HANDOFF_EVENT_LOOPS=1`); run alone, these tests install them (installing late is allowed).
@Suite("Event loops")
struct EventLoopsTests {
    /// Installs the loops unless the environment keeps Swift's own pool (then the test fails with
    /// that reason), and moves the calling task onto them (a job that started before the install
    /// finishes where it began).
    static func loops() async -> Bool {
        EventLoops.install()
        await Task.yield()
        return EventLoops.isInstalled
    }

    @Test("tasks run on the loops: ten thousand child tasks all finish, each on a loop thread")
    func tasksRunOnLoops() async throws {
        try #require(await Self.loops(), "HANDOFF_EVENT_LOOPS=0")
        let offLoop = OffLoopCount()
        let sum = await withTaskGroup(of: Int.self) { group in
            for value in 0..<10_000 {
                group.addTask {
                    if LoopThread.current == nil { offLoop.count.add(1, ordering: .relaxed) }
                    return value
                }
            }
            return await group.reduce(0, +)
        }
        #expect(sum == 49_995_000)
        #expect(offLoop.count.load(ordering: .relaxed) == 0)
    }

    @Test("a message wakes the loop that waits for its socket, and the receiving task runs there")
    func receiveOnLoop() async throws {
        try #require(await Self.loops(), "HANDOFF_EVENT_LOOPS=0")
        let context = try Context()
        let pull = try context.socket(.pull)
        try pull.bind("tcp://127.0.0.1:*")
        let push = try context.socket(.push)
        try push.connect(try pull.lastEndpoint)
        for round in 0..<200 {
            try await push.send(Array("round \(round)".utf8))
            let frame = try #require(await pull.receive(timeout: .seconds(5)))
            #expect(frame.data == Data("round \(round)".utf8))
            #expect(LoopThread.current != nil)
        }
    }

    @Test("a job queued by the loop that runs it next wakes no other loop; any other job wakes one that sleeps")
    func wakePolicy() {
        #expect(!LoopExecutor.wakes(local: true, queued: 1, idle: 1))
        #expect(LoopExecutor.wakes(local: true, queued: 2, idle: 1))  // a backlog: another loop helps
        #expect(LoopExecutor.wakes(local: false, queued: 1, idle: 1))
        #expect(!LoopExecutor.wakes(local: false, queued: 3, idle: 0))  // none asleep: the busy ones get to it
    }

    @Test("inside a job a loop runs what it queues next only while handing off")
    func handingOffMarksTheThread() async throws {
        try #require(await Self.loops(), "HANDOFF_EVENT_LOOPS=0")
        let loop = try #require(LoopThread.current)
        #expect(loop.inJob && !loop.runsNext)
        EventLoops.handingOff {
            #expect(loop.runsNext)
            EventLoops.handingOff { #expect(loop.runsNext) }
            #expect(loop.runsNext)
        }
        #expect(!loop.runsNext)
    }

    @Test("as many loops as HANDOFF_EVENT_LOOP_THREADS asks for (scripts/test's second pass: one)")
    func loopCountFollowsTheEnvironment() async throws {
        try #require(await Self.loops(), "HANDOFF_EVENT_LOOPS=0")
        let expected = EventLoops.requestedThreads ?? EventLoops.defaultThreads
        // Threads started from a loop inherit its name; the loops' own names go from 0 to count - 1.
        // Each loop thread names itself once it runs (ThreadName.setCurrent; Foundation's Thread.name
        // left 2 to 3 threads in 100 unnamed, twice a loop here in CI), so it looks for a while.
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

    @Test("Task.sleep resumes on the loops, and sleeping tasks do not hold a loop")
    func sleepsResume() async throws {
        try #require(await Self.loops(), "HANDOFF_EVENT_LOOPS=0")
        let started = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            // More sleepers than loops: each must give its loop back while it sleeps.
            for _ in 0..<50 { group.addTask { try? await Task.sleep(for: .milliseconds(100)) } }
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(LoopThread.current != nil)
    }
}

/// Tasks that ran off the loops.
final class OffLoopCount: Sendable {
    let count = Atomic<Int>(0)
}
