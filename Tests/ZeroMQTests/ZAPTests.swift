import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("ZAP handler", .exclusive)
struct ZAPTests {
    /// A CURVE REP server under `domain`, its policy allowing `allowed` only.
    private func server(
        _ context: Context, keys: CurveKeyPair, domain: String, allowed: Set<CurveKey>
    ) throws -> (Socket, ZAPHandler) {
        let zap = try ZAPHandler.shared(for: context)
        zap.setPolicy(forDomain: domain) { request in
            guard let key = request.publicKey, allowed.contains(key) else { return .deny("not allowed") }
            return .allow(userID: "user-\(key.z85.prefix(4))")
        }
        let socket = try context.socket(.rep)
        try socket.makeCurveServer(keys, zapDomain: domain)
        try socket.bind("tcp://127.0.0.1:*")
        return (socket, zap)
    }

    @Test("an allowed key talks, its User-Id on every frame; an unknown key is refused at the handshake and counted")
    func allowList() async throws {
        try #require(ZeroMQLibrary.has("curve"))
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let friend = try CurveKeyPair.generate()
        let stranger = try CurveKeyPair.generate()
        let (server, zap) = try server(context, keys: serverKeys, domain: "test", allowed: [friend.publicKey])
        #expect(try ZAPHandler.shared(for: context) === zap)  // one per context

        let good = try context.socket(.req)
        try good.makeCurveClient(friend, serverKey: serverKeys.publicKey)
        try good.connect(try server.lastEndpoint)
        try await good.send(Array("hello".utf8))
        let request = try await server.receive()
        #expect(request.string == "hello")
        #expect(request.property("User-Id") == "user-\(friend.publicKey.z85.prefix(4))")
        try await server.send(Array("welcome".utf8))
        #expect(try await good.receive().string == "welcome")

        // Another context, as another process would have: it has no say in the server's decisions.
        let otherContext = try Context()
        let bad = try otherContext.socket(.req)
        try bad.makeCurveClient(stranger, serverKey: serverKeys.publicKey)
        let monitor = try bad.monitor([.handshakeFailedAuth, .handshakeSucceeded])
        defer { monitor.stop() }
        try bad.connect(try server.lastEndpoint)
        let event = try await monitor.next(timeout: .seconds(5))
        #expect(event?.kind == .handshakeFailedAuth)
        // Queued while the refused connection's pipe lasts, refused once libzmq has dropped it (a
        // REQ with no pipe would block); delivered in neither case.
        _ = try bad.trySend(Array("let me in".utf8))
        #expect(try await server.receive(timeout: .milliseconds(300)) == nil)
        let counters = zap.counters(forDomain: "test")
        #expect(counters.allowed == 1)
        #expect(counters.refused >= 1)
        bad.close()
    }

    @Test("a domain without a policy is refused; removing a policy closes the door")
    func unknownDomain() async throws {
        try #require(ZeroMQLibrary.has("curve"))
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let friend = try CurveKeyPair.generate()
        let (server, zap) = try server(context, keys: serverKeys, domain: "open", allowed: [friend.publicKey])
        zap.removePolicy(forDomain: "open")
        let client = try context.socket(.req)
        try client.makeCurveClient(friend, serverKey: serverKeys.publicKey)
        let monitor = try client.monitor(.handshakeFailedAuth)
        defer { monitor.stop() }
        try client.connect(try server.lastEndpoint)
        #expect(try await monitor.next(timeout: .seconds(5))?.kind == .handshakeFailedAuth)
        #expect(zap.counters.refused >= 1)
        client.close()
    }

    @Test("the handler stops with its last user, and a new one can start in the same context")
    func lifetime() throws {
        let context = try Context()
        var zap: ZAPHandler? = try ZAPHandler.shared(for: context)
        zap = nil
        zap = try ZAPHandler.shared(for: context)  // binds inproc://zeromq.zap.01 again
        #expect(zap != nil)
    }
}
