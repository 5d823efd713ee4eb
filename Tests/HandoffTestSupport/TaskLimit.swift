import Synchronization

/// At most `width` places held at once, first come, first served: a task asks for one place or
/// several, and waiters suspend, they never block a thread. A waiter asking for more places than
/// are free holds back those behind it, so that a task wanting them all is not starved by tasks
/// wanting one. The `.exclusive` trait's tests share two places; the simulator's tests bound how
/// many `handoff-sim` processes they run at once with a wider limit.
public final class TaskLimit: Sendable {
    private struct Waiter {
        let places: Int
        let continuation: CheckedContinuation<Void, Never>
    }
    private struct State {
        var held = 0
        var waiters: [Waiter] = []
    }
    public let width: Int
    private let state = Mutex(State())

    public init(width: Int) {
        precondition(width > 0, "a task limit lets at least one task run")
        self.width = width
    }

    /// Waits for `places` places, then holds them until `release(_:)`.
    private func acquire(_ places: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                guard state.waiters.isEmpty, state.held + places <= width else {
                    state.waiters.append(Waiter(places: places, continuation: continuation))
                    return false
                }
                state.held += places
                return true
            }
            if granted { continuation.resume() }
        }
    }

    /// Frees `places` places and hands them to the waiters at the head of the line that now fit.
    private func release(_ places: Int) {
        let next = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.held -= places
            var granted: [CheckedContinuation<Void, Never>] = []
            while let first = state.waiters.first, state.held + first.places <= width {
                state.held += first.places
                granted.append(state.waiters.removeFirst().continuation)
            }
            return granted
        }
        for continuation in next { continuation.resume() }
    }

    /// Places held now (for the tests).
    public var held: Int { state.withLock { $0.held } }

    /// Tasks waiting for places now (for the tests).
    public var waiting: Int { state.withLock { $0.waiters.count } }

    /// `body`, run once `places` places are free (at most the width); they are given back
    /// however it ends.
    public func run<Result>(places: Int = 1, _ body: () async throws -> Result) async rethrows -> Result {
        let places = min(max(places, 1), width)
        await acquire(places)
        defer { release(places) }
        return try await body()
    }
}
