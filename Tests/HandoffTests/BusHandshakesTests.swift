import Foundation
import Testing
import ZeroMQ
@testable import Handoff

/// A bus socket's handshake rules on ``BusHandshakes``, with no socket: what a monitor event
/// means, when a handshake is a reconnect, and the backoff before trying a refused one again.
@Suite("Bus handshakes: accepted, reconnected, refused and the backoff (no I/O)")
struct BusHandshakesTests {
    let broker = "tcp://192.0.2.1:4101"
    let other = "tcp://192.0.2.2:4101"

    @Test("rule: a handshake that passes is accepted; one that passes again at the same endpoint is a reconnect, one at another endpoint is not")
    func reconnects() {
        var handshakes = BusHandshakes(keyless: false)
        #expect(handshakes.observe(.handshakeSucceeded, endpoint: broker) == .accepted(reconnected: false))
        #expect(handshakes.observe(.disconnected, endpoint: broker) == .none, "a drop after a handshake: libzmq reconnects")
        #expect(handshakes.observe(.handshakeSucceeded, endpoint: broker) == .accepted(reconnected: true))
        #expect(handshakes.observe(.handshakeSucceeded, endpoint: other) == .accepted(reconnected: false))
    }

    @Test("rule: a refused handshake is retried after 1 s, doubling to at most 30 s; a handshake that passes starts the backoff again")
    func backoff() {
        var handshakes = BusHandshakes(keyless: false)
        var waits: [Duration] = []
        for _ in 0..<7 {
            guard case .refused(let retryAfter) = handshakes.observe(.handshakeFailedAuth, endpoint: broker) else {
                Issue.record("a failed handshake was not a refusal")
                return
            }
            waits.append(retryAfter)
        }
        #expect(waits == [1, 2, 4, 8, 16, 30, 30].map { Duration.seconds($0) })
        #expect(handshakes.observe(.handshakeFailedProtocol, endpoint: broker) == .refused(retryAfter: .seconds(30)))
        #expect(handshakes.observe(.handshakeSucceeded, endpoint: broker) == .accepted(reconnected: false))
        #expect(handshakes.observe(.handshakeFailedAuth, endpoint: broker) == .refused(retryAfter: .seconds(1)))
    }

    @Test("rule: a drop before any handshake is a refusal for a keyless node (a CURVE server hangs up on it), and nothing for a node with a key (libzmq's retry will tell)")
    func dropBeforeTheHandshake() {
        var keyless = BusHandshakes(keyless: true)
        #expect(keyless.observe(.disconnected, endpoint: broker) == .refused(retryAfter: .seconds(1)))
        #expect(keyless.observe(.handshakeSucceeded, endpoint: broker) == .accepted(reconnected: false))
        #expect(keyless.observe(.disconnected, endpoint: broker) == .none, "a drop after the handshake is no refusal")
        #expect(keyless.observe(.disconnected, endpoint: broker) == .refused(retryAfter: .seconds(1)), "the next connection's drop came before its handshake")
        var keyed = BusHandshakes(keyless: false)
        #expect(keyed.observe(.disconnected, endpoint: broker) == .none)
    }

    @Test("the refusal names the server and endpoint, and says what to do: give a keyless node its key; check a keyed node's key and account")
    func refusalMessages() throws {
        let key = try CurveKeyPair.generate().publicKey
        let keyless = BusHandshakes(keyless: true).refusal(by: "the broker", at: broker, publicKey: nil)
        #expect(keyless.code == .unauthorized && keyless.message.hasPrefix("the broker at \(broker)") && keyless.message.contains("--key"))
        let keyed = BusHandshakes(keyless: false).refusal(by: "the peer", at: broker, publicKey: key)
        #expect(keyed.code == .unauthorized && keyed.message.hasPrefix("the peer at") && keyed.message.contains(key.z85))
    }
}
