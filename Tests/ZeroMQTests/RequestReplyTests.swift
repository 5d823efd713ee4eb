import Foundation
import Testing
import ZeroMQ
import HandoffTestSupport

@Suite("REQ/REP and ROUTER/DEALER", .exclusive)
struct RequestReplyTests {
    @Test("REQ/REP round trip, and REQ refuses to send twice in a row", arguments: Transport.allCases)
    func requestReply(transport: Transport) async throws {
        let context = try Context()
        let server = try context.socket(.rep)
        let client = try context.socket(.req)
        try client.set(.receiveTimeout, 5000)
        try server.set(.receiveTimeout, 5000)
        try client.connect(try transport.bind(server))

        try await client.send(Array("continue com.example.edit-contact".utf8))
        let request = try await server.receive()
        #expect(request.string == "continue com.example.edit-contact")
        try await server.send(Array("ok".utf8))
        #expect(try await client.receive().string == "ok")

        try await client.send(Array("first".utf8))
        #expect(throws: ZMQError.self) { try client.send(Array("second".utf8)) }
        do {
            try await client.send(Array("second".utf8))
            Issue.record("a REQ socket must not send twice without a reply between")
        } catch let error as ZMQError {
            #expect(error.code == .invalidState)
        }
    }

    @Test("ROUTER sees each DEALER's routing id and replies to the right one", arguments: Transport.allCases)
    func routerDealerIdentities(transport: Transport) async throws {
        let context = try Context()
        let router = try context.socket(.router)
        try router.set(.routerMandatory, true)
        let endpoint = try transport.bind(router)

        var dealers: [Socket] = []
        for name in ["node-a", "node-b", "node-c"] {
            let dealer = try context.socket(.dealer)
            try dealer.set(.routingID, Array(name.utf8))
            #expect(try dealer.get(.routingID) == Array(name.utf8))
            try dealer.connect(endpoint)
            try await dealer.send(Array("hello from \(name)".utf8))
            dealers.append(dealer)
        }

        var seen: [String: String] = [:]
        for _ in 0..<3 {
            let frames = try await router.receiveMultipart()
            #expect(frames.count == 2)
            seen[frames[0].string ?? ""] = frames[1].string
        }
        #expect(seen == ["node-a": "hello from node-a", "node-b": "hello from node-b", "node-c": "hello from node-c"])

        // Address replies by routing id; each dealer gets only its own.
        for name in ["node-c", "node-a", "node-b"] {
            try await router.send(multipart: [Array(name.utf8), Array("reply to \(name)".utf8)])
        }
        for (dealer, name) in zip(dealers, ["node-a", "node-b", "node-c"]) {
            let reply = try await dealer.receive(timeout: .seconds(5))
            #expect(reply?.string == "reply to \(name)")
            #expect(reply?.hasMore == false)
        }

        // With ROUTER_MANDATORY an unknown peer is an error, not a silent drop.
        do {
            try await router.send(Array("nobody".utf8), more: true)
            Issue.record("sending to an unknown routing id should fail")
        } catch let error as ZMQError {
            #expect(error.code == .hostUnreachable)
        }
    }

    @Test("multipart messages arrive whole, empty frames and large frames included", arguments: Transport.allCases)
    func multipart(transport: Transport) async throws {
        let context = try Context()
        let pull = try context.socket(.pull)
        let push = try context.socket(.push)
        try push.connect(try transport.bind(pull))

        let large = [UInt8]((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let parts: [Frame] = [Frame("header"), Frame(), Frame(large), Frame("trailer")]
        try await push.send(multipart: parts)
        // Sending does not consume a Frame: the same frames go out again.
        try await push.send(multipart: parts)

        for _ in 0..<2 {
            let frames = try await pull.receiveMultipart()
            #expect(frames.count == 4)
            #expect(frames.map(\.hasMore) == [true, true, true, false])
            #expect(frames[0].string == "header")
            #expect(frames[1].count == 0)
            #expect(frames[2].bytes == large)
            #expect(frames[3].string == "trailer")
        }
    }

    @Test("zero-copy frames are released once libzmq is done with them")
    func zeroCopyRelease() async throws {
        let context = try Context()
        let pull = try context.socket(.pull)
        let push = try context.socket(.push)
        let endpoint = "inproc://zero-copy-\(UUID().uuidString)"
        try pull.bind(endpoint)
        try push.connect(endpoint)

        let released = ReleaseFlag()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        buffer.initializeMemory(as: UInt8.self, repeating: 0x5A)
        do {
            let message = Frame(bytesNoCopy: buffer) { bytes in
                bytes.deallocate()
                released.set()
            }
            try await push.send(message)
        }
        let received = try await pull.receive(timeout: .seconds(5))
        #expect(received?.bytes == [UInt8](repeating: 0x5A, count: 4096))
        #expect(!released.isSet)  // the receiver still holds the shared buffer
        _ = consume received
        #expect(released.isSet)
    }

    @Test("a frame written in place has exactly the bytes written")
    func writtenInPlace() throws {
        let message = Frame(count: 8) { buffer in
            for index in 0..<8 { buffer[index] = UInt8(index * 3) }
        }
        #expect(message.bytes == [0, 3, 6, 9, 12, 15, 18, 21])
        #expect(Frame("héllo").string == "héllo")
        #expect(Frame([0xFF, 0xFE] as [UInt8]).string == nil)
    }
}

final class ReleaseFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
