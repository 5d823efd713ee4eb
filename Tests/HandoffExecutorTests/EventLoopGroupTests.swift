import Foundation
import Synchronization
import Testing
@testable import HandoffExecutor
import HandoffTestSupport

/// The executor on public Swift API alone: tasks with the group as their executor preference, and
/// the actors they call.
@Suite("Event loop group", .exclusive)
struct EventLoopGroupTests {
    /// Groups of their own (their threads live as long as the test process): two loops, and one.
    static let two = EventLoopGroup(threads: 2, name: "test-two")
    static let one = EventLoopGroup(threads: 1, name: "test-one")

    @Test("a task with the group as its preference runs there, and so do its ten thousand child tasks")
    func preferredTasksRunOnTheLoops() async {
        let group = Self.two
        let (onLoops, sum) = await withTaskExecutorPreference(group) { () async -> (Bool, Int) in
            let here = group.isCurrent
            let sum = await withTaskGroup(of: Int.self) { children in
                for value in 0..<10_000 {
                    children.addTask { group.isCurrent ? value : -1_000_000_000 }
                }
                return await children.reduce(0, +)
            }
            return (here, sum)
        }
        #expect(onLoops)
        #expect(sum == 49_995_000)
    }

    @Test("Task.sleep resumes on the loops, and sleeping tasks do not hold a loop")
    func sleepsResumeOnTheLoops() async {
        let group = Self.one
        // How many sleepers were asleep at once, at the most. A sleeper that held the one loop
        // while it slept would keep the others from starting to sleep: the peak would be 1. Counted,
        // not timed: a loaded machine can stall the whole process for seconds (CI saw 2.4 s before
        // the first test ended) without a sleeper holding anything.
        let sleepers = Sleepers()
        let resumedOnLoop = await withTaskExecutorPreference(group) { () async -> Int in
            await withTaskGroup(of: Bool.self) { children in
                // More sleepers than loops: each must give its loop back while it sleeps.
                for _ in 0..<50 {
                    children.addTask {
                        sleepers.fallAsleep()
                        try? await Task.sleep(for: .milliseconds(100))
                        sleepers.wake()
                        return group.isCurrent
                    }
                }
                return await children.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
        }
        #expect(resumedOnLoop == 50)
        #expect(sleepers.peak.load(ordering: .acquiring) > 1)
    }

    /// How many sleepers are asleep now, and how many were at the most.
    final class Sleepers: Sendable {
        let asleep = Atomic(0)
        let peak = Atomic(0)

        func fallAsleep() {
            let now = asleep.add(1, ordering: .acquiringAndReleasing).newValue
            peak.max(now, ordering: .acquiringAndReleasing)
        }

        func wake() {
            asleep.subtract(1, ordering: .acquiringAndReleasing)
        }
    }

    /// A default actor (no executor of its own) that records whether two of its jobs ever
    /// overlapped, where they ran, and in what order each caller's calls came.
    actor Counter {
        let group: EventLoopGroup
        private let inside = Atomic(0)
        private(set) var overlapped = false
        private(set) var offLoop = 0
        private(set) var order: [Int: [Int]] = [:]

        init(on group: EventLoopGroup) {
            self.group = group
        }

        func record(caller: Int, step: Int) async {
            if inside.add(1, ordering: .acquiringAndReleasing).newValue != 1 { overlapped = true }
            if !group.isCurrent { offLoop += 1 }
            order[caller, default: []].append(step)
            for _ in 0..<100 { _ = inside.load(ordering: .relaxed) }  // a little work inside
            inside.subtract(1, ordering: .acquiringAndReleasing)
        }
    }

    @Test("an actor called from tasks preferring the loops runs there, one job at a time, in each caller's order")
    func actorsRunOnTheCallersLoops() async {
        let counter = Counter(on: Self.two)
        await withTaskGroup(of: Void.self) { callers in
            for caller in 0..<8 {
                callers.addTask(executorPreference: Self.two) {
                    for step in 0..<500 { await counter.record(caller: caller, step: step) }
                }
            }
        }
        #expect(await !counter.overlapped)
        #expect(await counter.offLoop == 0)
        let order = await counter.order
        #expect(order.count == 8)
        #expect(order.values.allSatisfy { $0 == Array(0..<500) })
    }

    @Test("a return from an actor to a caller preferring the loops stays on the caller's loop: a thousand calls wake the other loop a few times at most")
    func hopsStayOnTheirLoop() async {
        let group = EventLoopGroup(threads: 2, name: "test-hops")
        let counter = Counter(on: group)
        let wakes = await withTaskExecutorPreference(group) { () async -> Int in
            for step in 0..<100 { await counter.record(caller: 0, step: step) }  // both loops settle idle
            try? await Task.sleep(for: .milliseconds(20))
            let before = group.wakesIssued.load(ordering: .relaxed)
            for step in 100..<1_100 { await counter.record(caller: 0, step: step) }
            return group.wakesIssued.load(ordering: .relaxed) - before
        }
        // Into the actor is a jump on the same thread; back to the caller's preferred executor is a
        // job queued while no task is current: without that, 1,949 wakes here.
        #expect(wakes < 50, "\(wakes) wakes for 1,000 returns")
        #expect(await counter.order[0] == Array(0..<1_100))
    }

    @Test("inside a job a loop runs what it queues next only while handing off")
    func handingOffMarksTheThread() async throws {
        let marks = await withTaskExecutorPreference(Self.one) { () -> [Bool] in
            guard let loop = LoopThread.current else { return [] }
            var marks = [loop.inJob && !loop.runsNext]
            EventLoopGroup.handingOff {
                marks.append(loop.runsNext)
                EventLoopGroup.handingOff { marks.append(loop.runsNext) }
                marks.append(loop.runsNext)
            }
            marks.append(!loop.runsNext)
            return marks
        }
        #expect(marks == [true, true, true, true, true])
    }

    @Test("work queued by the loop that runs it next wakes no other loop; any other work wakes one that sleeps")
    func wakePolicy() {
        #expect(!EventLoopGroup.wakes(local: true, queued: 1, idle: 1))
        #expect(EventLoopGroup.wakes(local: true, queued: 2, idle: 1))  // a backlog: another loop helps
        #expect(EventLoopGroup.wakes(local: false, queued: 1, idle: 1))
        #expect(!EventLoopGroup.wakes(local: false, queued: 3, idle: 0))  // none asleep: the busy ones get to it
    }

    @Test("the loops are threads named name-0 … name-(n-1)")
    func threadsAreNamed() async throws {
        _ = Self.two
        func names() throws -> Set<String> {
            let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")
            return Set(tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
                .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { $0.hasPrefix("test-two-") })
        }
        let deadline = ContinuousClock.now + .seconds(2)
        var seen = try names()
        while seen != ["test-two-0", "test-two-1"], ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            seen = try names()
        }
        #expect(seen == ["test-two-0", "test-two-1"])
    }
}
