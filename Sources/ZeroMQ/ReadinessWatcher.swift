import CZeroMQ
import Foundation
import Glibc
import HandoffExecutor
import Synchronization

/// Waits for libzmq's `ZMQ_FD` signals on behalf of Swift tasks: the idler of the process's event
/// loops (``EventLoops``), which wait in its epoll set whenever they have no job.
///
/// `ZMQ_FD` is edge-triggered: it signals that the socket's state *may* have changed, and does so
/// only after the owner has read `ZMQ_EVENTS` and found nothing. Every registration therefore
/// carries a generation counter that each signal bumps. A waiting socket reads the generation
/// *before* it checks `ZMQ_EVENTS`, then waits only for a generation newer than that one, so a
/// signal that lands between the check and the wait is never lost.
///
/// An edge is not the only way a socket's readiness changes: any libzmq call on it processes pending
/// commands and drains `ZMQ_FD`, and epoll does not report an edge that was drained before it looked.
/// So when one task of a socket's owner calls into the socket while another task of the same owner
/// is suspended on it, the caller reads `ZMQ_EVENTS` and ``wake(_:satisfying:)`` resumes exactly the
/// waiters whose interest it now satisfies.
///
/// The watcher never touches a libzmq socket: it only watches file descriptors. Every libzmq call
/// stays on the socket's owner.
final class ReadinessWatcher: LoopIdler {
    static let shared = ReadinessWatcher()

    enum Outcome: Sendable {
        case signalled
        case timedOut
        case unregistered
        case cancelled
    }

    enum WaiterState {
        case pending
        case waiting(UnsafeContinuation<Outcome, Never>, registration: UInt64, deadline: UInt64?, interest: Int16)
        case cancelled
    }

    struct Registration {
        var generation: UInt64 = 0
        let fd: Int32
        var waiters: [UInt64] = []
    }

    struct State {
        var registrations: [UInt64: Registration] = [:]
        var waiters: [UInt64: WaiterState] = [:]
        var nextID: UInt64 = 1
        /// Registrations whose waiters are to be resumed at a time (``recheck(_:at:)``).
        var rechecks: [UInt64: UInt64] = [:]
    }

    let state = Mutex(State())
    /// No later than the nearest deadline of a waiter or a recheck (monotonic nanoseconds; `.max`
    /// with none): lowered, under the state's lock, as each is added, and set to the nearest again
    /// as a loop looks at them all; what a busy loop compares the clock with between its jobs
    /// (``runDue()``) before it takes the lock.
    let earliestDeadline = Atomic<UInt64>(.max)
    /// When a busy loop last polled the sockets between its jobs (``runDue()``).
    let lastDueLook = Atomic<UInt64>(0)
    /// The registration of ``sleep(until:isolation:)``'s waiters: no descriptor, never signalled,
    /// so that each of them ends at its deadline (or cancelled).
    let timerRegistration: UInt64
    /// Polling instead of sleeping while a reply is awaited (``EventLoops/awaitReply(within:)``).
    let replyPolling = ReplyPolling()
    let epollFD: Int32
    let wakeFD: Int32
    /// epoll data tag of the wake-up eventfd; registrations count up from 1.
    static let wakeTag: UInt64 = 0

    private init() {
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epollFD >= 0, "epoll_create1 failed: errno \(errno)")
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(wakeFD >= 0, "eventfd failed: errno \(errno)")
        var event = epoll_event()
        // Edge-triggered: each write is one event, handed to one waiting thread (not to every event
        // loop waiting on the set, as a level-triggered one would until it is read).
        event.events = EPOLLIN.rawValue | EPOLLET.rawValue
        event.data.u64 = Self.wakeTag
        precondition(epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event) == 0, "epoll_ctl failed: errno \(errno)")
        timerRegistration = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.registrations[id] = Registration(fd: -1)
            return id
        }
    }

    /// Starts watching `fd` (a socket's `ZMQ_FD`) and returns the registration's id.
    func register(fd: Int32) -> UInt64 {
        _ = EventLoops.shared  // the loops wait on the epoll set: they must be running
        let id = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.registrations[id] = Registration(fd: fd)
            return id
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLET.rawValue
        event.data.u64 = id
        precondition(epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0, "epoll_ctl(ADD) failed: errno \(errno)")
        return id
    }

    /// Stops watching; tasks still waiting on the registration wake with `.unregistered`.
    ///
    /// Call before the socket (and so its `ZMQ_FD`) is closed.
    func unregister(_ id: UInt64) {
        let resumed: [UnsafeContinuation<Outcome, Never>] = state.withLock { state in
            guard let registration = state.registrations.removeValue(forKey: id) else { return [] }
            state.rechecks[id] = nil
            var event = epoll_event()
            epoll_ctl(epollFD, EPOLL_CTL_DEL, registration.fd, &event)
            return registration.waiters.compactMap { Self.take(waiter: $0, from: &state) }
        }
        for continuation in resumed { continuation.resume(returning: .unregistered) }
    }

    /// The registration's current generation: read it before checking `ZMQ_EVENTS`.
    func generation(of id: UInt64) -> UInt64 {
        state.withLock { $0.registrations[id]?.generation ?? .max }
    }

    /// Waits until the registration is signalled after `generation`, the deadline passes, the task is
    /// cancelled, or the registration goes away.
    ///
    /// - Parameters:
    ///   - id: The registration.
    ///   - generation: The generation read before the last `ZMQ_EVENTS` check.
    ///   - deadline: A `CLOCK_MONOTONIC` time in nanoseconds, or `nil` to wait without limit.
    ///   - interest: The `ZMQ_POLLIN`/`ZMQ_POLLOUT` bits the waiter waits for (see ``wake(_:satisfying:)``).
    ///   - isolation: The caller's; leave the default.
    ///
    /// Runs on the caller's isolation, so the waiter is registered before the owner (an actor, say)
    /// can run anything else that touches the socket. The isolation is a parameter, and the closures
    /// below capture it, because a closure formed in a `nonisolated(nonsending)` function is not
    /// isolated to the caller: it ran on Swift's global pool, so the waiter was registered off the
    /// socket owner's executor, after a thread hop (seen in a backtrace of the registration).
    func wait(
        _ id: UInt64, after generation: UInt64, deadline: UInt64?, interest: Int16,
        isolation: isolated (any Actor)? = #isolation
    ) async -> Outcome {
        let waiterID = state.withLock { state in
            let waiterID = state.nextID
            state.nextID += 1
            state.waiters[waiterID] = .pending
            return waiterID
        }
        return await withTaskCancellationHandler(operation: {
            isolation?.assertIsolated("the waiter registers on its caller's isolation")  // (and captures it)
            return await withUnsafeContinuation(isolation: isolation) { (continuation: UnsafeContinuation<Outcome, Never>) in
                let immediate: Outcome? = state.withLock { state in
                    guard case .pending = state.waiters[waiterID] else {
                        state.waiters[waiterID] = nil
                        return .cancelled
                    }
                    guard var registration = state.registrations[id] else {
                        state.waiters[waiterID] = nil
                        return .unregistered
                    }
                    if registration.generation != generation {
                        state.waiters[waiterID] = nil
                        return .signalled
                    }
                    if let deadline, deadline <= monotonicNanoseconds() {
                        state.waiters[waiterID] = nil
                        return .timedOut
                    }
                    registration.waiters.append(waiterID)
                    state.registrations[id] = registration
                    state.waiters[waiterID] = .waiting(continuation, registration: id, deadline: deadline, interest: interest)
                    if let deadline { lowerEarliestDeadline(to: deadline) }
                    return nil
                }
                if let immediate {
                    continuation.resume(returning: immediate)
                } else if deadline != nil {
                    wake()  // the loop must recompute its epoll timeout
                }
            }
        }, onCancel: {
            let continuation: UnsafeContinuation<Outcome, Never>? = state.withLock { state in
                switch state.waiters[waiterID] {
                case .pending:
                    state.waiters[waiterID] = .cancelled
                    return nil
                case .waiting(_, let registration, _, _):
                    state.registrations[registration]?.waiters.removeAll { $0 == waiterID }
                    return Self.take(waiter: waiterID, from: &state)
                case .cancelled, nil:
                    return nil
                }
            }
            continuation?.resume(returning: .cancelled)
        }, isolation: isolation)
    }

    /// Resumes the waiters of a registration that wait for any of `events` (as just read from
    /// `ZMQ_EVENTS` by the socket's owner), because a libzmq call may have consumed the edge that would
    /// have woken them.
    ///
    /// Not a signal: the generation stays. Only the socket's owner calls this, and a waiter of the
    /// same owner registers on the owner's isolation right after reading the generation, with no
    /// suspension between, so none can be between the two. (Bumping it here made a receiver spin
    /// whenever another task of the owner was suspended on the socket: its own failed receive woke
    /// the other task, bumped the generation it had just read, and sent it round again.)
    func wake(_ id: UInt64, satisfying events: Int16) {
        let resumed: [UnsafeContinuation<Outcome, Never>] = state.withLock { state in
            guard var registration = state.registrations[id] else { return [] }
            // Usually no waiter wants these events (a socket always writable, read after every
            // send): then nothing is changed, and the waiters' list is not copied to be filtered.
            func wants(_ waiterID: UInt64) -> Bool {
                guard case .waiting(_, _, _, let interest)? = state.waiters[waiterID] else { return false }
                return interest & events != 0
            }
            guard registration.waiters.contains(where: wants) else { return [] }
            var taken: [UnsafeContinuation<Outcome, Never>] = []
            registration.waiters.removeAll { waiterID in
                guard wants(waiterID), let continuation = Self.take(waiter: waiterID, from: &state) else { return false }
                taken.append(continuation)
                return true
            }
            state.registrations[id] = registration
            return taken
        }
        for continuation in resumed { continuation.resume(returning: .signalled) }
    }

    /// Resumes every waiter of a registration at `time` (monotonic nanoseconds) unless it wakes
    /// before: for an owner whose calls into the socket may have consumed an edge and that does not
    /// read `ZMQ_EVENTS` after each (``Socket/wakeOtherWaiters(afterSending:flags:)``). Each waiter
    /// resumes as signalled and tries its own call again, which reads what the edge would have told.
    /// Not a signal: the generation stays, as in ``wake(_:satisfying:)``.
    func recheck(_ id: UInt64, at time: UInt64) {
        let scheduled = state.withLock { state in
            guard state.registrations[id] != nil else { return false }
            if let due = state.rechecks[id], due <= time { return false }
            state.rechecks[id] = time
            lowerEarliestDeadline(to: time)
            return true
        }
        if scheduled { wake() }  // a loop waiting in epoll recomputes its timeout
    }

    /// Removes every waiter of a registration and returns their continuations for resumption outside
    /// the lock: for an edge (`signalling`: the generation moves on) or a recheck (it stays).
    static func takeEveryWaiter(of id: UInt64, from state: inout State, signalling: Bool) -> [UnsafeContinuation<Outcome, Never>] {
        guard var registration = state.registrations[id] else { return [] }
        if signalling { registration.generation &+= 1 }
        let waiting = registration.waiters
        registration.waiters.removeAll()
        state.registrations[id] = registration
        return waiting.compactMap { take(waiter: $0, from: &state) }
    }

    /// Removes a waiting waiter and returns its continuation for resumption outside the lock.
    static func take(waiter id: UInt64, from state: inout State) -> UnsafeContinuation<Outcome, Never>? {
        guard case .waiting(let continuation, _, _, _) = state.waiters.removeValue(forKey: id) else { return nil }
        return continuation
    }

    /// Makes a loop waiting in ``waitForWork(afterWaking:)`` return: to recompute its timeout, or to
    /// run a job.
    func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    /// Waits in `epoll_wait` until a registration is signalled, a waiter's deadline passes or
    /// ``wake()`` is called; calls `afterWaking`, then resumes the waiters concerned. Called by each
    /// event loop between its jobs; safe from several threads at once (epoll hands each event to one
    /// of them).
    func waitForWork(afterWaking: () -> Void) {
        let capacity = 64
        return withUnsafeTemporaryAllocation(of: epoll_event.self, capacity: capacity) { buffer in
            let events = buffer.baseAddress!
            let nearest = state.withLock { state -> UInt64? in
                let nearest = Self.nearestDeadline(in: state)
                earliestDeadline.store(nearest ?? .max, ordering: .relaxed)
                return nearest
            }
            // Polls first while a reply is awaited (not past a deadline), then sleeps until the
            // nearest deadline.
            var count = pollForReply(events, capacity: capacity, before: nearest)
            if count == 0 { count = epoll_wait(epollFD, events, Int32(capacity), remaining(until: nearest)) }
            afterWaking()
            if count < 0 {
                if errno == EINTR { return }
                fatalError("epoll_wait failed: errno \(errno)")
            }
            // Deadlines and rechecks only when the nearest one seen before waiting has passed (a
            // waiter or a recheck with a nearer one meanwhile wakes the loop, which looks again at
            // once).
            let resumed = takeReady(events, count: count, deadlinesFrom: nearest)
            for (continuation, outcome) in resumed { continuation.resume(returning: outcome) }
        }
    }
}

extension ReadinessWatcher {
    /// Polls the epoll set without sleeping while ``replyPolling`` wants it and `nearest` (a
    /// deadline of a waiter or recheck) has not come; returns what the last poll returned (0: the
    /// loop should sleep now).
    fileprivate func pollForReply(_ events: UnsafeMutablePointer<epoll_event>, capacity: Int, before nearest: UInt64?) -> Int32 {
        // Every loop passes here each time it runs out of jobs: nothing more than a load then.
        guard replyPolling.awaitsAny else { return 0 }
        let now = monotonicNanoseconds()
        if let nearest, nearest <= now { return 0 }
        guard replyPolling.claim(now: now) else { return 0 }
        defer { replyPolling.release() }
        while true {
            let count = epoll_wait(epollFD, events, Int32(capacity), 0)
            if count != 0 { return count }
            let now = monotonicNanoseconds()
            if !replyPolling.wanted(now: now) { return 0 }
            if let nearest, nearest <= now { return 0 }
            // A thread this one keeps off its CPU (libzmq's I/O thread, which brings the reply, when
            // both share a CPU) runs first.
            sched_yield()
        }
    }

    /// The epoll timeout, in milliseconds, for sleeping until `nearest` (-1: no deadline), rounded
    /// up so that the deadline has passed when `epoll_wait` returns.
    fileprivate func remaining(until nearest: UInt64?) -> Int32 {
        guard let nearest else { return -1 }
        let now = monotonicNanoseconds()
        if nearest <= now { return 0 }
        return Int32(clamping: (nearest - now + 999_999) / 1_000_000)
    }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// The `CLOCK_MONOTONIC` time `duration` from now, in nanoseconds.
func deadline(after duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    let nanos = max(0, seconds) * 1_000_000_000 + max(0, attoseconds / 1_000_000_000)
    return monotonicNanoseconds() &+ UInt64(nanos)
}
