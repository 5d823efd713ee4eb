import Dispatch
import Foundation
import HandoffExecutor
import Synchronization
import Testing
@testable import ZeroMQ
import HandoffTestSupport

/// `EventLoops.sleep`: a node's clock on the loops' own, not on Swift's global pool.
@Suite("Sleeping on the event loops")
struct LoopSleepTests {
    /// Sleeps `duration` in a task preferring the loops, by `sleep`; how late it woke.
    static func lateness(of duration: Duration, _ sleep: @escaping @Sendable (Duration) async throws -> Void) -> Task<Duration, any Error> {
        Task(executorPreference: EventLoops.shared) {
            let started = ContinuousClock.now
            try await sleep(duration)
            return ContinuousClock.now - started - duration
        }
    }

    @Test("rule: a sleep on the loops wakes at its deadline while every thread of Swift's pool is held; Task.sleep waits for the pool",
          .exclusive(.alone))
    func wakesWithThePoolHeld() async throws {
        let onLoops = Self.lateness(of: .milliseconds(30)) { try await EventLoops.sleep(for: $0) }
        let throughPool = Self.lateness(of: .milliseconds(30)) { try await Task.sleep(for: $0) }
        // Every thread of the pool held for 600 ms (it has one per CPU).
        let held = (0..<ProcessInfo.processInfo.activeProcessorCount).map { _ in
            Task.detached { usleep(600_000) }
        }
        let loopLate = try await onLoops.value, poolLate = try await throughPool.value
        for task in held { await task.value }
        #expect(loopLate < .milliseconds(300), "woke \(loopLate) late on the loops")
        // The control: the pool was held, or the rule above proved nothing.
        #expect(poolLate > .milliseconds(300), "Task.sleep woke only \(poolLate) late: the pool was not held")
    }

    @Test("rule: loops that never run out of jobs still wake a sleeper on time (they look between jobs)", .exclusive(.alone))
    func wakesWhileTheLoopsAreBusy() async throws {
        let busyFor = Duration.milliseconds(600)
        // A task per loop that yields again and again: each loop always has a job, never idles.
        let busy = (0..<EventLoops.shared.threadCount).map { _ in
            Task(executorPreference: EventLoops.shared) {
                let started = ContinuousClock.now
                while ContinuousClock.now - started < busyFor { await Task.yield() }
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        let late = try await Self.lateness(of: .milliseconds(20)) { try await EventLoops.sleep(for: $0) }.value
        for task in busy { await task.value }
        #expect(late < .milliseconds(300), "woke \(late) late while the loops were busy")
    }

    @Test("rule: a cancelled sleep ends at once with CancellationError; a deadline already past returns at once")
    func cancelledAndPast() async throws {
        let sleeper = Task(executorPreference: EventLoops.shared) { try await EventLoops.sleep(for: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(20))
        let cancelled = ContinuousClock.now
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(ContinuousClock.now - cancelled < .seconds(5))
        let started = ContinuousClock.now
        try await EventLoops.sleep(until: started - .seconds(1))
        #expect(ContinuousClock.now - started < .seconds(1))
    }
}
