import Synchronization

// Deadlines on the loops' own clock: a sleeping task woken by the loop that waits in `epoll_wait`,
// and deadlines kept by a loop that never runs out of jobs.
extension ReadinessWatcher {
    /// Suspends the task until `deadline` (monotonic nanoseconds), on the loops' own clock: the loop
    /// waiting in `epoll_wait` wakes at the deadline and resumes the task itself, and a loop that
    /// never runs out of jobs looks between them (``runDue()``).
    ///
    /// `Task.sleep` wakes through Swift's global pool (a dispatch timer puts the task's job on the
    /// pool, which hands it to the loops), so a pool that is busy or blocked (a program's own work
    /// on its few threads, hundreds of tests at once) held back every node's clock with it: in the
    /// suite's one-loop pass every node's presence came 1 to 13 s late at once while the loop
    /// itself was free. This one needs no thread but a loop.
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

    /// Between a busy loop's jobs: resumes the waiters whose deadline has passed and the rechecks
    /// due, as ``waitForWork(afterWaking:)`` would had the loop run out of jobs. One look at the
    /// clock and an atomic load when nothing is due.
    func runDue() {
        let now = monotonicNanoseconds()
        guard earliestDeadline.load(ordering: .relaxed) <= now else { return }
        let resumed = state.withLock { state -> [(UnsafeContinuation<Outcome, Never>, Outcome)] in
            let due = Self.takeDue(now: now, from: &state)
            var nearest = UInt64.max
            for case .waiting(_, _, let deadline?, _) in state.waiters.values { nearest = min(nearest, deadline) }
            for due in state.rechecks.values { nearest = min(nearest, due) }
            earliestDeadline.store(nearest, ordering: .relaxed)
            return due
        }
        for (continuation, outcome) in resumed { continuation.resume(returning: outcome) }
    }
}
