import Synchronization
import ZeroMQ

/// The resolved endpoints, as the loop bound them.
struct BoundEndpoints: Sendable {
    var frontend: String
    var backend: String
    var capture: String?
}

/// What the loop and the ``Broker`` handle share: only values under locks.
final class SharedState: Sendable {
    /// The loop publishes its counters here before passing each message on.
    let counters = Mutex(Broker.Counters())
    /// The error that ended the loop early, if any.
    let failure = Mutex<ZMQError?>(nil)
    /// Whether the loop is forwarding: set before it starts, cleared once it has closed its sockets.
    let running = Atomic<Bool>(true)
    /// The loop's thread's id (`gettid`), once it runs; 0 before.
    let threadID = Atomic<Int32>(0)
}
