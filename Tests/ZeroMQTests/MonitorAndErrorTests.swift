import Foundation
import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("Socket monitor", .exclusive)
struct MonitorTests {
    // Each wait below returns as its event comes (within milliseconds when the machine is free);
    // the bounds are for a machine that is not: as a parallel pass begins, hundreds of tests share
    // two pool threads, and a 5 s bound once ran out in CI with the event on its way.
    @Test("a monitor reports listening, accepted and handshake events, and disconnection")
    func monitorEvents() async throws {
        let context = try Context()
        let server = try context.socket(.router)
        let monitor = try server.monitor([.listening, .accepted, .handshakeSucceeded, .disconnected])
        try server.bind("tcp://127.0.0.1:*")
        let endpoint = try server.lastEndpoint

        let listening = try await monitor.next(matching: .listening, timeout: .seconds(20))
        #expect(listening?.endpoint == endpoint)

        let client = try context.socket(.dealer)
        try client.connect(endpoint)
        let accepted = try await monitor.next(matching: .accepted, timeout: .seconds(20))
        #expect(accepted != nil)
        #expect((accepted?.value ?? 0) > 0)  // the accepted connection's file descriptor
        #expect(try await monitor.next(matching: .handshakeSucceeded, timeout: .seconds(20)) != nil)

        // A zero timeout looks without waiting: nothing yet, then the disconnection once it is there.
        #expect(try await monitor.next(matching: .disconnected, timeout: .zero) == nil)
        client.close()
        let closed = ContinuousClock.now + .seconds(20)
        var disconnected: MonitorEvent?
        while disconnected == nil, ContinuousClock.now < closed {
            disconnected = try await monitor.next(matching: .disconnected, timeout: .zero)
            if disconnected == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(disconnected != nil)
        monitor.stop()
        server.close()
    }

    @Test("a client monitor sees connect retries while nobody listens")
    func connectRetried() async throws {
        let context = try Context()
        // Find a free port, then leave it unbound.
        let probe = try context.socket(.rep)
        try probe.bind("tcp://127.0.0.1:*")
        let endpoint = try probe.lastEndpoint
        try probe.unbind(endpoint)
        probe.close()

        let client = try context.socket(.dealer)
        try client.set(.reconnectInterval, 20)
        let monitor = try client.monitor(.connectRetried)
        try client.connect(endpoint)
        let retried = try await monitor.next(matching: .connectRetried, timeout: .seconds(20))
        #expect(retried?.endpoint == endpoint)
    }
}

@Suite("Errors", .exclusive)
struct ErrorTests {
    @Test("malformed and unsupported endpoints are refused with typed errors")
    func badEndpoints() throws {
        let context = try Context()
        let socket = try context.socket(.pub)
        let cases: [(String, ZMQError.Code)] = [
            ("not-an-endpoint", .invalidArgument),
            ("bogus://127.0.0.1:1", .protocolNotSupported),
            ("tcp://127.0.0.1:notaport", .invalidArgument),
            ("tcp://203.0.113.1:5555", .addressNotAvailable),
        ]
        for (endpoint, code) in cases {
            do {
                try socket.bind(endpoint)
                Issue.record("bind(\(endpoint)) should fail")
            } catch {
                #expect(error.code == code, "bind(\(endpoint))")
                #expect(error.description.contains(endpoint))
                #expect(!error.message.isEmpty)
            }
        }
        do {
            try socket.disconnect("tcp://127.0.0.1:1")
            Issue.record("disconnecting from a never-connected endpoint should fail")
        } catch {
            #expect(error.code == .noSuchEndpoint)
        }
    }

    @Test("a port in use is reported as such, and the socket goes on working")
    func addressInUse() throws {
        let context = try Context()
        let first = try context.socket(.rep)
        try first.bind("tcp://127.0.0.1:*")
        let endpoint = try first.lastEndpoint
        let second = try context.socket(.rep)
        do {
            try second.bind(endpoint)
            Issue.record("binding a port in use should fail")
        } catch {
            #expect(error.code == .addressInUse)
        }
        try second.bind("tcp://127.0.0.1:*")
        #expect(try second.lastEndpoint != endpoint)
    }

    @Test("every call on a closed socket fails with notASocket, and a pending async receive wakes")
    func closedSocket() async throws {
        let context = try Context()
        let socket = try context.socket(.pull)
        try socket.bind("inproc://closed-\(UUID().uuidString)")
        socket.close()
        socket.close()  // harmless
        #expect(socket.isClosed)
        #expect(throws: ZMQError(.notASocket, operation: "zmq_msg_recv(PULL)")) { try socket.tryReceive() }
        #expect(throws: ZMQError.self) { try socket.send(Array("x".utf8)) }
        #expect(throws: ZMQError.self) { try socket.connect("inproc://x") }
        #expect(throws: ZMQError.self) { try socket.set(.linger, 0) }
        #expect(throws: ZMQError.self) { try socket.get(.linger) }
        do {
            _ = try socket.get(.linger)
        } catch {
            #expect(error.code == .notASocket)
        }

        // A task waiting on a socket that its owner closes is woken with the same error.
        let owner = SocketOwner(try context.socket(.pull))
        try await owner.bindAndWaitThenClose()
    }

    @Test("a socket option of the wrong kind for the socket is refused")
    func badOption() throws {
        let context = try Context()
        let pub = try context.socket(.pub)
        do {
            try pub.set(.subscribe, Array("x".utf8))
            Issue.record("PUB sockets cannot subscribe")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.operation.contains("ZMQ_SUBSCRIBE"))
        }
        do {
            try pub.set(.routingID, [])
            Issue.record("an empty routing id is invalid")
        } catch {
            #expect(error.code == .invalidArgument)
        }
    }

    @Test("shutting the context down ends blocking calls with contextTerminated")
    func contextShutdown() throws {
        let context = try Context()
        let socket = try context.socket(.pull)
        try socket.bind("inproc://shutdown-\(UUID().uuidString)")
        context.shutdown()
        do {
            _ = try socket.receive()
            Issue.record("receive after shutdown should fail")
        } catch {
            #expect(error.code == .contextTerminated)
        }
        #expect(throws: ZMQError.self) { try context.socket(.push) }
    }
}

/// An actor that owns a socket, closes it while its own receive is suspended.
actor SocketOwner {
    let socket: Socket
    init(_ socket: Socket) { self.socket = socket }

    func bindAndWaitThenClose() async throws {
        try socket.bind("inproc://owner-\(UUID().uuidString)")
        async let outcome: Void = receiveOnce()
        try await Task.sleep(for: .milliseconds(50))
        socket.close()
        do {
            try await outcome
            Issue.record("the pending receive should fail when the socket closes")
        } catch let error as ZMQError {
            #expect(error.code == .notASocket)
        }
    }

    private func receiveOnce() async throws {
        _ = try await socket.receive()
    }
}

@Suite("Socket monitor: who failed a handshake", .exclusive)
struct MonitorPeerTests {
    @Test("a bound socket's monitor names the peer of a failed handshake, which libzmq's event does not; accepted and disconnected stay unreported unless asked for")
    func peerOfFailedHandshake() async throws {
        try #require(ZeroMQLibrary.has("curve"))
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let server = try context.socket(.router)
        try server.makeCurveServer(serverKeys, zapDomain: "peers")
        let watched: MonitorEvents = [.handshakeFailedProtocol, .handshakeFailedNoDetail]
        let monitor = try server.monitor(watched)
        defer { monitor.stop() }
        try server.bind("tcp://127.0.0.1:*")
        let endpoint = try server.lastEndpoint

        // A peer that speaks ZMTP by hand, so that the test decides when its handshake fails:
        // only after the monitor has read its `accepted` event (inside `next`, which does not
        // deliver it) and asked the kernel who it is. A libzmq peer fails within a millisecond of
        // connecting; on a loaded machine the monitor then reads `accepted`, the failure and the
        // disconnection together, when the descriptor may already be another's, and rightly names
        // no one (CI saw 33 failures in a row so, over 5 s).
        var named: MonitorEvent?
        var seen: [MonitorEvent] = []
        for _ in 0..<5 where named == nil {
            let fd = try connectRawTCP(to: endpoint)
            defer { close(fd) }
            while let event = try await monitor.next(timeout: .milliseconds(300)) { seen.append(event) }
            try sendRaw(zmtpGreeting(mechanism: "NULL"), on: fd)
            if let event = try await monitor.next(timeout: .seconds(5)) {
                seen.append(event)
                if event.peerAddress != nil { named = event }
            }
        }
        #expect(named?.peerAddress == "127.0.0.1", "\(seen)")
        #expect(named?.endpoint == endpoint, "the event still names the server's own endpoint")
        #expect(named?.kind == .handshakeFailedProtocol && named?.value == 0x1100_0002, "ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH: \(seen)")
        #expect(seen.allSatisfy { watched.contains($0.kind) }, "\(seen)")
    }
}
