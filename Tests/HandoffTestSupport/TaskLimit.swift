import Synchronization

/// At most `width` tasks at once, first come, first served: waiters suspend, they never block a
/// thread. Width 1 is the `.exclusive` trait's lock; the simulator's tests bound how many
/// `handoff-sim` processes they run at once with a wider one.
public final class TaskLimit: Sendable {
    /// The lock of the tests marked `.exclusive`, in every test target of the package.
    static let exclusive = TaskLimit(width: 1)

    private struct State {
        var running = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let width: Int
    private let state = Mutex(State())

    public init(width: Int) {
        precondition(width > 0, "a task limit lets at least one task run")
        self.width = width
    }

    /// Waits for a place, then holds it until `release()`.
    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.running < width else {
                    state.waiters.append(continuation)
                    return false
                }
                state.running += 1
                return true
            }
            if granted { continuation.resume() }
        }
    }

    /// Hands the place to the first waiter, or frees it.
    private func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiters.isEmpty else {
                state.running -= 1
                return nil
            }
            return state.waiters.removeFirst()
        }
        next?.resume()
    }

    /// `body`, run once a place is free; the place is given back however it ends.
    public func run<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        await acquire()
        defer { release() }
        return try await body()
    }
}
