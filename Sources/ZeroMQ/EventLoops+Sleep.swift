// Sleeping on the loops' own clock.
extension EventLoops {
    /// Suspends the task until `instant`, woken by the event loops themselves rather than through
    /// Swift's global pool as `Task.sleep` is: a node's clock (its presence, leases, timeouts) keeps
    /// time while the program's pool is busy or blocked. Call it from a task that runs on the loops
    /// (task executor preference, or an actor they run); it resumes there.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first, as `Task.sleep` does.
    public static func sleep(
        until instant: ContinuousClock.Instant, isolation: isolated (any Actor)? = #isolation
    ) async throws(CancellationError) {
        try await ReadinessWatcher.shared.sleep(until: deadline(after: ContinuousClock.now.duration(to: instant)), isolation: isolation)
    }

    /// Suspends the task for `duration` on the loops' own clock (``sleep(until:isolation:)``).
    public static func sleep(for duration: Duration, isolation: isolated (any Actor)? = #isolation) async throws(CancellationError) {
        try await ReadinessWatcher.shared.sleep(until: deadline(after: duration), isolation: isolation)
    }
}
