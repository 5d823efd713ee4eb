import Foundation

/// Whether a node is on the bus (``Node/busHealth``, what `/healthz` answers), decided with no I/O
/// from what the node's sockets and the bus told it, time passed in; tested without sockets
/// (BusHealthCheckTests).
///
/// - On brokers: each bus socket (publisher and subscriber) is connected to a broker, and the
///   node's own presence came back through a broker within the proof window: proof that the
///   whole path works, not only that a TCP connection is open.
/// - Direct: at least one peer's publisher is connected (or the node has no peers).
///
/// A node that is not running, or that the bus refused at the handshake, is not on the bus.
enum BusHealthCheck {
    /// What the node knows.
    struct Facts {
        var running: Bool
        /// Why the bus refused this node at the handshake, while it does (``BusHandshakes``).
        var refusal: HandoffError?
        var bus: Node.Configuration.Bus
        /// Each bus socket in its monitor's order: whether it is the publisher (a broker's frontend
        /// side) and whether it has a connection that passed its handshake.
        var sockets: [(isPublisher: Bool, connected: Bool)]
        /// The endpoint of each connection up now (one socket may have several).
        var connectedEndpoints: [String]
        /// When the node's own presence last came back through a broker.
        var lastProof: ContinuousClock.Instant?
        var now: ContinuousClock.Instant
        /// How long the bus may stay silent about the node's own presence (``proofWindow(advertiseInterval:)``).
        var proofWindow: Duration
    }

    /// Three presence intervals, and never less than a second.
    static func proofWindow(advertiseInterval: Duration) -> Duration {
        max(advertiseInterval * 3, .seconds(1))
    }

    static func health(_ facts: Facts) -> Node.BusHealth {
        let connected = Set(facts.connectedEndpoints).sorted()
        func health(_ isOnBus: Bool, _ reason: String) -> Node.BusHealth {
            Node.BusHealth(isOnBus: isOnBus, reason: reason, connectedEndpoints: connected)
        }
        guard facts.running else { return health(false, "the node is not running") }
        if let refusal = facts.refusal { return health(false, refusal.message) }
        switch facts.bus {
        case .direct(_, let peers):
            if peers.isEmpty { return health(true, "direct, with no peers to connect to") }
            let reached = facts.connectedEndpoints.count
            return reached > 0
                ? health(true, "connected to \(reached) of \(peers.count) peers")
                : health(false, "connected to none of its \(peers.count) peers (\(peers.joined(separator: ", ")))")
        case .broker, .brokers:
            let brokers = facts.bus.brokerEndpoints ?? []
            if let unconnected = facts.sockets.first(where: { !$0.connected }) {
                let side = unconnected.isPublisher ? "frontend" : "backend"
                let endpoints = brokers.map { unconnected.isPublisher ? $0.frontend : $0.backend }
                return health(false, "not connected to any broker's \(side) (\(endpoints.joined(separator: ", ")))")
            }
            guard let proof = facts.lastProof else {
                return health(false, "connected, but its own presence has not come back through a broker yet")
            }
            let silence = facts.now - proof
            guard silence <= facts.proofWindow else {
                return health(false, "its own presence has not come back through a broker for \(String(format: "%.1f", silence.seconds)) s")
            }
            return health(true, "connected to \(connected.joined(separator: ", ")); its presence came back \(Int(silence.seconds * 1000)) ms ago")
        }
    }
}
