import Foundation
import ZeroMQ

/// One bus socket's handshakes with the servers it connects to (brokers, or peers when direct),
/// deciding with no I/O from its monitor's events: a handshake that passed (and whether it is a
/// reconnect, after which what the bus lost is asked for again), a refusal of this node (its key
/// not in the server's account, or no key for a server that runs CURVE), and when to try again.
/// libzmq itself does not reconnect after a refused handshake, and the key may be added to the
/// account later: the node reconnects after a backoff, 1 s doubling to 30 s, back to 1 s once a
/// handshake passes. The node carries it out (``Node/watchBusHandshakes(_:)``); tested without
/// sockets (BusHandshakesTests).
struct BusHandshakes {
    static let firstBackoff: Duration = .seconds(1)
    static let maxBackoff: Duration = .seconds(30)

    /// The node has no key: a server that runs CURVE may hang up before libzmq reports the
    /// mechanism mismatch, so a connection closed before its handshake passed is a refusal.
    let keyless: Bool
    private(set) var backoff = Self.firstBackoff
    /// Endpoints whose current connection passed the handshake.
    private var accepted: Set<String> = []
    /// Endpoints connected before: a handshake there is a reconnect.
    private var everAccepted: Set<String> = []

    init(keyless: Bool) {
        self.keyless = keyless
    }

    /// What an event of the socket's monitor means.
    enum Verdict: Equatable {
        /// The handshake with the server at the endpoint passed (a refusal kept is cleared);
        /// `reconnected`: it passed there before, so this is a new connection after a lost one.
        case accepted(reconnected: Bool)
        /// The server refused this node: say so, and reconnect after this long, on a fresh connection.
        case refused(retryAfter: Duration)
        /// Nothing to do: a drop after a handshake (libzmq reconnects), or, for a node with a key,
        /// a drop before one (libzmq's retry will tell whether it is a refusal).
        case none
    }

    /// Takes in an event of one of ``Node/handshakeEvents`` at `endpoint`.
    mutating func observe(_ kind: MonitorEvents, endpoint: String) -> Verdict {
        if kind == .handshakeSucceeded {
            backoff = Self.firstBackoff
            accepted.insert(endpoint)
            return .accepted(reconnected: !everAccepted.insert(endpoint).inserted)
        }
        if kind == .disconnected, accepted.remove(endpoint) != nil || !keyless {
            return .none
        }
        let retryAfter = backoff
        backoff = min(backoff * 2, Self.maxBackoff)
        return .refused(retryAfter: retryAfter)
    }

    /// The error a refusal by `server` (the broker, the peer) at `endpoint` is reported with.
    func refusal(by server: String, at endpoint: String, publicKey: CurveKey?) -> HandoffError {
        if keyless {
            HandoffError(.unauthorized, "\(server) at \(endpoint) refused this node at the handshake: it runs CURVE and this node has no key; give the node its key (--key, or security.key) and the account")
        } else {
            HandoffError(.unauthorized, "\(server) at \(endpoint) refused this node's key at the CURVE handshake: the key (\(publicKey?.z85 ?? "none")) is not in its account, or this node has the wrong public key for it")
        }
    }
}
