import Dispatch

/// What an event loop does when it has no job: waits until ``wake()`` (or something of its own,
/// such as a socket's readiness, which it handles before returning).
///
/// ZeroMQ's readiness watcher is the idler of the process's shared loops (``ZeroMQ/EventLoops``):
/// a loop with nothing to run waits in `epoll_wait` on the sockets, so the thread that wakes for a
/// message is the one that runs the task waiting for it.
public protocol LoopIdler: Sendable {
    /// Blocks until woken; calls `afterWaking` as soon as it returns from its wait, before it does
    /// anything else. Called by several loop threads at once.
    func waitForWork(afterWaking: () -> Void)
    /// Makes one waiting loop return from ``waitForWork(afterWaking:)``; when none waits, the next
    /// one to wait returns at once (a wake is never lost).
    func wake()
    /// Does what is due now without waiting (a timer's, say): called by a loop that has run
    /// ``EventLoopGroup/jobsBetweenDueChecks`` jobs without running out, so that a loop busy for
    /// long does not hold back what ``waitForWork(afterWaking:)`` would have done.
    func runDue()
}

extension LoopIdler {
    public func runDue() {}
}

/// An idler with nothing of its own to wait for: a counting semaphore, whose every signal lets
/// one waiting loop through (a spare signal costs a loop one look at an empty queue).
public final class SemaphoreIdler: LoopIdler {
    private let semaphore = DispatchSemaphore(value: 0)

    public init() {}

    public func waitForWork(afterWaking: () -> Void) {
        semaphore.wait()
        afterWaking()
    }

    public func wake() {
        semaphore.signal()
    }
}
