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
public final class StallProbe: Sendable {
    private let lateness = Atomic<Int64>(0)
    private let stopped = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    private init() {}

    /// Starts a thread that sleeps 10 ms at a time and adds up how late it wakes.
    public static func start() -> StallProbe {
        let probe = StallProbe()
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

    /// Stops the thread; how long it was held past its wakes, in all.
    public func stop() -> Duration {
        stopped.store(true, ordering: .relaxed)
        done.wait()
        return .nanoseconds(lateness.load(ordering: .relaxed))
    }
}
