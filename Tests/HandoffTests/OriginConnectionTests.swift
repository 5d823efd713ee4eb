import Foundation
import Testing
import ZeroMQ
@testable import Handoff

/// The continuing node's rules for its connection to an originator, on ``OriginConnection``, with
/// no socket and no clock: whom it may connect to, when its DEALER is made again, what the
/// monitor's events mean, what ends a wait for the connection, and what a request that found no
/// connection does. (SecurityTests drives the same rules over real CURVE sockets.)
@Suite("Origin connection: authorization, reuse, the monitor's events, the wait for a connection (no I/O)")
struct OriginConnectionTests {
    let endpoint = "tcp://192.0.2.7:4100"

    func key() throws -> CurveKey { try CurveKeyPair.generate().publicKey }

    @Test("rule: secure, a continue connects only to an originator that advertised a key in the account (unauthorized before any socket); open, to anyone")
    func authorization() throws {
        let member = try key(), stranger = try key()
        let account: (CurveKey) -> Bool = { $0 == member }
        #expect(throws: Never.self) { try OriginConnection.authorize(endpoint: endpoint, serverKey: member, authorizes: account, activityType: "t") }
        #expect(throws: Never.self) { try OriginConnection.authorize(endpoint: endpoint, serverKey: nil, authorizes: nil, activityType: "t") }
        for (serverKey, says) in [(stranger, "not in this node's account"), (nil, "advertised no public key")] as [(CurveKey?, String)] {
            do {
                try OriginConnection.authorize(endpoint: endpoint, serverKey: serverKey, authorizes: account, activityType: "t")
                Issue.record("an originator with \(serverKey.map(\.z85) ?? "no key") was authorized")
            } catch {
                #expect(error.code == .unauthorized && error.message.contains(says) && error.activityType == "t")
            }
        }
    }

    @Test("rule: the DEALER serves continues to the key it authenticates until that originator refuses this node's key; another key at the endpoint makes it again")
    func reuse() throws {
        let first = try key(), second = try key()
        var connection = OriginConnection(endpoint: endpoint, serverKey: first)
        #expect(connection.serves(serverKey: first))
        #expect(!connection.serves(serverKey: second), "another node answers at the endpoint now")
        #expect(!connection.serves(serverKey: nil))
        _ = connection.observe(.disconnected)
        #expect(connection.serves(serverKey: first), "a dropped connection is one libzmq makes again")
        _ = connection.observe(.handshakeFailedAuth)
        #expect(!connection.serves(serverKey: first), "libzmq does not try a refused handshake again")
    }

    @Test("rule: the monitor's events mean a drop, a refusal (auth or protocol failure at the handshake), or a failed reconnect; only a refusal is kept")
    func monitorEvents() {
        var connection = OriginConnection(endpoint: endpoint, serverKey: nil)
        #expect(connection.observe(.connectRetried) == .reconnectFailed)
        #expect(connection.observe(.disconnected) == .dropped)
        #expect(!connection.refusedAtHandshake)
        #expect(connection.observe(.handshakeFailedProtocol) == .refused)
        #expect(connection.refusedAtHandshake)
        var other = OriginConnection(endpoint: endpoint, serverKey: nil)
        #expect(other.observe(.handshakeFailedAuth) == .refused && other.refusedAtHandshake)
    }

    @Test("rule: a wait for the connection goes in slices of at most refusalCheckInterval, ends connected once writable (even with a refusal of an earlier attempt read), unauthorized once refused (before the timeout), and connectionUnavailable at the timeout")
    func waitForConnection() {
        var connection = OriginConnection(endpoint: endpoint, serverKey: nil)
        let timeout: Duration = .seconds(5)
        #expect(connection.wait(writable: false, remaining: timeout, connectTimeout: timeout, activityType: "t") == .wait(OriginConnection.refusalCheckInterval))
        #expect(connection.wait(writable: false, remaining: .milliseconds(20), connectTimeout: timeout, activityType: "t") == .wait(.milliseconds(20)))
        #expect(connection.wait(writable: true, remaining: .zero, connectTimeout: timeout, activityType: "t") == .connected, "a connection up as time ran out is used")
        guard case .fail(let late) = connection.wait(writable: false, remaining: .zero, connectTimeout: timeout, activityType: "t") else {
            Issue.record("the wait went on past the connect timeout")
            return
        }
        #expect(late.code == .connectionUnavailable && late.message.contains("within 5"))
        _ = connection.observe(.handshakeFailedAuth)
        #expect(connection.wait(writable: true, remaining: timeout, connectTimeout: timeout, activityType: "t") == .connected, "a connection up is used")
        for (writable, remaining) in [(false, timeout), (false, Duration.zero)] {
            guard case .fail(let refused) = connection.wait(writable: writable, remaining: remaining, connectTimeout: timeout, activityType: "t") else {
                Issue.record("a refused connection was waited on or used (writable \(writable), \(remaining) left)")
                continue
            }
            #expect(refused.code == .unauthorized && refused.message.contains("refused this node's key"))
        }
    }

    @Test("rule: a wait ended by the socket closing is the refusal when one was read, else connectionUnavailable saying whether the continue was cancelled")
    func waitEnded() {
        var connection = OriginConnection(endpoint: endpoint, serverKey: nil)
        #expect(connection.waitEnded(cancelled: true, activityType: "t").message.contains("cancelled"))
        let closed = connection.waitEnded(cancelled: false, activityType: "t")
        #expect(closed.code == .connectionUnavailable && closed.message.contains("closed"))
        _ = connection.observe(.handshakeFailedAuth)
        #expect(connection.waitEnded(cancelled: false, activityType: "t").code == .unauthorized)
    }

    @Test("rule: a request the DEALER refused (no connection) waits for the connection once and is sent again; refused at the handshake meanwhile it fails at once (no second DEALER); after its one wait it fails as resolved")
    func refusedSend() {
        var connection = OriginConnection(endpoint: endpoint, serverKey: nil)
        #expect(connection.afterRefusedSend(waitedAlready: false, activityType: "t") == .awaitConnection)
        #expect(connection.afterRefusedSend(waitedAlready: true, activityType: "t") == .failAsResolved)
        _ = connection.observe(.handshakeFailedAuth)
        #expect(connection.afterRefusedSend(waitedAlready: false, activityType: "t") == .fail(connection.refusal(activityType: "t")))
        #expect(connection.afterRefusedSend(waitedAlready: true, activityType: "t") == .failAsResolved)
    }
}

extension OriginConnectionTests {
    @Test("rule: a DEALER is closed once no request waits on its originator, no continue waits for its connection, no stream pair is routed through it, and no known activity names it")
    func unusedClients() {
        let clients = ["tcp://a:1", "tcp://b:1", "tcp://c:1", "tcp://d:1", "tcp://f:1"]
        let unused = OriginConnection.unused(
            clients, pending: ["tcp://a:1"], awaited: ["tcp://f:1"], pairs: ["tcp://b:1"], knownEndpoints: ["tcp://c:1", "tcp://e:1"])
        #expect(unused == ["tcp://d:1"])
        #expect(OriginConnection.unused([String](), pending: [], awaited: [], pairs: [], knownEndpoints: ["tcp://a:1"]).isEmpty)
        // Every client needed before the known activities are all read: the rest are not read.
        var read = 0
        let known = (0..<100_000).lazy.map { index -> String in
            read += 1
            return index == 0 ? "tcp://a:1" : "tcp://z:\(index)"
        }
        #expect(OriginConnection.unused(["tcp://a:1"], pending: [], awaited: [], pairs: [], knownEndpoints: known).isEmpty)
        #expect(read == 1)
    }
}

extension OriginConnectionTests {
    @Test("rule: a connection is awaited from the first wait's start to the last one's end")
    func waitsCounted() {
        var connection = OriginConnection(endpoint: "tcp://a:1", serverKey: nil)
        #expect(connection.waits == 0)
        connection.waitBegins()
        connection.waitBegins()
        connection.waitEnds()
        #expect(connection.waits == 1)
        connection.waitEnds()
        #expect(connection.waits == 0)
    }
}
