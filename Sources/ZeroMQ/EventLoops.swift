import DequeModule
import Foundation
import Glibc
import Synchronization

/// The process's Swift tasks on a few event-loop threads that also wait for the sockets' readiness.
///
/// Without them, a message reaching a task takes two thread wake-ups after libzmq's I/O thread
/// signals `ZMQ_FD`: the readiness watcher's thread wakes and resumes the waiting task, which
/// Swift's global pool then runs on another thread it wakes. With them, the event loops are the
/// global pool: each runs the jobs of Swift tasks and, when it has none, waits in `epoll_wait` on
/// the sockets' `ZMQ_FD`s, so the thread that wakes for a message runs the task waiting for it.
///
/// A job made runnable on a loop thread that is not running one (while it handles readiness), or
/// inside ``handingOff(_:)``, runs next on that same thread rather than waking another: the common
/// hand-off of a receiver that resumes the task waiting for what it received and then waits again.
/// Anything else is as on Swift's own pool: a job wakes an idle loop, and a loop that finds more
/// jobs waiting wakes the next.
///
/// The `handoff` command and `handoff-bench` install them first thing in `main`; a program
/// embedding `Node` may call ``install(threads:)`` too, or set `HANDOFF_EVENT_LOOPS=1` to have them
/// installed when its first ``Context`` is made (`scripts/test` runs the tests so);
/// `HANDOFF_EVENT_LOOPS=0` keeps Swift's own pool in any process. Tasks then run on these threads
/// instead of the global pool (`swift_task_enqueueGlobal_hook`); delayed jobs (`Task.sleep`) wait
/// on Swift's own timers and then run here. Installed late, jobs already queued on the pool finish
/// there and the readiness watcher's own thread, if it started, keeps waiting beside the loops.
/// Like the global pool, the loops must never be blocked.
public enum EventLoops {
    /// Makes the event loops the executor of the process's tasks.
    ///
    /// - Parameter threads: How many loops, at least one. By default `HANDOFF_EVENT_LOOP_THREADS`
    ///   from the environment, else ``defaultThreads``. One loop turns any call that blocks a loop
    ///   thread into a hang at once (`scripts/test` runs the suite so a second time).
    /// - Returns: `false` when nothing changed: already installed, a Swift runtime without the
    ///   hook, or `HANDOFF_EVENT_LOOPS=0` in the environment (to compare with Swift's own pool).
    @discardableResult
    public static func install(threads: Int = requestedThreads ?? defaultThreads) -> Bool {
        guard requested != false else { return false }
        return LoopExecutor.install(threads: max(1, threads))
    }

    /// One loop per CPU but one, at least one: the CPU left over is for libzmq's I/O thread, which
    /// does every socket's TCP work and is as busy as the loops under load. On 2 CPUs, one loop:
    /// a stream between two processes ran at 93–116 % of raw libzmq with one loop per process and
    /// at 68–95 % with two, which woke each other and moved the tasks between CPUs
    /// (docs/performance.md, "One loop per CPU but one").
    public static var defaultThreads: Int { max(1, ProcessInfo.processInfo.activeProcessorCount - 1) }

    /// `HANDOFF_EVENT_LOOP_THREADS`: how many loops, when set to a number from 1 to 256.
    public static let requestedThreads: Int? = ProcessInfo.processInfo.environment["HANDOFF_EVENT_LOOP_THREADS"]
        .flatMap { Int($0) }.flatMap { (1...256).contains($0) ? $0 : nil }

    /// `HANDOFF_EVENT_LOOPS`: `true` for 1, `false` for 0, otherwise `nil`.
    static let requested: Bool? = switch ProcessInfo.processInfo.environment["HANDOFF_EVENT_LOOPS"] {
    case "1": true
    case "0": false
    default: nil
    }

    /// Installs the loops when `HANDOFF_EVENT_LOOPS=1` (from ``Context``'s initializer).
    static func installIfRequested() {
        if requested == true, !isInstalled { install() }
    }

    /// Whether ``install(threads:)`` made the loops the executor.
    public static var isInstalled: Bool { LoopExecutor.installed.load(ordering: .acquiring) }

    /// Runs `body`; tasks it resumes (a continuation, an `AsyncStream` element) run next on this
    /// loop thread, after the current job, instead of waking another thread. For code that resumes a
    /// waiter and then soon suspends or returns. Off a loop thread, just runs `body`.
    public static func handingOff<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        guard let loop = LoopThread.current else { return try body() }
        loop.handingOff += 1
        defer { loop.handingOff -= 1 }
        return try body()
    }
}

/// One event-loop thread's own state, read by the enqueue hook on that thread.
final class LoopThread {
    /// Whether the thread is inside a job (not handling readiness between jobs).
    var inJob = false
    /// Nesting depth of ``EventLoops/handingOff(_:)``.
    var handingOff = 0

    /// Whether a job this thread queues now runs next here: between jobs (handling readiness), or
    /// handing off.
    var runsNext: Bool { !inJob || handingOff > 0 }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// The calling thread's, when it is an event loop.
    static var current: LoopThread? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<LoopThread>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Makes `self` the calling thread's for good (loop threads never end).
    func adopt() {
        pthread_setspecific(Self.key, Unmanaged.passRetained(self).toOpaque())
    }
}

/// The jobs of every Swift task of the process, and the loops that run them.
final class LoopExecutor: Sendable {
    static let installed = Atomic<Bool>(false)
    private static let installing = Mutex(false)
    static let shared = LoopExecutor()

    private struct State {
        var jobs = Deque<UnownedJob>()
        /// Loops waiting in `epoll_wait` (or about to).
        var idle = 0
    }
    private let state = Mutex(State())

    // The Swift runtime's hook for jobs bound for the global executor, and the function that runs a
    // job (the standard library declares it the same way).
    typealias EnqueueOriginal = @convention(thin) (UnownedJob) -> Void
    typealias EnqueueHook = @convention(thin) (UnownedJob, EnqueueOriginal) -> Void

    static func install(threads: Int) -> Bool {
        installing.withLock { done in
            guard !done, let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else { return false }
            done = true
            installed.store(true, ordering: .releasing)
            let executor = shared
            for index in 0..<threads {
                let thread = Thread { executor.run(index) }
                thread.stackSize = 1 << 20
                thread.start()
            }
            symbol.assumingMemoryBound(to: EnqueueHook?.self).pointee = { job, _ in LoopExecutor.shared.enqueue(job) }
            return true
        }
    }

    /// A job for the global executor (the hook).
    func enqueue(_ job: UnownedJob) {
        let local = LoopThread.current?.runsNext ?? false
        let wake = state.withLock { state -> Bool in
            state.jobs.append(job)
            return Self.wakes(local: local, queued: state.jobs.count, idle: state.idle)
        }
        if wake { ReadinessWatcher.shared.wake() }
    }

    /// Whether a job just queued wakes an idle loop: not when the enqueuing loop runs it next (it is
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
            // More jobs waiting and a loop asleep: wake it (each woken loop wakes the next).
            return (job, !state.jobs.isEmpty && state.idle > 0)
        }
        if wake { ReadinessWatcher.shared.wake() }
        return job
    }

    private func run(_ index: Int) {
        ThreadName.setCurrent("handoff-loop-\(index)")
        let loop = LoopThread()
        loop.adopt()
        let watcher = ReadinessWatcher.shared
        while true {
            while let job = next() {
                loop.inJob = true
                runJob(job, genericExecutor)
                loop.inJob = false
            }
            watcher.waitAndSignal {
                state.withLock { $0.idle -= 1 }
            }
        }
    }
}

/// Runs a job as the global executor does (`swift_job_run` with the generic executor).
@_silgen_name("swift_job_run")
private func runJob(_ job: UnownedJob, _ executor: UnownedSerialExecutor)

/// The generic executor: the reference with no identity, as Swift's own global executor passes it.
private let genericExecutor = unsafeBitCast((UInt(0), UInt(0)), to: UnownedSerialExecutor.self)
