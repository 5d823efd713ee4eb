import CZeroMQ
import Foundation
import Glibc
import Synchronization

// Deadlines on the loops' own clock, a sleeping task woken by the loop that waits in `epoll_wait`;
// and what a loop that never runs out of jobs still does between them: sockets' readiness and
// deadlines.
extension ReadinessWatcher {
    /// Suspends the task until `deadline` (monotonic nanoseconds), on the loops' own clock: the loop
    /// waiting in `epoll_wait` wakes at the deadline and resumes the task itself, and a loop that
    /// never runs out of jobs looks between them (``runDue()``).
    ///
    /// `Task.sleep` wakes through Swift's global pool (a dispatch timer puts the task's job on the
    /// pool, which hands it to the loops), and can wait for it: a pool busy or blocked (a program's
    /// own work on its few threads, hundreds of tests at once) could hold back every node's clock
    /// with it (in the suite's one-loop pass every node's presence came 1 to 13 s late at once).
    /// When it does is not fully understood (docs/architecture.md). This one needs no thread but a
    /// loop.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    func sleep(until deadline: UInt64, isolation: isolated (any Actor)? = #isolation) async throws(CancellationError) {
        // The timer registration is never signalled: its waiters end at their deadline or cancelled.
        let outcome = await wait(timerRegistration, after: generation(of: timerRegistration), deadline: deadline, interest: 0, isolation: isolation)
        if case .cancelled = outcome { throw CancellationError() }
    }

    /// Lowers ``earliestDeadline`` to `deadline`: called under the state's lock as a deadline is set.
    func lowerEarliestDeadline(to deadline: UInt64) {
        if deadline < earliestDeadline.load(ordering: .relaxed) { earliestDeadline.store(deadline, ordering: .relaxed) }
    }

    /// The nearest deadline of a waiter or a recheck in `state`, if any.
    static func nearestDeadline(in state: State) -> UInt64? {
        var nearest: UInt64?
        for case .waiting(_, _, let deadline?, _) in state.waiters.values { nearest = min(nearest ?? deadline, deadline) }
        for due in state.rechecks.values { nearest = min(nearest ?? due, due) }
        return nearest
    }

    /// The waiters whose deadline is `now` or past (timed out) and the waiters of rechecks due
    /// (signalled), taken from `state` for resumption outside the lock.
    static func takeDue(now: UInt64, from state: inout State) -> [(UnsafeContinuation<Outcome, Never>, Outcome)] {
        var resumed: [(UnsafeContinuation<Outcome, Never>, Outcome)] = []
        var expired: [UInt64] = []
        for (waiterID, waiter) in state.waiters {
            if case .waiting(_, let registration, let deadline?, _) = waiter, deadline <= now {
                expired.append(waiterID)
                state.registrations[registration]?.waiters.removeAll { $0 == waiterID }
            }
        }
        for waiterID in expired {
            if let continuation = take(waiter: waiterID, from: &state) { resumed.append((continuation, .timedOut)) }
        }
        for (id, due) in state.rechecks where due <= now {
            state.rechecks[id] = nil
            for continuation in takeEveryWaiter(of: id, from: &state, signalling: false) {
                resumed.append((continuation, .signalled))
            }
        }
        return resumed
    }

    /// How often a loop that never runs out of jobs polls the sockets at most (nanoseconds): 10 ms,
    /// the most a socket's waiter waits past its readiness on such a loop (a deadline is kept to
    /// 32 jobs). Every 1 ms cost `handoff-bench adverts` 2-3 µs of CPU per advertisement on the
    /// 2-core VM (21.9-22.8 against 18.3-23.0, alternated); every 10 ms, nothing measurable
    /// (18.2-19.8 against 17.7-19.9).
    static let dueLookInterval: UInt64 = 10_000_000

    /// The waiters that `count` events of `events` (from `epoll_wait`) signal, and, once `nearest`
    /// (the nearest deadline seen before waiting) has passed, those whose deadline has and the
    /// rechecks due: taken from the state for resumption outside the lock. ``earliestDeadline``
    /// is then set to the nearest left, so that a busy loop does not take the lock for deadlines
    /// already taken.
    func takeReady(_ events: UnsafeMutablePointer<epoll_event>, count: Int32, deadlinesFrom nearest: UInt64?) -> [(UnsafeContinuation<Outcome, Never>, Outcome)] {
        state.withLock { state in
            var resumed: [(UnsafeContinuation<Outcome, Never>, Outcome)] = []
            for index in 0..<Int(max(count, 0)) {
                let tag = events[index].data.u64
                if tag == Self.wakeTag {
                    var value: UInt64 = 0
                    _ = Glibc.read(wakeFD, &value, MemoryLayout<UInt64>.size)
                    continue
                }
                for continuation in Self.takeEveryWaiter(of: tag, from: &state, signalling: true) {
                    resumed.append((continuation, .signalled))
                }
            }
            guard let nearest else { return resumed }
            let now = monotonicNanoseconds()
            guard nearest <= now else { return resumed }
            resumed += Self.takeDue(now: now, from: &state)
            earliestDeadline.store(Self.nearestDeadline(in: state) ?? .max, ordering: .relaxed)
            return resumed
        }
    }

    /// Between a busy loop's jobs: what ``waitForWork(afterWaking:)`` would have done had the loop
    /// run out of jobs, without waiting. Sockets signalled meanwhile (an `epoll_wait` that does not
    /// wait: a loop whose jobs never run out never waits in one, and a receiver that yields every
    /// burst keeps its loop's queue from running out under a sustained flow, so every other socket's
    /// waiter would wait for the flow to end), and deadlines passed. At most one look at the
    /// sockets (a system call) per ``dueLookInterval``, else a look at the clock: a look every 32
    /// jobs cost `handoff-bench adverts` 5 µs of CPU per advertisement (24.9-25.4 against
    /// 19.9-20.8), the busy loop taking the receivers' edges a few at a time instead of in the
    /// batch an idle loop takes.
    func runDue() {
        let now = monotonicNanoseconds()
        let last = lastDueLook.load(ordering: .relaxed)
        guard now &- last >= Self.dueLookInterval || earliestDeadline.load(ordering: .relaxed) <= now else { return }
        lastDueLook.store(now, ordering: .relaxed)
        let capacity = 64
        let resumed = withUnsafeTemporaryAllocation(of: epoll_event.self, capacity: capacity) { buffer in
            let events = buffer.baseAddress!
            let count = epoll_wait(epollFD, events, Int32(capacity), 0)
            let earliest = earliestDeadline.load(ordering: .relaxed)
            let resumed = takeReady(events, count: count, deadlinesFrom: earliest == .max ? nil : earliest)
            // A wake taken here was for a loop asleep: pass it on (this loop is busy).
            if (0..<Int(max(count, 0))).contains(where: { events[$0].data.u64 == Self.wakeTag }) { wake() }
            return resumed
        }
        for (continuation, outcome) in resumed { continuation.resume(returning: outcome) }
    }
}
