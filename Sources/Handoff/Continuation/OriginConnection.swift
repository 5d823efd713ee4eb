import Foundation
import ZeroMQ

/// The continuing node's connection to one originator's continuation endpoint, deciding with no
/// I/O: whom a continue may connect to when secure, whether it may use the DEALER the node has or
/// must make it again, what each event of the DEALER's monitor means, what ends a wait for the
/// connection (up, refused at the CURVE handshake, the connect timeout, the socket closed), and
/// what a continue does when its request finds no connection. The node owns the DEALER and its
/// monitor (``Client``) and carries out what this says (Node+OriginClients.swift,
/// Node+Continuation.swift); tested without sockets or a clock (OriginConnectionTests).
struct OriginConnection: Equatable {
    let endpoint: String
    /// The originator's CURVE key the DEALER authenticates, when secure.
    let serverKey: CurveKey?
    /// The originator refused this node's key at the handshake. libzmq does not try a refused
    /// handshake again, so the DEALER is of no more use (and the account may have changed since).
    private(set) var refusedAtHandshake = false
    /// Continues and stream opens waiting for this connection to come up (``waitBegins()``): the
    /// DEALER is in use while any does, though no request is pending on it yet.
    private(set) var waits = 0

    /// How often a wait for the connection looks again whether the originator refused the
    /// handshake, so that a refusal ends the wait once it is read, not when the timeout runs out.
    static let refusalCheckInterval: Duration = .milliseconds(50)

    init(endpoint: String, serverKey: CurveKey?) {
        self.endpoint = endpoint
        self.serverKey = serverKey
    }

    // MARK: Before connecting

    /// Secure (`authorizes` given), a continue connects only to an originator that advertised a
    /// key, and one in the account: `unauthorized` otherwise, before any socket is made.
    static func authorize(
        endpoint: String, serverKey: CurveKey?, authorizes: ((CurveKey) -> Bool)?, activityType: String
    ) throws(HandoffError) {
        guard let authorizes else { return }
        guard let serverKey else {
            throw HandoffError(.unauthorized, "the originator at \(endpoint) advertised no public key; this node continues only from nodes of its account", activityType: activityType)
        }
        guard authorizes(serverKey) else {
            throw HandoffError(.unauthorized, "the originator at \(endpoint) has key \(serverKey.z85), which is not in this node's account", activityType: activityType)
        }
    }

    /// Whether a continue towards an originator with `serverKey` may use this connection: not when
    /// another node (another key) answers at the endpoint now, nor once this one was refused.
    func serves(serverKey: CurveKey?) -> Bool {
        self.serverKey == serverKey && !refusedAtHandshake
    }

    /// The endpoints of the DEALERs in `clients` that nothing needs any more: no request waits on
    /// its originator, no continue or stream open waits for its connection (`awaited`; a continue
    /// whose first send found no connection has no pending request while it waits), no stream pair
    /// (live or failed) is routed through it, and no known activity names it (a continue may come).
    /// Stops reading `knownEndpoints` once every client is needed: few clients, possibly 100,000
    /// known activities.
    static func unused(
        _ clients: some Sequence<String>, pending: some Sequence<String>, awaited: some Sequence<String>, pairs: some Sequence<String>,
        knownEndpoints: some Sequence<String>
    ) -> Set<String> {
        var unused = Set(clients)
        unused.subtract(pending)
        unused.subtract(awaited)
        unused.subtract(pairs)
        guard !unused.isEmpty else { return unused }
        for endpoint in knownEndpoints {
            unused.remove(endpoint)
            if unused.isEmpty { break }
        }
        return unused
    }

    // MARK: The monitor's events

    /// What an event of the DEALER's monitor means.
    enum Event: Equatable {
        /// The connection dropped: requests to this originator fail now, its stream pairs are interrupted.
        case dropped
        /// The originator refused this node's key at the handshake (or the handshake broke).
        case refused
        /// libzmq failed to reconnect: ask whether the originator is gone (``OriginRefusals``).
        case reconnectFailed
    }

    /// Takes in an event of the DEALER's monitor (one of ``Client/watchedEvents`` other than
    /// `connected` and `handshakeSucceeded`, which the node handles itself).
    mutating func observe(_ kind: MonitorEvents) -> Event {
        if kind == .connectRetried { return .reconnectFailed }
        if kind == .disconnected { return .dropped }
        refusedAtHandshake = true
        return .refused
    }

    // MARK: Waiting for the connection

    /// What a wait for the connection does next.
    enum Wait: Equatable {
        /// The connection is up: send.
        case connected
        /// Wait this long for the DEALER to be writable (with `ZMQ_IMMEDIATE`, only while a connection is up), then ask again.
        case wait(Duration)
        /// The continue fails with this error.
        case fail(HandoffError)
    }

    /// A continue or a stream open starts waiting for the connection.
    mutating func waitBegins() { waits += 1 }

    /// It stopped waiting, connected or not.
    mutating func waitEnds() { waits -= 1 }

    /// After a slice of the wait (or before the first, `writable` false), `remaining` before the
    /// connect timeout: a live connection ends it (a refusal read meanwhile was of an earlier
    /// attempt: this one passed its handshake), then a refusal, then the timeout.
    func wait(writable: Bool, remaining: Duration, connectTimeout: Duration, activityType: String) -> Wait {
        if writable { return .connected }
        if refusedAtHandshake { return .fail(refusal(activityType: activityType)) }
        guard remaining > .zero else {
            return .fail(HandoffError(.connectionUnavailable, "no connection to the originator at \(endpoint) within \(connectTimeout): its node is gone or unreachable", activityType: activityType))
        }
        return .wait(min(remaining, Self.refusalCheckInterval))
    }

    /// The wait ended as the socket was closed (`cancelled`: the continue was cancelled): the
    /// refusal when that is why, `connectionUnavailable` otherwise.
    func waitEnded(cancelled: Bool, activityType: String) -> HandoffError {
        if refusedAtHandshake { return refusal(activityType: activityType) }
        let why = cancelled ? "the continue was cancelled while" : "the connection was closed while"
        return HandoffError(.connectionUnavailable, "no connection to the originator at \(endpoint): \(why) this node waited for it", activityType: activityType)
    }

    /// The error for a continue towards an originator that refused this node's key.
    func refusal(activityType: String) -> HandoffError {
        HandoffError(.unauthorized, "the originator at \(endpoint) refused this node's key at the CURVE handshake: this node is not in its account", activityType: activityType)
    }

    // MARK: A request with no connection

    /// What a continue does when the DEALER refused its request (no connection).
    enum AfterRefusedSend: Equatable {
        /// Wait for the connection (``wait(writable:remaining:connectTimeout:activityType:)``), then send once more.
        case awaitConnection
        /// Fail with this error.
        case fail(HandoffError)
        /// Fail with the error the request was resolved with (`connectionUnavailable`).
        case failAsResolved
    }

    /// Once, a continue waits for the connection and sends again; a refusal at the handshake read
    /// meanwhile fails it at once (waiting would make the DEALER again, and a second handshake to
    /// be refused); after its one wait, the request fails as it stands.
    func afterRefusedSend(waitedAlready: Bool, activityType: String) -> AfterRefusedSend {
        if waitedAlready { return .failAsResolved }
        if refusedAtHandshake { return .fail(refusal(activityType: activityType)) }
        return .awaitConnection
    }
}
