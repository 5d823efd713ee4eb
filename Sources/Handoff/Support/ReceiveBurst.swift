/// How a node's receivers (`receiveBus`, `serveContinuations`, `receiveReplies`) keep what they hand
/// off from starving, and how the broker's two directions (`BrokerLoop.forwarding`) take turns.
///
/// A receiver resumes the tasks waiting for what it received — a `discover` stream's reader, a
/// stream's reader, a continue request's caller — inside `EventLoops.handingOff`, so that
/// they run next on the same loop thread once the receiver suspends, instead of waking another
/// loop for each one. While messages keep coming the receive never suspends, so every `limit`
/// messages the receiver yields, and what it handed off runs (`ReceiveBurstTests`).
struct ReceiveBurst {
    /// Messages a receiver handles before it lets the tasks they resumed run.
    static let limit = 64

    private var count = 0

    /// Call before each receive: yields once every ``limit`` calls, on the caller's actor (no hop
    /// off the node for the calls that do not yield). Returns whether the receiver goes on: false
    /// once its task is cancelled, which is looked at on the first call and then once a burst.
    /// (Looking at every message was two reference counts of the task each time; a receiver whose
    /// socket has nothing suspends in its receive, which a cancellation ends at once.)
    nonisolated(nonsending)
    mutating func next() async -> Bool {
        count += 1
        if count == 1 { return !Task.isCancelled }
        guard count > Self.limit else { return true }
        count = 0
        await Task.yield()
        return !Task.isCancelled
    }
}
