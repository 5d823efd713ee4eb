import DequeModule
import Foundation
import Synchronization

/// Event-loop threads that run Swift jobs and, when they have none, wait in an idler (for the
/// process's shared group, on the sockets' readiness: ``ZeroMQ/EventLoops``).
///
/// A `TaskExecutor`: a task given the group as its executor preference
/// (`withTaskExecutorPreference`, `Task(executorPreference:)`) runs its nonisolated code on the
/// loops, and so do its child tasks and the default actors it calls (an actor with no executor of
/// its own runs on its caller's preferred executor). Public Swift API only.
///
/// Not a serial executor for actors: Swift 6.3's runtime hops off and back onto an actor with a
/// custom `SerialExecutor` at every isolated call (`withCheckedContinuation(isolation:)` among
/// them) unless the job ran with the very task executor its task prefers, which an executor
/// cannot read from a job with public API; each such hop let another job of the actor run first
/// (docs/architecture.md, "Concurrency").
///
/// The loops share one queue. A job made runnable on a loop thread that is not running one (while
/// it handles readiness), or inside ``handingOff(_:)``, runs next on that same thread rather than
/// waking another: the common hand-off of a receiver that resumes the task waiting for what it
/// received and then waits again. Anything else is as on Swift's own pool: a job wakes an idle
/// loop, and a loop that finds more jobs waiting wakes the next.
///
/// The threads live as long as the process. Like Swift's own pool, the loops must never be blocked.
public final class EventLoopGroup: TaskExecutor, Sendable {
    /// How many loop threads run the group's jobs.
    public let threadCount: Int
    private let idler: any LoopIdler

    private struct State {
        var jobs = Deque<UnownedJob>()
        /// Loops waiting in the idler (or about to).
        var idle = 0
    }
    private let state = Mutex(State())
    /// How many times a loop was woken for work (for the tests of the wake policy).
    let wakesIssued = Atomic(0)

    /// Starts `threads` loops (at least one), named `name-0`, `name-1`… as `top -H` shows them.
    ///
    /// - Parameters:
    ///   - threads: How many loops.
    ///   - name: The threads' name; at most 15 bytes of it with the index are kept.
    ///   - idler: Where a loop with nothing to run waits.
    public init(threads: Int, name: String = "handoff-loop", idler: any LoopIdler = SemaphoreIdler()) {
        threadCount = max(1, threads)
        self.idler = idler
        for index in 0..<threadCount {
            let thread = Thread { [self] in run(name: "\(name)-\(index)") }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        submit(UnownedJob(job))
    }

    /// Whether the calling thread is one of this group's loops.
    public var isCurrent: Bool { LoopThread.current?.group === self }

    /// Runs `body`; tasks it resumes (a continuation, an `AsyncStream` element) run next on this
    /// loop thread, after the current job, instead of waking another thread. For code that resumes a
    /// waiter and then soon suspends or returns. Off a loop thread, just runs `body`.
    public static func handingOff<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        guard let loop = LoopThread.current else { return try body() }
        loop.handingOff += 1
        defer { loop.handingOff -= 1 }
        return try body()
    }

    /// Queues work for the loops, waking one when it should (``wakes(local:queued:idle:)``).
    ///
    /// Work queued from one of the loops runs next there (`local`) when the loop is between jobs,
    /// handing off, or when the job that queues it is ending: the runtime queues a task that hops
    /// (from a caller into an actor, from the actor back to its caller) after taking the task off
    /// the thread, so no task is current then. A hop so stays on its thread instead of waking
    /// another loop, while a task that resumes another and runs on (a task is current) still wakes
    /// one for it. Only speed depends on this reading; any work runs either way.
    func submit(_ job: UnownedJob) {
        let local: Bool
        if let loop = LoopThread.current, loop.group === self {
            local = loop.runsNext || withUnsafeCurrentTask { $0 == nil }
        } else {
            local = false
        }
        let wake = state.withLock { state -> Bool in
            state.jobs.append(job)
            return Self.wakes(local: local, queued: state.jobs.count, idle: state.idle)
        }
        if wake { wakeOne() }
    }

    private func wakeOne() {
        wakesIssued.add(1, ordering: .relaxed)
        idler.wake()
    }

    /// Whether work just queued wakes an idle loop: not when the enqueuing loop runs it next (it is
    /// `local` and the only one queued), else whenever a loop sleeps.
    static func wakes(local: Bool, queued: Int, idle: Int) -> Bool {
        if local && queued == 1 { return false }
        return idle > 0
    }

    /// The next job, or `nil` (and the loop counted idle) when there is none.
    private func next() -> UnownedJob? {
        let (job, wake) = state.withLock { state -> (UnownedJob?, Bool) in
            guard let job = state.jobs.popFirst() else {
                state.idle += 1
                return (nil, false)
            }
            // More waiting and a loop asleep: wake it (each woken loop wakes the next).
            return (job, !state.jobs.isEmpty && state.idle > 0)
        }
        if wake { wakeOne() }
        return job
    }

    /// How many jobs a loop runs without running out before it asks its idler for what is due
    /// (``LoopIdler/runDue()``): a timer of a loop that never idles is late by at most so many jobs
    /// (each a few microseconds: a message handled, a task resumed), for one look at the clock per
    /// so many.
    public static let jobsBetweenDueChecks = 32

    private func run(name: String) {
        ThreadName.setCurrent(name)
        let loop = LoopThread(group: self)
        loop.adopt()
        let taskExecutor = asUnownedTaskExecutor()
        while true {
            var jobsRun = 0
            while let job = next() {
                loop.inJob = true
                job.runSynchronously(on: taskExecutor)
                loop.inJob = false
                jobsRun &+= 1
                if jobsRun % Self.jobsBetweenDueChecks == 0 { idler.runDue() }
            }
            idler.waitForWork {
                state.withLock { $0.idle -= 1 }
            }
        }
    }
}
