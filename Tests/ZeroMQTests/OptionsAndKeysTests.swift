import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("Options and CURVE keys", .exclusive)
struct OptionsAndKeysTests {
    @Test("options read back what was set")
    func optionsRoundTrip() throws {
        let context = try Context()
        let socket = try context.socket(.dealer)
        try socket.set(.sendHighWaterMark, 1234)
        try socket.set(.receiveHighWaterMark, 4321)
        try socket.set(.linger, 250)
        try socket.set(.maxMessageSize, 1 << 20)
        try socket.set(.heartbeatInterval, 500)
        try socket.set(.heartbeatTimeout, 1500)
        try socket.set(.immediate, true)
        #expect(try socket.get(.sendHighWaterMark) == 1234)
        #expect(try socket.get(.receiveHighWaterMark) == 4321)
        #expect(try socket.get(.linger) == 250)
        #expect(try socket.get(.maxMessageSize) == 1 << 20)
        #expect(try socket.get(.heartbeatInterval) == 500)
        #expect(try socket.get(.heartbeatTimeout) == 1500)
        #expect(try socket.get(.immediate) == true)
        #expect(try socket.get(.type) == SocketType.dealer.rawValue)
        #expect(try socket.get(.mechanism) == 0)  // NULL until CURVE is configured
    }

    @Test("CURVE key pairs: generated, Z85 round trip, public derived from secret")
    func curveKeys() throws {
        try #require(ZeroMQLibrary.has("curve"))
        let pair = try CurveKeyPair.generate()
        #expect(pair.publicKey != pair.secretKey)
        #expect(pair.publicKey.z85.count == 40)
        #expect(try CurveKey(z85: pair.publicKey.z85) == pair.publicKey)
        #expect(try CurveKeyPair(secretKey: pair.secretKey).publicKey == pair.publicKey)
        #expect(try CurveKeyPair.generate() != pair)
        #expect(throws: ZMQError.self) { try CurveKey(z85: "too short") }
        #expect(throws: ZMQError.self) { try CurveKey(bytes: [1, 2, 3]) }

        let context = try Context()
        let server = try context.socket(.router)
        try server.set(.curveServer, true)
        try server.set(.curveSecretKey, pair.secretKey.z85)
        #expect(try server.get(.mechanism) == 2)  // CURVE
        #expect(try server.get(.curveSecretKey) == pair.secretKey.z85)
    }

    @Test("a CURVE client with the server's key talks; traffic is encrypted end to end")
    func curveHandshake() async throws {
        let context = try Context()
        let serverKeys = try CurveKeyPair.generate()
        let clientKeys = try CurveKeyPair.generate()
        let server = try context.socket(.rep)
        try server.set(.curveServer, true)
        try server.set(.curveSecretKey, serverKeys.secretKey.z85)
        try server.bind("tcp://127.0.0.1:*")
        let client = try context.socket(.req)
        try client.set(.curveServerKey, serverKeys.publicKey.z85)
        try client.set(.curvePublicKey, clientKeys.publicKey.z85)
        try client.set(.curveSecretKey, clientKeys.secretKey.z85)
        try client.connect(try server.lastEndpoint)

        try await client.send(Array("secret hello".utf8))
        let request = try await server.receive(timeout: .seconds(5))
        #expect(request?.string == "secret hello")
        #expect(request?.property("Socket-Type") == "REQ")
    }

    @Test("library facts")
    func library() {
        let version = ZeroMQLibrary.version
        #expect(version.major == 4 && version.minor >= 3)
        #expect(!ZeroMQLibrary.has("no-such-capability"))
    }
}
