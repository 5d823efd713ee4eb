import Foundation
import Synchronization

/// How late, in all, a plain thread of this process woke while a timed step ran: how long the
/// machine (CI's parallel pass, with the simulator beside it on two cores) held threads back. A test
/// that bounds a latency allows this much on top, so that a starved machine does not read as the
/// code's fault, while a stall of the code's own (an event loop held) still fails: the probe's
/// thread, outside every loop, wakes on time through it.
///
/// ```swift
/// let probe = StallProbe.start()
/// let waited = …  // the timed step
/// let stall = probe.stop()
/// #expect(waited < .seconds(3) + stall)
/// ```
///
/// `start(alsoOn:)` also measures an executor's threads (the event loops the nodes run on): a test
/// whose nodes share the loops with every test running beside it (the one-loop pass of
/// scripts/test, hundreds of tests at once as it begins) allows for their stalls too, where what
/// it checks is what a node rightly does after a stall (advertise again past its lease).
public final class StallProbe: Sendable {
    private let lateness = Atomic<Int64>(0)
    private let stopped = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    /// The executor's: how late its task woke, in all, and each time it woke more than
    /// ``longStall`` late (nanoseconds).
    private let executorLateness = Atomic<Int64>(0)
    private let executorStalls = Mutex<[Int64]>([])

    /// How late the executor's task must wake for ``stalls(longerThan:)`` to list it.
    public static let longStall = Duration.milliseconds(50)

    private init() {}

    /// Starts a thread that sleeps 10 ms at a time and adds up how late it wakes; with `executor`,
    /// also a task preferring it that does the same.
    public static func start(alsoOn executor: (any TaskExecutor)? = nil) -> StallProbe {
        let probe = StallProbe()
        if let executor {
            let began = ContinuousClock.now
            Task(executorPreference: executor) { [probe] in await probe.measure(since: began) }
        }
        let thread = Thread { [probe] in
            defer { probe.done.signal() }
            let tick = Duration.milliseconds(10)
            while !probe.stopped.load(ordering: .relaxed) {
                let before = ContinuousClock.now
                usleep(10_000)
                let late = (ContinuousClock.now - before - tick) / .microseconds(1)
                probe.lateness.add(Int64(max(0, late)) * 1_000, ordering: .relaxed)
            }
        }
        thread.name = "stall probe"
        thread.start()
        return probe
    }

    /// The executor's task: sleeps 10 ms at a time until stopped, adding up how late it wakes, and
    /// first how late it began after `began`: a loop held as the probe starts holds its task too,
    /// and was not counted (a test beside one that made 2,500 activities current in a debug build,
    /// which held the one loop of a one-loop pass for 2-3 s, read 0.28 s held).
    private func measure(since began: ContinuousClock.Instant) async {
        let startedLate = (ContinuousClock.now - began) / .nanoseconds(1)
        executorLateness.add(Int64(startedLate), ordering: .relaxed)
        if startedLate >= Self.longStall / .nanoseconds(1) { executorStalls.withLock { $0.append(Int64(startedLate)) } }
        let tick = Duration.milliseconds(10)
        while !stopped.load(ordering: .relaxed) {
            let before = ContinuousClock.now
            try? await Task.sleep(for: tick)
            let late = max(.zero, ContinuousClock.now - before - tick) / .nanoseconds(1)
            executorLateness.add(Int64(late), ordering: .relaxed)
            if late >= Self.longStall / .nanoseconds(1) { executorStalls.withLock { $0.append(Int64(late)) } }
        }
    }

    /// How long, so far, the thread was held past its wakes in all, or the executor's task,
    /// whichever was held longer; the probes go on.
    public var heldSoFar: Duration {
        .nanoseconds(max(lateness.load(ordering: .relaxed), executorLateness.load(ordering: .relaxed)))
    }

    /// Stops the probes; how long the thread was held past its wakes in all, or the executor's
    /// task, whichever was held longer.
    public func stop() -> Duration {
        stopped.store(true, ordering: .relaxed)
        done.wait()
        // The executor's task ends at its next wake, not waited for here: a test's thread may be
        // one of the pool's few, and must not block on a task.
        return .nanoseconds(max(lateness.load(ordering: .relaxed), executorLateness.load(ordering: .relaxed)))
    }

    /// How many times, until ``stop()``, the executor's task woke `duration` late or more (at
    /// least ``longStall``).
    public func stalls(longerThan duration: Duration) -> Int {
        let bound = Int64(max(duration, Self.longStall) / .nanoseconds(1))
        return executorStalls.withLock { $0.count { $0 >= bound } }
    }
}
