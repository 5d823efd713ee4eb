import Foundation
import Glibc
import Handoff
import HandoffWire
import Testing
import ZeroMQ
import HandoffTestSupport

/// A peer speaking the wire contract by hand, with identifiers far over its limits.
@Suite("The contract's limits, against a peer that ignores them")
struct WireLimitsTests {
    /// Sends `body` to `endpoint` from a peer of its own and returns the reply's envelope and its size.
    func exchange(_ body: WireEnvelope.OneOf_Body, with endpoint: String) async throws -> (WireEnvelope, Int)? {
        let peer = try WirePeer(connectingTo: endpoint)
        try peer.send(body, correlationID: 7)
        return try await peer.receive(within: .seconds(5))
    }

    @Test("four peers declaring a 1 GiB CURVE handshake are hung up on at once, at the broker and at a node")
    func hugeHandshakes() async throws {
        let keys = try TestAccount()
        let broker = try secureBroker(keys)
        try await withNodes([nodeOnBroker("node-a", broker: broker, security: keys.security(keys.a))]) { nodes in
            for endpoint in [broker.frontendEndpoint, broker.backendEndpoint, nodes[0].continuationEndpoint] {
                for _ in 0..<4 {
                    let taken = try declareHugeHandshake(to: endpoint)
                    print("1 GiB declared handshake at \(endpoint): hung up after \(taken.map(String.init) ?? "never") bytes")
                    // What the kernel's buffers take before the server reads the header and hangs up.
                    #expect(taken != nil && taken! < 16 << 20, "\(endpoint): \(taken.map { "\($0) bytes taken" } ?? "never hung up")")
                }
            }
        }
        await broker.stop()
    }

    @Test("malformed continuation input is counted: too many frames, not an envelope, the wrong body; the node goes on")
    func malformedContinuationInput() async throws {
        try await Node.withRunning(testConfiguration("malformed")) { node in
            // This test and NodeUnfinishedMessageTests' continuation case failed together, once in
            // five CI runs, in the parallel pass's first ten seconds (each node silent for 5 s and
            // more), and never alone. The probe says how far behind the loops and the pool were
            // then: a reply is allowed that much longer, once, and a failure says it.
            let probe = StallProbe.start(alsoOn: EventLoops.shared)
            defer { _ = probe.stop() }
            let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
            try await activity.becomeCurrent(on: node)
            let peer = try WirePeer(connectingTo: node.continuationEndpoint)
            try peer.send(frames: (0..<10_000).map { _ in [UInt8](repeating: 0x41, count: 100) })
            try peer.send(frames: [[0xFF, 0xFF, 0xFF]])
            try peer.send(.advertisement(WireAdvertisement()), correlationID: 3)
            // Refused with an error reply each, the two that had an envelope place to answer.
            for index in 0..<2 {
                var reply = try await peer.receive(within: .seconds(5))
                if reply == nil { reply = try await peer.receive(within: probe.heldSoFar) }
                #expect(reply != nil, "no error reply \(index + 1) within 5 s and the \(probe.heldSoFar) the loops and the pool were held meanwhile")
            }
            #expect(await node.securityCounters.malformedContinuation == 3)
            // And a well-formed request is still answered.
            var request = WireContinueRequest()
            request.activityID = activity.id
            request.activityType = activity.activityType
            try peer.send(.continueRequest(request), correlationID: 9)
            let reply = try #require(try await peer.receive(within: .seconds(5)))
            guard case .continueReply(let answer) = reply.envelope.body, case .activity = answer.result else {
                Issue.record("expected the activity, got \(reply.envelope.body as Any)")
                return
            }
        }
    }

    @Test("a continue request or a stream open naming a 1 MiB activity id is malformed, and the answer does not repeat it")
    func oversizedIdentifiers() async throws {
        try await Node.withRunning(testConfiguration("limits")) { node in
            let huge = String(repeating: "x", count: 1 << 20)
            var request = WireContinueRequest()
            request.activityID = huge
            request.activityType = "org.handoff.contacts.edit-contact"
            let (reply, size) = try #require(try await exchange(.continueRequest(request), with: node.continuationEndpoint))
            guard case .continueReply(let answer) = reply.body, case .error(let error) = answer.result else {
                Issue.record("expected an error reply, got \(reply.body as Any)")
                return
            }
            #expect(error.code == .malformedMessage)
            #expect(size < 1024, "the reply is \(size) bytes")

            var open = WireStreamOpen()
            open.activityID = huge
            open.window = 4
            var frame = WireStreamFrame()
            frame.streamID = 1
            frame.kind = .open(open)
            let (refusal, refusalSize) = try #require(try await exchange(.streamFrame(frame), with: node.continuationEndpoint))
            guard case .streamFrame(let answered) = refusal.body, case .error(let streamError)? = answered.kind else {
                Issue.record("expected a stream error, got \(refusal.body as Any)")
                return
            }
            #expect(streamError.code == .malformedMessage)
            #expect(refusalSize < 1024, "the refusal is \(refusalSize) bytes")

            // The node goes on answering: an ordinary unknown id gets its ordinary error.
            request.activityID = "no-such-activity"
            let (ordinary, _) = try #require(try await exchange(.continueRequest(request), with: node.continuationEndpoint))
            guard case .continueReply(let plain) = ordinary.body, case .error(let notFound) = plain.result else {
                Issue.record("expected an error reply, got \(ordinary.body as Any)")
                return
            }
            #expect(notFound.code == .activityNotFound)
        }
    }
}

/// A peer that speaks just enough ZMTP 3.0 by hand to declare a CURVE HELLO of 1 GiB, then keeps
/// sending. Returns how many bytes of it the server took before it hung up (nil: it never did).
func declareHugeHandshake(to endpoint: String, within timeout: Duration = .seconds(5)) throws -> Int? {
    let fd = try connectRawTCP(to: endpoint)
    defer { close(fd) }
    var timeoutValue = timeval(tv_sec: 1, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeoutValue, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeoutValue, socklen_t(MemoryLayout<timeval>.size))
    let greeting = zmtpGreeting(mechanism: "CURVE")
    guard send(fd, greeting, greeting.count, Int32(MSG_NOSIGNAL)) == greeting.count else { return 0 }
    var theirs = [UInt8](repeating: 0, count: 64)
    guard recv(fd, &theirs, 64, Int32(MSG_WAITALL)) == 64, theirs[0] == 0xFF, theirs[10] == 3 else {
        throw ProcessFailure("\(endpoint) sent no ZMTP 3 greeting")
    }
    // A command frame (flags: command, long) declaring 2^30 bytes, then its "body", a MiB at a time.
    var header: [UInt8] = [0x06]
    header += withUnsafeBytes(of: UInt64(1 << 30).bigEndian, Array.init)
    guard send(fd, header, header.count, Int32(MSG_NOSIGNAL)) == header.count else { return 0 }
    let chunk = [UInt8](repeating: 0x41, count: 1 << 20)
    var sent = 0
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        let written = send(fd, chunk, chunk.count, Int32(MSG_NOSIGNAL))
        if written < 0 {
            if errno == EAGAIN || errno == EWOULDBLOCK { continue }  // the server is not reading: wait
            return sent  // EPIPE, ECONNRESET: hung up
        }
        sent += written
    }
    return nil
}
