import Synchronization

/// Raised the moment a node's run is cancelled, before any of its jobs (delegates, plugin calls)
/// hears of it.
///
/// A job cancelled because its node stops drops what it held: a stream's iterator (a reader that
/// stopped) and its handles (an application that let go). Those are the node stopping, not its
/// application's choice, and the peer must hear so: "shut down" (``HandoffError/Code-swift.struct/peerLost``),
/// not "the reader stopped" (``HandoffError/Code-swift.struct/streamCancelled``). Their word reaches
/// the node's actor in a task of its own, which can come before the run's end sends the
/// shutdown notice: the node reads this flag then, and leaves the pair to the notice.
final class StoppingFlag: Sendable {
    private let raised = Atomic<Bool>(false)

    func raise() { raised.store(true, ordering: .releasing) }

    var isRaised: Bool { raised.load(ordering: .acquiring) }
}
