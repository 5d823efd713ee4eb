import ArgumentParser
import Foundation
import Handoff
import ZeroMQ

/// Where a command that watches the bus (`monitor`, `top`, `trace`) subscribes, and with which
/// keys: a broker's backend (`--bus`, else the backend of `--broker`, else of $HANDOFF_BROKER,
/// else the default), over CURVE when it has a key; beyond loopback only with one or `--insecure`.
struct WatchedBus {
    let endpoint: String
    let keys: Security?

    /// - Parameter what: What the command does there, for the error ("watch it", "trace over it").
    init(bus: String?, broker: [String], security: SecurityOptions, what: String) throws {
        // Refused with what it takes, not an index out of range: `--broker` with one endpoint.
        if !broker.isEmpty { _ = try Environment.bus(broker) }
        endpoint = try bus ?? (broker.isEmpty ? Environment.brokerOrDefault() : broker)[1]
        keys = try security.resolve(needsBrokerKey: true)
        if keys == nil && !Security.isLocal(endpoint) && !security.allowsInsecure() {
            throw HandoffError(.invalidConfiguration, "\(endpoint) is beyond loopback: give a key (--key) to \(what) over CURVE, or pass --insecure")
        }
    }

    /// The key pair and the broker's key, for a CURVE subscriber.
    var curve: (keyPair: CurveKeyPair, serverKey: CurveKey)? {
        keys.flatMap { keys in keys.brokerKey.map { (keys.keyPair, $0) } }
    }

    /// A SUB socket set for the bus (the contract's frame limit, CURVE when keyed), not yet
    /// connected: the caller subscribes first.
    func subscriber(in context: Context) throws -> Socket {
        let socket = try context.socket(.sub)
        try socket.set(.linger, 0)
        try socket.set(.maxMessageSize, Int64(WireLimits.maxBusFrame))
        if let curve { try socket.makeCurveClient(curve.keyPair, serverKey: curve.serverKey) }
        return socket
    }
}
