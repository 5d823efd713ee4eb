import Foundation
import ZeroMQ

/// A DEALER connected to one originator's continuation endpoint, with a monitor that tells when the
/// connection drops. Owned by the node actor.
final class Client {
    let socket: Socket
    let monitor: SocketMonitor
    /// What the connection's events mean, and what a continue waiting on it does (``OriginConnection``).
    var connection: OriginConnection
    var endpoint: String { connection.endpoint }
    /// Reconnects in a row that found nothing listening at the endpoint (``EndpointProbe``), and
    /// whether a probe is under way: whether the originator is gone (``OriginRefusals``).
    var refusals = OriginRefusals()

    init(endpoint: String, context: Context, security: Security?, serverKey: CurveKey?, limits: Node.ContinuationLimits) throws(ZMQError) {
        connection = OriginConnection(endpoint: endpoint, serverKey: serverKey)
        socket = try context.socket(.dealer)
        if let security, let serverKey { try security.secureClient(socket, serverKey: serverKey) }
        try socket.set(.sendHighWaterMark, 10_000)
        try socket.set(.receiveHighWaterMark, limits.receiveHighWaterMark)
        try socket.set(.maxMessageSize, limits.maxMessageSize)
        // Queue only to a live connection: with no originator, a send is refused at once
        // instead of waiting in a queue for a peer that may never come back.
        try socket.set(.immediate, true)
        try socket.set(.reconnectInterval, 100)
        try socket.set(.reconnectIntervalMax, 2000)
        try socket.set(.heartbeatInterval, 1000)
        try socket.set(.heartbeatTimeout, 3000)
        monitor = try socket.monitor(Self.watchedEvents)
        try socket.connect(endpoint)
    }

    /// The drops and refusals the node acts on; a failed reconnect, to ask whether the peer is gone;
    /// each connection made, to watch it for a message that never ends (``UnfinishedMessageBound``:
    /// the originator is whoever advertised the endpoint, any member of the bus); each handshake
    /// done, to resume the pairs its drop interrupted.
    static let watchedEvents: MonitorEvents = [.connected, .handshakeSucceeded, .disconnected, .handshakeFailedAuth, .handshakeFailedProtocol, .connectRetried]

    func close() {
        monitor.stop()
        socket.close()
    }
}
