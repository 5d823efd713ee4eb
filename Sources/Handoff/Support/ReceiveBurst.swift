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
    /// off the node for the calls that do not yield).
    nonisolated(nonsending)
    mutating func next() async {
        count += 1
        guard count > Self.limit else { return }
        count = 0
        await Task.yield()
    }
}
