import Foundation
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
    /// cut off: three presence intervals, and never less than a second.
    var busProofWindow: Duration { max(configuration.advertiseInterval * 3, .seconds(1)) }

    /// Whether this node is on the bus now.
    ///
    /// - On brokers: its publisher and its subscriber are each connected to a broker, and its own
    ///   `NodePresence` (sent every ``Configuration-swift.struct/advertiseInterval``) came back
    ///   through a broker within the last three intervals: proof that the whole path works, not
    ///   only that a TCP connection is open.
    /// - Direct: at least one peer's publisher is connected (or the node has no peers).
    ///
    /// A node that is not running, or that the bus refused at the handshake, is not on the bus.
    public var busHealth: BusHealth {
        let connected = Set(busConnections.map(\.endpoint)).sorted()
        func health(_ isOnBus: Bool, _ reason: String) -> BusHealth {
            BusHealth(isOnBus: isOnBus, reason: reason, connectedEndpoints: connected)
        }
        guard runState == .running else { return health(false, "the node is not running") }
        if let busRefusal { return health(false, busRefusal.message) }
        switch configuration.bus {
        case .direct(_, let peers):
            if peers.isEmpty { return health(true, "direct, with no peers to connect to") }
            let reached = busConnections.count
            return reached > 0
                ? health(true, "connected to \(reached) of \(peers.count) peers")
                : health(false, "connected to none of its \(peers.count) peers (\(peers.joined(separator: ", ")))")
        case .broker, .brokers:
            let brokers = configuration.bus.brokerEndpoints ?? []
            for (index, (socket, _)) in busMonitors.enumerated() where !busConnections.contains(where: { $0.monitor == index }) {
                let side = socket === publisher ? "frontend" : "backend"
                let endpoints = brokers.map { side == "frontend" ? $0.frontend : $0.backend }
                return health(false, "not connected to any broker's \(side) (\(endpoints.joined(separator: ", ")))")
            }
            guard let proof = lastBusProof else {
                return health(false, "connected, but its own presence has not come back through a broker yet")
            }
            let silence = ContinuousClock.now - proof
            guard silence <= busProofWindow else {
                return health(false, "its own presence has not come back through a broker for \(String(format: "%.1f", silence.seconds)) s")
            }
            return health(true, "connected to \(connected.joined(separator: ", ")); its presence came back \(Int(silence.seconds * 1000)) ms ago")
        }
    }

    /// Keeps ``busConnections`` up to date from a bus socket's monitor event.
    func noteBusConnection(monitor index: Int, _ event: MonitorEvent) {
        switch event.kind {
        case .handshakeSucceeded: busConnections.insert(BusConnection(monitor: index, endpoint: event.endpoint))
        case .disconnected: busConnections.remove(BusConnection(monitor: index, endpoint: event.endpoint))
        default: break
        }
    }

    /// One connection of one bus socket (the index of its monitor in ``busMonitors``).
    struct BusConnection: Hashable {
        let monitor: Int
        let endpoint: String
    }
}
