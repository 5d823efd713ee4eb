import ZeroMQ

/// Handshakes refused at a secure broker's or node's server sockets, by reason.
///
/// Two places see refusals: the ZAP handler, asked about every CURVE client that proved its key
/// (it refuses keys the account does not list), and a monitor on each server socket, which sees the
/// handshakes that fail before ZAP is asked — a peer without CURVE, or one whose CURVE proof does
/// not check out. Each reason is a `reason` label of the `…_refusals_total` metric (``Reason/label``).
///
/// A peer that does not speak ZMTP 3 at all (a port scanner's bytes, ZMTP 1.0 or 2.0) is refused
/// too, but libzmq reports no handshake event for it, only its disconnection: it is not counted.
public struct HandshakeRefusals: Sendable, Hashable {
    /// Why a handshake was refused.
    public enum Reason: String, Sendable, Hashable, CaseIterable {
        /// The peer speaks ZMTP without CURVE (the NULL or PLAIN mechanism).
        case noCurve = "no_curve"
        /// The peer proved a CURVE key the account does not list (ZAP refused it).
        case keyNotInAccount = "key_not_in_account"
        /// The peer's CURVE proof did not check out: it claims a key without its secret key (its
        /// vouch does not open), or it encrypted to a key that is not this server's.
        case keyNotProven = "key_not_proven"
        /// Another ZMTP or CURVE protocol error: commands out of order, malformed, bad metadata.
        case malformed
        /// The connection ended (or timed out) before the handshake did.
        case incomplete

        /// The metric label: `handshake_` and the raw value (the refusal counters also count
        /// refused messages, under other reasons).
        public var label: String { "handshake_" + rawValue }

        /// Why, in words, for the log.
        var explanation: String {
            switch self {
            case .noCurve: "the peer speaks no CURVE (only CURVE is accepted)"
            case .keyNotInAccount: "its key is not in this account"
            case .keyNotProven: "its CURVE proof does not check out (a key claimed without its secret key, or the wrong server key)"
            case .malformed: "its handshake breaks the ZMTP/CURVE protocol"
            case .incomplete: "the connection ended before the handshake did"
            }
        }

        /// The reason of a handshake failure a server socket's monitor reported, or `nil` for an
        /// event that is not one.
        init?(_ event: MonitorEvent) {
            switch event.kind {
            case .handshakeFailedProtocol:
                switch event.value {
                case Self.mechanismMismatch: self = .noCurve
                case Self.cryptographic: self = .keyNotProven
                default: self = .malformed
                }
            case .handshakeFailedNoDetail: self = .incomplete
            case .handshakeFailedAuth: self = .keyNotInAccount
            default: return nil
            }
        }

        /// ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH: the peer's greeting names another mechanism.
        static let mechanismMismatch: UInt32 = 0x1100_0002
        /// ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC: a CURVE box did not open.
        static let cryptographic: UInt32 = 0x1100_0001
    }

    public var noCurve = 0
    public var keyNotInAccount = 0
    public var keyNotProven = 0
    public var malformed = 0
    public var incomplete = 0

    public init() {}

    /// Every refused handshake, whatever the reason.
    public var total: Int { Reason.allCases.reduce(0) { $0 + self[$1] } }

    public subscript(reason: Reason) -> Int {
        get {
            switch reason {
            case .noCurve: noCurve
            case .keyNotInAccount: keyNotInAccount
            case .keyNotProven: keyNotProven
            case .malformed: malformed
            case .incomplete: incomplete
            }
        }
        set {
            switch reason {
            case .noCurve: noCurve = newValue
            case .keyNotInAccount: keyNotInAccount = newValue
            case .keyNotProven: keyNotProven = newValue
            case .malformed: malformed = newValue
            case .incomplete: incomplete = newValue
            }
        }
    }
}
