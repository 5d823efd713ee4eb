import Foundation
import Logging
import ZeroMQ

extension Node {
    /// Whether a node is on the bus: what an operator's health check asks (`/healthz` of
    /// `handoff agent --metrics`).
    public struct BusHealth: Sendable, Hashable {
        /// True when the node's messages reach the bus and the bus's reach it.
        public var isOnBus: Bool
        /// Why, in words: what is connected and what was last heard, or what is missing.
        public var reason: String
        /// The bus endpoints the node's sockets are connected to now (handshake done), sorted.
        public var connectedEndpoints: [String]
    }

    /// How long the bus may stay silent about this node's own presence before the node counts as
    /// cut off (``BusHealthCheck/proofWindow(advertiseInterval:)``).
    var busProofWindow: Duration { BusHealthCheck.proofWindow(advertiseInterval: own.configuration.advertiseInterval) }

    /// Whether this node is on the bus now, as ``BusHealthCheck`` decides.
    ///
    /// - On brokers: its publisher and its subscriber are each connected to a broker, and its own
    ///   `NodePresence` (sent every ``Configuration-swift.struct/advertiseInterval``) came back
    ///   through a broker within the last three intervals: proof that the whole path works, not
    ///   only that a TCP connection is open.
    /// - Direct: at least one peer's publisher is connected (or the node has no peers).
    ///
    /// A node that is not running, or that the bus refused at the handshake, is not on the bus.
    public var busHealth: BusHealth {
        let connections = sockets.busConnections
        let monitored = sockets.busMonitors.enumerated().map { index, monitor in
            (isPublisher: monitor.socket === publisher, connected: connections.contains { $0.monitor == index })
        }
        return BusHealthCheck.health(BusHealthCheck.Facts(
            running: lifecycle.runState == .running, refusal: busRefusal, bus: own.configuration.bus, sockets: monitored,
            connectedEndpoints: connections.map(\.endpoint), lastProof: sockets.lastBusProof,
            now: .now, proofWindow: busProofWindow))
    }

    /// Keeps ``busConnections`` up to date from a bus socket's monitor event.
    func noteBusConnection(monitor index: Int, _ event: MonitorEvent) {
        switch event.kind {
        case .handshakeSucceeded: sockets.busConnections.insert(BusConnection(monitor: index, endpoint: event.endpoint))
        case .disconnected: sockets.busConnections.remove(BusConnection(monitor: index, endpoint: event.endpoint))
        default: break
        }
    }

    /// One connection of one bus socket (the index of its monitor in ``busMonitors``).
    struct BusConnection: Hashable {
        let monitor: Int
        let endpoint: String
    }

    // MARK: Watching the bus sockets

    /// The handshake events a node watches on its bus sockets, and each connection made (a
    /// subscriber's are watched for a message that never ends, ``UnfinishedMessageBound``).
    static let handshakeEvents: MonitorEvents = [.connected, .handshakeFailedAuth, .handshakeFailedProtocol, .handshakeSucceeded, .disconnected]

    /// Notices the bus refusing this node at the handshake, as ``BusHandshakes`` decides from the
    /// socket's monitor: logs it, keeps the reason in ``busRefusal`` (cleared once a handshake
    /// passes), and reconnects after the backoff it says; asks again for what the bus lost after a
    /// reconnect of a subscriber.
    func watchBusHandshakes(_ index: Int) async {
        var handshakes = BusHandshakes(keyless: own.configuration.security == nil)
        while !Task.isCancelled, index < sockets.busMonitors.count {
            let (socket, monitor) = sockets.busMonitors[index]
            guard let event = try? await monitor.next(timeout: .seconds(3600)) else {
                if Task.isCancelled || sockets.busMonitors.isEmpty { return }
                continue
            }
            if event.kind == .connected {
                // What a subscriber reads (a peer's publisher, or a broker's backend): a publisher
                // in broker mode reads nothing but what libzmq takes in itself (subscriptions).
                if sockets.subscribers.contains(where: { $0 === socket }) { sockets.unfinishedMessages.watch(event, on: socket) }
                continue
            }
            noteBusConnection(monitor: index, event)
            switch handshakes.observe(event.kind, endpoint: event.endpoint) {
            case .none:
                continue
            case .accepted(let reconnected):
                if busRefusal != nil { own.logger.info("\(event.endpoint) accepted this node at the handshake now") }
                sockets.busRefusal = nil
                if reconnected, sockets.subscribers.contains(where: { $0 === socket }) { busReconnected(to: event.endpoint) }
            case .refused(let retryAfter):
                let server = switch own.configuration.bus {
                case .broker, .brokers: "the broker"
                case .direct: "the peer"
                }
                let refusal = handshakes.refusal(by: server, at: event.endpoint, publicKey: own.info.publicKey)
                if busRefusal?.message != refusal.message { own.logger.error("\(refusal.message)") }
                sockets.busRefusal = refusal
                // Try again later, on a fresh connection.
                do { try await EventLoops.sleep(for: retryAfter) } catch { return }
                guard !sockets.busMonitors.isEmpty else { return }
                do {
                    try socket.disconnect(event.endpoint)
                    try socket.connect(event.endpoint)
                    own.logger.debug("reconnecting to \(event.endpoint) after a refused handshake")
                } catch {
                    own.logger.warning("could not reconnect to \(event.endpoint): \(error)")
                }
            }
        }
    }

    /// Watches each connection accepted at this node's server sockets (``UnfinishedMessageBound``);
    /// counts the handshakes refused there, by reason, and logs those that fail before ZAP is asked
    /// (a peer without CURVE, or one that cannot prove the key it claims) at most once a minute per
    /// peer address and reason; ZAP's policy logs the keys it refuses.
    func watchFailedHandshakes(_ index: Int) async {
        while !Task.isCancelled, index < sockets.serverMonitors.count {
            guard let event = try? await sockets.serverMonitors[index].next(timeout: .seconds(3600)) else {
                if Task.isCancelled || sockets.serverMonitors.isEmpty { return }
                continue
            }
            if event.kind == .accepted {
                // The monitors are the continuation ROUTER's, then (direct) the publisher's.
                sockets.unfinishedMessages.watch(event, on: index == 0 ? sockets.server : sockets.publisher)
                continue
            }
            guard let reason = HandshakeRefusals.Reason(event) else { continue }
            observability.securityCounters.handshakeRefusals[reason] += 1
            guard reason != .keyNotInAccount,
                  let line = observability.refusalLog.line(reason, from: event.peerAddress, at: "node \(own.configuration.name)'s \(event.endpoint)", now: .now)
            else { continue }
            own.logger.warning("\(line)")
        }
    }
}
