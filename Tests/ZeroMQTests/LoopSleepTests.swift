import Dispatch
import Foundation
import HandoffExecutor
import Synchronization
import Testing
@testable import ZeroMQ
import HandoffTestSupport

/// `EventLoops.sleep`, a node's clock on the loops' own rather than on Swift's global pool; and
/// loops that never run out of jobs, which still look at the sockets and the clock between them.
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

    /// A task per loop that yields again and again for `duration`: each loop always has a job and
    /// never waits in `epoll_wait`.
    static func keepTheLoopsBusy(for duration: Duration) -> [Task<Void, Never>] {
        (0..<EventLoops.shared.threadCount).map { _ in
            Task(executorPreference: EventLoops.shared) {
                let started = ContinuousClock.now
                while ContinuousClock.now - started < duration { await Task.yield() }
            }
        }
    }

    @Test("rule: a sleep on the loops wakes at its deadline while every thread of Swift's pool is held; Task.sleep waits for the pool",
          .exclusive(.alone))
    func wakesWithThePoolHeld() async throws {
        // On the loops, so that this test's own steps do not wait for the pool it holds.
        try await withTaskExecutorPreference(EventLoops.shared) {
            // Every thread of the pool held (it has one per CPU) until told, once all are.
            let threads = ProcessInfo.processInfo.activeProcessorCount
            let hold = PoolHold()
            let held = (0..<threads).map { _ in
                Task.detached {
                    hold.holding.add(1, ordering: .relaxed)
                    while !hold.release.load(ordering: .relaxed) { usleep(1_000) }
                }
            }
            let asked = ContinuousClock.now
            while hold.holding.load(ordering: .relaxed) < threads, ContinuousClock.now - asked < .seconds(10) {
                try await EventLoops.sleep(for: .milliseconds(1))
            }
            let all = hold.holding.load(ordering: .relaxed) == threads
            let onLoops = Self.lateness(of: .milliseconds(30)) { try await EventLoops.sleep(for: $0) }
            let throughPool = Self.lateness(of: .milliseconds(30)) { try await Task.sleep(for: $0) }
            let loopLate = try await onLoops.value
            // The pool still held for a while: Task.sleep's wake waits for it (the control, without
            // which the rule above proves nothing).
            try await EventLoops.sleep(for: .milliseconds(200))
            hold.release.store(true, ordering: .relaxed)
            let poolLate = try await throughPool.value
            for task in held { await task.value }
            #expect(all, "the pool's threads were not all held within 10 s")
            #expect(loopLate < .milliseconds(150), "woke \(loopLate) late on the loops")
            // The control: Task.sleep's wake waited for the pool here (the pool's threads held, a
            // sleep through it is late). Once, in CI's parallel pass, it woke on time with every
            // thread counted as held (0.17 ms late): why is not known, so the control is not a
            // verdict; the rule above is checked either way.
            withKnownIssue("Task.sleep woke on time with the pool held", isIntermittent: true) {
                #expect(poolLate >= .milliseconds(150), "Task.sleep woke only \(poolLate) late: the pool was not held")
            }
        }
    }

    @Test("rule: loops that never run out of jobs still wake a sleeper on time (they look at the clock between jobs)", .exclusive(.alone))
    func wakesWhileTheLoopsAreBusy() async throws {
        let lates = try await Self.upToThreeTries(within: .milliseconds(300)) {
            let busy = Self.keepTheLoopsBusy(for: .milliseconds(600))
            try await Task.sleep(for: .milliseconds(50))
            let late = try await Self.lateness(of: .milliseconds(20)) { try await EventLoops.sleep(for: $0) }.value
            for task in busy { await task.value }
            return late
        }
        #expect(lates.last! < .milliseconds(300), "woke \(lates) late while the loops were busy")
    }

    /// Measures up to three times until a measure is under `bound`; every measure taken. A rule
    /// broken is broken every time (without ``ReadinessWatcher/runDue()`` a sleeper or a socket's
    /// waiter waits until the loops' 600 ms of work end, every run), where a job of another test's
    /// node that holds the one loop a while (the suite's one-loop pass runs tests without the
    /// exclusive trait beside these, some with nodes: once 740 ms late) seldom comes three times.
    static func upToThreeTries(within bound: Duration, _ measure: () async throws -> Duration) async throws -> [Duration] {
        var measures: [Duration] = []
        for _ in 0..<3 {
            measures.append(try await measure())
            if measures.last! < bound { break }
        }
        return measures
    }

    @Test("rule: loops that never run out of jobs still wake a task whose socket became readable (they poll between jobs)", .exclusive(.alone))
    func readinessWhileTheLoopsAreBusy() async throws {
        let context = try Context()
        let pull = try context.socket(.pull)
        try pull.bind("tcp://127.0.0.1:*")
        let push = try context.socket(.push)
        try push.connect(try pull.lastEndpoint)
        try await push.send(Array("connected".utf8))
        _ = try #require(await pull.receive(timeout: .seconds(5)))
        // Each try's receiver is awaited before the next begins: one task uses the socket at a time.
        nonisolated(unsafe) let receiving = pull
        let waits = try await Self.upToThreeTries(within: .milliseconds(300)) {
            let busy = Self.keepTheLoopsBusy(for: .milliseconds(600))
            try await Task.sleep(for: .milliseconds(50))
            // Suspended on the socket, on the loops, before the message comes.
            let receiver = Task(executorPreference: EventLoops.shared) { () -> ContinuousClock.Instant? in
                guard try await receiving.receive(timeout: .seconds(5)) != nil else { return nil }
                return .now
            }
            try await Task.sleep(for: .milliseconds(50))
            let sent = ContinuousClock.now
            try await push.send(Array("now".utf8))
            let received = try #require(try await receiver.value, "nothing received within 5 s")
            for task in busy { await task.value }
            return received - sent
        }
        #expect(waits.last! < .milliseconds(300), "received \(waits) after the send while the loops were busy")
    }

    @Test("rule: a cancelled sleep ends at once with CancellationError; a deadline already past returns at once")
    func cancelledAndPast() async throws {
        let sleeper = Task(executorPreference: EventLoops.shared) { try await EventLoops.sleep(for: .seconds(60)) }
        try await Task.sleep(for: .milliseconds(20))
        let cancelled = ContinuousClock.now
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        // Ended by the cancellation, not at its deadline a minute on: half of it is the bound. The
        // one loop of CI's one-loop pass ran the resumed sleeper 5.7 s late once, at the pass's
        // start, with every test's nodes starting on it (2026-12-06); 5 s was too tight for that.
        #expect(ContinuousClock.now - cancelled < .seconds(30))
        let started = ContinuousClock.now
        try await EventLoops.sleep(until: started - .seconds(1))
        #expect(ContinuousClock.now - started < .seconds(1))
    }
}

/// Threads of the pool held by a test: how many hold, and whether to let go.
private final class PoolHold: Sendable {
    let holding = Atomic(0)
    let release = Atomic(false)
}
