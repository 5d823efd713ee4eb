import CHandoffChecksum
import Foundation
import Handoff
import HandoffWire
import Testing
import HandoffTestSupport

/// The checksum a writer announces, between real nodes: each reader verifies the algorithm its
/// writer's open announced, whatever its own node writes.
@Suite("Stream checksums between nodes", .exclusive)
struct StreamChecksumNodeTests {
    static let payload = Array(patternBytes(10_000, seed: 9))

    static var sha256: Data {
        var context = handoff_sha256()
        handoff_sha256_init(&context)
        payload.withUnsafeBytes { handoff_sha256_update(&context, $0.baseAddress, $0.count) }
        var digest = [UInt8](repeating: 0, count: 32)
        handoff_sha256_final(&context, &digest)
        return Data(digest)
    }

    static var xxh64: Data {
        var context = handoff_xxh64()
        handoff_xxh64_init(&context)
        payload.withUnsafeBytes { handoff_xxh64_update(&context, $0.baseAddress, $0.count) }
        let value = handoff_xxh64_final(&context)
        return Data((0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * $0)) })
    }

    @Test("a node whose streams end in SHA-256 and one whose end in XXH64 stream both ways at once; each reader verifies the other's announced algorithm")
    func mixedAlgorithmsBothWays() async throws {
        try await withTwoNodes(configureA: { $0.streamChecksum = .sha256 }, configureB: { $0.streamChecksum = .xxh64 }) { a, b in
            try await expectBytesBothWays(from: a, to: b, fromOriginator: 1_500_000, fromContinuer: 700_001)
        }
    }

    @Test("the originator's answer announces the algorithm its own end will carry")
    func answerAnnounces() async throws {
        let peer = StreamPeer(sending: Data())
        var configuration = testConfiguration("originator")
        configuration.streamChecksum = .xxh64
        try await Node.withRunning(configuration) { node in
            let activity = try await currentStreamingActivity(on: node, delegate: peer)
            let fake = try FakeContinuer(endpoint: node.continuationEndpoint)
            let answer = try #require(try await fake.open(activity.id, window: 16))
            #expect(answer.checksumAlgorithm == .xxh64)
        }
    }

    @Test("a writer that announced SHA-256 (or XXH64) is verified in it: its honest end reads whole, a wrong one is streamChecksumMismatch naming the algorithm")
    func announcedAlgorithmVerified() async throws {
        let cases: [(WireChecksumAlgorithm, Data, String)] = [(.sha256, Self.sha256, "SHA-256"), (.xxh64, Self.xxh64, "XXH64")]
        for (algorithm, right, name) in cases {
            for honest in [true, false] {
                var checksum = right
                if !honest { checksum[checksum.count - 1] ^= 1 }
                let peer = StreamPeer(sending: Data())
                try await withStreamingOriginator(peer) { node, activity in
                    let fake = try FakeContinuer(endpoint: node.continuationEndpoint)
                    #expect(try await fake.open(activity.id, window: 16, checksum: algorithm) != nil)
                    try await fake.sendStream(Self.payload, claimingTotal: UInt64(Self.payload.count), algorithm: algorithm, checksum: checksum)
                    #expect(await eventually { peer.received != nil })
                    switch peer.received {
                    case .success(let bytes)?:
                        #expect(honest, "\(name): a wrong checksum must not be read as complete")
                        #expect(bytes == Data(Self.payload))
                    case .failure(let error)?:
                        #expect(!honest, "\(name): the honest stream failed: \(error)")
                        #expect(error.code == .streamChecksumMismatch && error.message.contains(name), "\(error)")
                    case nil:
                        Issue.record("\(name): nothing read")
                    }
                    #expect(await node.streamCounters.endsNotVerified == 0)
                }
            }
        }
    }

    @Test("an end in another algorithm than the one announced is held to its length only: the bytes read whole, a short one is still truncated")
    func endInAnotherAlgorithm() async throws {
        for short in [false, true] {
            let peer = StreamPeer(sending: Data())
            try await withStreamingOriginator(peer) { node, activity in
                let fake = try FakeContinuer(endpoint: node.continuationEndpoint)
                #expect(try await fake.open(activity.id, window: 16, checksum: .crc32C) != nil)
                let total = UInt64(Self.payload.count + (short ? 1 : 0))
                try await fake.sendStream(Self.payload, claimingTotal: total, algorithm: .sha256, checksum: Data(count: 32))
                #expect(await eventually { peer.received != nil })
                if short {
                    if case .failure(let error)? = peer.received { #expect(error.code == .streamTruncated) } else { Issue.record("a short stream must fail") }
                } else {
                    #expect(try peer.received?.get() == Data(Self.payload))
                }
                // Counted for operators (handoff_node_stream_ends_not_verified_total), as it is logged.
                #expect(await node.streamCounters.endsNotVerified == 1)
            }
        }
    }

    /// An originator with `requireVerifiedStreamEnds`, its streaming activity current, and a wire
    /// peer to continue it with.
    private func withOriginatorRequiringVerifiedEnds(_ body: (Node, UserActivity, StreamPeer, FakeContinuer) async throws -> Void) async throws {
        let peer = StreamPeer(sending: Data())
        var configuration = testConfiguration("originator")
        configuration.requireVerifiedStreamEnds = true
        try await Node.withRunning(configuration) { node in
            let activity = try await currentStreamingActivity(on: node, delegate: peer)
            try await body(node, activity, peer, try FakeContinuer(endpoint: node.continuationEndpoint))
        }
    }

    @Test("with requireVerifiedStreamEnds, an end in another algorithm than the one announced fails the reader's iteration with streamChecksumMismatch, and is counted")
    func endInAnotherAlgorithmRefused() async throws {
        try await withOriginatorRequiringVerifiedEnds { node, activity, peer, fake in
            #expect(try await fake.open(activity.id, window: 16, checksum: .crc32C) != nil)
            try await fake.sendStream(Self.payload, claimingTotal: UInt64(Self.payload.count), algorithm: .sha256, checksum: Data(count: 32))
            #expect(await eventually { peer.received != nil })
            if case .failure(let error)? = peer.received {
                #expect(error.code == .streamChecksumMismatch && error.message.contains("requires every stream's bytes verified"), "\(error)")
            } else {
                Issue.record("an unverifiable end must fail the stream when verified ends are required")
            }
            #expect(await node.streamCounters.endsNotVerified == 1)
        }
    }

    @Test("with requireVerifiedStreamEnds, a continuing node that announces an algorithm the originator does not know is refused as the pair opens, with streamChecksumMismatch, and the application never sees the pair")
    func unknownAlgorithmRefusedAtOpen() async throws {
        try await withOriginatorRequiringVerifiedEnds { _, activity, peer, fake in
            let answer = try await fake.openAnswer(activity.id, window: 16, checksum: .UNRECOGNIZED(9))
            guard case .error(let error)? = answer else {
                Issue.record("expected an error frame, got \(String(describing: answer))")
                return
            }
            #expect(error.code == .streamChecksumMismatch && error.message.contains("does not know"), "\(error)")
            try await Task.sleep(for: .milliseconds(100))
            #expect(peer.received == nil, "the application was handed a refused pair")
        }
    }

    @Test("a `handoff agent --stream-checksum sha256` process announces SHA-256 and ends its contacts list's stream with the SHA-256 of the bytes it sent")
    func agentProcessWritesSHA256() async throws {
        try await withAgentSharingContacts("checksum-agent", arguments: ["--log-level", "error", "--stream-checksum", "sha256"]) { activity, _ in
            let peer = try WirePeer(connectingTo: activity.continueEndpoint)
            try peer.openStream(1, activityID: activity.id, window: 16, direction: .originToContinuer, as: "reader")
            var answer: WireStreamOpen?, end: WireStreamEnd?
            var bytes = Data()
            let started = ContinuousClock.now
            while end == nil, ContinuousClock.now - started < .seconds(10) {
                guard let (envelope, payload) = try await peer.receiveWithPayload(within: .milliseconds(500)),
                      case .streamFrame(let frame) = envelope.body else { continue }
                switch frame.kind {
                case .open(let open)?: answer = open
                case .data(let data)?: bytes += payload ?? data.payload
                case .end(let last)?: end = last
                case .error(let error)?: Issue.record("the agent refused: \(error)"); return
                default: break
                }
            }
            #expect(answer?.checksumAlgorithm == .sha256)
            let ended = try #require(end, "no end arrived")
            #expect(ended.totalLength == UInt64(bytes.count) && !bytes.isEmpty)
            var context = handoff_sha256()
            handoff_sha256_init(&context)
            bytes.withUnsafeBytes { handoff_sha256_update(&context, $0.baseAddress, $0.count) }
            var digest = [UInt8](repeating: 0, count: 32)
            handoff_sha256_final(&context, &digest)
            #expect(ended.checksumAlgorithm == .sha256 && ended.checksum == Data(digest))
        }
    }
}
