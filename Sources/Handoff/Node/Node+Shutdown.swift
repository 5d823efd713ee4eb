import Foundation
import HandoffWire
import Logging
import ZeroMQ

/// How a node stops: what still waits on it ends, the bus hears its activities withdrawn, and its
/// sockets close.
extension Node {
    /// Fails every continue still waiting for its originator and every open stream pair, so that
    /// whatever waits on them (a caller, a delegate, a plugin call) returns.
    func failOutstanding() {
        resume(continuing.failAll(HandoffError(.notRunning, "the node shut down before the originator answered")))
        for session in streams.all {
            if session.failure == nil {
                perform(session.pair.nodeStopped(node: own.info.name, now: .now), on: session)
                // Sockets close with linger 0: give the notice half a second to leave.
                switch session.route.peer {
                case .router: try? sockets.server.set(.linger, 500)
                case .dealer(let endpoint): try? sockets.clients[endpoint]?.socket.set(.linger, 500)
                }
            }
        }
        streams.removeAll()
    }

    /// Whether the node has stopped: its ``run()`` ended (cancelled, or the node shut down), and
    /// nothing it started goes on.
    ///
    /// Every ``discover(_:)`` stream ends then. A stream also ends while the node runs, when its
    /// reader falls more than ``Configuration-swift.struct/maxDiscoverBacklog`` events behind: a
    /// reader whose stream ended tells the two apart here, and discovers again while this is
    /// `false`.
    public var hasStopped: Bool { lifecycle.runState == .stopped }

    func shutDown() {
        lifecycle.runState = .stopped
        lifecycle.jobs = nil
        let (withdrawn, withdrawals) = advertiser.removeAll()
        for activity in withdrawn { activity.detach() }
        publish(withdrawals)
        failOutstanding()
        for sink in listeners.watchers.removeAll() { sink.finish() }
        for client in sockets.clients.values { client.close() }
        sockets.clients.removeAll()
        for (_, monitor) in sockets.busMonitors { monitor.stop() }
        sockets.busMonitors.removeAll()
        for monitor in sockets.serverMonitors { monitor.stop() }
        sockets.serverMonitors.removeAll()
        changeQueue.wake.finish()
        access.zap?.removePolicy(forDomain: zapDomain)
        access.zap = nil
        // Close now: the publisher's linger lets the withdrawals above leave, and a caller may then
        // terminate the context (see Context.terminate()) to wait until they have.
        for subscriber in subscribers { subscriber.close() }
        sockets.server.close()
        sockets.publisher.close()
        own.logger.info("node stopped")
    }
}
