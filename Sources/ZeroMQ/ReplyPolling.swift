import HandoffExecutor
import Synchronization

/// While a task awaits a reply it asked for, one event loop with nothing to run polls the sockets
/// (`epoll_wait` with no timeout, again and again) instead of sleeping, until the reply comes, the
/// window the asker gave passes, or no reply is awaited any more.
///
/// Why: a loop asleep in `epoll_wait` takes a thread wake-up to see libzmq's signal, and on a
/// virtual machine a wake-up of a sleeping CPU costs tens of microseconds (an inter-processor
/// interrupt and the host rescheduling the vCPU). A continue between two nodes of one process
/// took four such wake-ups per round trip (the loop and libzmq's I/O thread woke each other twice),
/// where raw REQ/REP, whose replying thread shared a CPU with the I/O thread, took two. Polling
/// costs CPU only while a reply is awaited and at most the window per request; advertisements and
/// every message nobody asked for never start it. Linux's `SO_BUSY_POLL` (`net.core.busy_poll`)
/// makes the same trade for the same reason.
///
/// Every bound here is the asker's own: nothing from the network starts or lengthens polling.
final class ReplyPolling: Sendable {
    /// Replies awaited now (requests sent whose ``end()`` has not come).
    private let awaited = Atomic<Int>(0)
    /// The latest time (monotonic nanoseconds) any awaited reply's window reaches.
    private let until = Atomic<UInt64>(0)
    /// Whether a loop is polling now: one at a time, the others sleep as before.
    private let polling = Atomic<Bool>(false)
    /// How many times a loop began to poll (for the tests).
    let pollsBegun = Atomic(0)

    /// A reply is awaited, expected by `end` (monotonic nanoseconds).
    func begin(until end: UInt64) {
        awaited.add(1, ordering: .relaxed)
        var current = until.load(ordering: .relaxed)
        while current < end {
            let (exchanged, original) = until.compareExchange(expected: current, desired: end, ordering: .relaxed)
            if exchanged { break }
            current = original
        }
    }

    /// An awaited reply came (or its wait ended otherwise).
    func end() {
        awaited.subtract(1, ordering: .relaxed)
    }

    /// Whether any reply is awaited: a loop with none reads no clock for polling.
    var awaitsAny: Bool { awaited.load(ordering: .relaxed) > 0 }

    /// Whether a loop should poll rather than sleep at `now`.
    func wanted(now: UInt64) -> Bool {
        awaitsAny && now < until.load(ordering: .relaxed)
    }

    /// Makes the caller the polling loop, when polling is wanted and no other loop polls.
    func claim(now: UInt64) -> Bool {
        guard wanted(now: now), polling.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return false }
        pollsBegun.add(1, ordering: .relaxed)
        return true
    }

    /// Whether a loop polls now.
    var isPolling: Bool { polling.load(ordering: .relaxed) }

    /// Replies awaited now (for the tests: every wait that ends says so).
    var awaitedCount: Int { awaited.load(ordering: .relaxed) }

    /// The polling loop stops polling.
    func release() {
        polling.store(false, ordering: .releasing)
    }
}

extension EventLoops {
    /// Tells the loops that the caller awaits a reply to a request it just sent, expected within
    /// `window`: until ``AwaitedReply/end()``, or at most `window`, one loop with nothing to run
    /// polls the sockets instead of sleeping, so the reply's task runs without a thread wake-up.
    /// A zero window does nothing.
    ///
    /// For request/reply exchanges whose latency counts (a continue); call ``AwaitedReply/end()``
    /// exactly once, when the wait ends however it ends.
    public static func awaitReply(within window: Duration) -> AwaitedReply {
        guard window > .zero else { return AwaitedReply(polling: nil) }
        let watcher = ReadinessWatcher.shared
        watcher.replyPolling.begin(until: deadline(after: window))
        // Called on a loop (a node's request), that loop polls as soon as it is idle; from any
        // other thread, a sleeping loop is woken to poll.
        if !EventLoops.shared.isCurrent { watcher.wake() }
        return AwaitedReply(polling: watcher.replyPolling)
    }
}

/// A reply the caller awaits (``EventLoops/awaitReply(within:)``).
public struct AwaitedReply: Sendable {
    let polling: ReplyPolling?

    /// The wait ended: the reply came, or the request failed or timed out.
    public func end() {
        polling?.end()
    }
}
