import Foundation
import HandoffExecutor
import Synchronization

/// The process's shared event loops: an ``HandoffExecutor/EventLoopGroup`` whose loops, when they
/// have no job, wait in `epoll_wait` on the sockets' `ZMQ_FD`s (the readiness watcher).
///
/// Without them, a message reaching a task takes two thread wake-ups after libzmq's I/O thread
/// signals `ZMQ_FD`: a watcher thread wakes and resumes the waiting task, which Swift's global pool
/// then runs on another thread it wakes. On the loops, the thread that wakes for a message runs the
/// task waiting for it.
///
/// Every suspending socket call waits through these loops (they start with the first one). What
/// runs *on* them is chosen with public Swift API, task executor preference, which child tasks
/// inherit and a default actor follows: a `Node` runs its own tasks so, and the `handoff` command,
/// `handoff-bench` and a program that embeds a node run theirs there:
///
/// ```swift
/// await withTaskExecutorPreference(EventLoops.shared) { await runEverything() }
/// ```
///
/// How many loops: ``configure(threads:)`` before first use, else `HANDOFF_EVENT_LOOP_THREADS`
/// from the environment, else ``defaultThreads``.
public enum EventLoops {
    /// The shared loops, started on first use.
    public static var shared: EventLoopGroup { group }

    private static let group = EventLoopGroup(
        threads: setup.withLock { setup in
            setup.started = true
            return setup.threads
        } ?? requestedThreads ?? defaultThreads,
        name: "handoff-loop", idler: ReadinessWatcher.shared)

    private struct Setup {
        var threads: Int?
        var started = false
    }
    private static let setup = Mutex(Setup())

    /// Sets how many loops ``shared`` starts with; call it before anything uses them.
    ///
    /// - Returns: `false` when the loops had already started (with the number they have).
    @discardableResult
    public static func configure(threads: Int) -> Bool {
        setup.withLock { setup in
            guard !setup.started else { return false }
            setup.threads = max(1, threads)
            return true
        }
    }

    /// One loop per CPU the process may use (``UsableProcessors``) but one, at most two, at least
    /// one. The CPU left over is for libzmq's I/O
    /// thread, which does every socket's TCP work and is as busy as the loops under load. On 2 CPUs,
    /// one loop: a stream between two processes ran at 93–116 % of raw libzmq with one loop per
    /// process and at 68–95 % with two, which woke each other and moved the tasks between CPUs. At
    /// most two: a node's work is one actor's, one job at a time, and more loops only spread it over
    /// more CPUs, each message waking an idle loop on a cold cache. On a 16-core server, fifteen
    /// loops cost 75–78 µs of CPU per advertisement where one or two cost 46–65, and one at a time
    /// their p99 was 736–1,909 µs against 242–325; two carried the most advertisements
    /// (docs/performance.md, "At most two loops"). A process that runs many nodes, or heavy work of
    /// its own on the loops, sets more (``configure(threads:)``, `HANDOFF_EVENT_LOOP_THREADS`).
    public static var defaultThreads: Int { defaultThreads(processors: UsableProcessors.count) }

    /// ``defaultThreads`` on a host with `processors` CPUs.
    static func defaultThreads(processors: Int) -> Int { min(2, max(1, processors - 1)) }

    /// `HANDOFF_EVENT_LOOP_THREADS`: how many loops, when set to a number from 1 to 256.
    public static let requestedThreads: Int? = ProcessInfo.processInfo.environment["HANDOFF_EVENT_LOOP_THREADS"]
        .flatMap { Int($0) }.flatMap { (1...256).contains($0) ? $0 : nil }

    /// Runs `body`; tasks it resumes run next on this loop thread, after the current job, instead of
    /// waking another thread (``HandoffExecutor/EventLoopGroup/handingOff(_:)``).
    public static func handingOff<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        try EventLoopGroup.handingOff(body)
    }
}
