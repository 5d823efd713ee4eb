import CHandoffChecksum
import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

/// A continuing node driven by hand over a raw DEALER, to send what a well-behaved node never would.
actor FakeContinuer {
    let context: Context
    let socket: Socket
    var sequence: UInt64 = 0

    init(endpoint: String) throws {
        context = try Context()
        socket = try context.socket(.dealer)
        try socket.connect(endpoint)
    }

    func send(_ kind: WireStreamFrame.OneOf_Kind, stream: UInt64 = 1, payload: [UInt8]? = nil) async throws {
        var frame = WireStreamFrame()
        frame.streamID = stream
        frame.kind = kind
        sequence += 1
        var sender = WireNodeRef()
        sender.nodeID = "fake"
        sender.name = "fake-continuer"
        let bytes: [UInt8] = try WireEnvelope(body: .streamFrame(frame), sender: sender, sequence: sequence).serializedBytes()
        try await socket.send(bytes, more: payload != nil)
        if let payload { try await socket.send(payload) }
    }

    /// Opens stream 1 for `activityID`, granting `window` chunks and announcing the checksum its end
    /// will carry (`checksum`), and waits for the originator's open.
    func open(_ activityID: String, window: UInt32, checksum: WireChecksumAlgorithm = .unspecified) async throws -> WireStreamOpen? {
        guard case .open(let answer)? = try await openAnswer(activityID, window: window, checksum: checksum) else { return nil }
        return answer
    }

    /// The same, returning the originator's answer whatever it is (its open, or an error).
    func openAnswer(_ activityID: String, window: UInt32, checksum: WireChecksumAlgorithm = .unspecified) async throws -> WireStreamFrame.OneOf_Kind? {
        var open = WireStreamOpen()
        open.activityID = activityID
        open.window = window
        open.chunkSize = 65536
        open.checksumAlgorithm = checksum
        try await send(.open(open))
        while let frame = try await socket.receive(timeout: .seconds(5)) {
            if case .streamFrame(let stream) = try WireEnvelope.decode(frame.data).body, let kind = stream.kind {
                switch kind {
                case .open, .error: return kind
                default: continue
                }
            }
        }
        return nil
    }

    /// Sends `bytes` as one data chunk (payload out of band), then an end claiming `total` and `checksum`.
    func sendStream(_ bytes: [UInt8], claimingTotal total: UInt64, checksum: UInt32) async throws {
        let big = Data([UInt8(checksum >> 24), UInt8(checksum >> 16 & 0xFF), UInt8(checksum >> 8 & 0xFF), UInt8(checksum & 0xFF)])
        try await sendStream(bytes, claimingTotal: total, algorithm: .crc32C, checksum: big)
    }

    /// The same, with an end carrying `checksum` of `algorithm`.
    func sendStream(_ bytes: [UInt8], claimingTotal total: UInt64, algorithm: WireChecksumAlgorithm, checksum: Data) async throws {
        var data = WireStreamData()
        data.offset = 0
        data.length = UInt32(bytes.count)
        try await send(.data(data), payload: bytes)
        var end = WireStreamEnd()
        end.totalLength = total
        end.checksumAlgorithm = algorithm
        end.checksum = checksum
        try await send(.end(end))
    }
}

/// Runs a node with a current streaming activity whose delegate is `peer`.
func withStreamingOriginator(
    _ peer: StreamPeer, idleTimeout: Duration = .seconds(5), resumeWindow: Duration = .seconds(30),
    _ body: (Node, UserActivity) async throws -> Void
) async throws {
    var configuration = testConfiguration("originator")
    configuration.streamIdleTimeout = idleTimeout
    configuration.streamResumeWindow = resumeWindow
    try await Node.withRunning(configuration) { node in
        let activity = try await currentStreamingActivity(on: node, delegate: peer)
        try await body(node, activity)
    }
}

@Suite("Stream integrity and liveness", .exclusive)
struct StreamIntegrityTests {
    static let payload = Array(patternBytes(10_000, seed: 9))
    static var payloadCRC: UInt32 { payload.withUnsafeBytes { handoff_crc32c(0, $0.baseAddress, $0.count) } }

    @Test("a stream whose bytes do not match the writer's checksum is an error, not a complete stream")
    func corrupted() async throws {
        let peer = StreamPeer(sending: Data())
        try await withStreamingOriginator(peer) { node, activity in
            let fake = try FakeContinuer(endpoint: node.continuationEndpoint)
            #expect(try await fake.open(activity.id, window: 16) != nil)
            try await fake.sendStream(Self.payload, claimingTotal: UInt64(Self.payload.count), checksum: Self.payloadCRC ^ 1)
            #expect(await eventually { peer.received != nil })
            guard case .failure(let error)? = peer.received else {
                Issue.record("a corrupted stream must not be read as complete: \(String(describing: peer.received))")
                return
            }
            #expect(error.code == .streamChecksumMismatch)
        }
    }

    @Test("a stream shorter than its writer says is truncated, not complete")
    func truncated() async throws {
        let peer = StreamPeer(sending: Data())
        try await withStreamingOriginator(peer) { node, activity in
            let fake = try FakeContinuer(endpoint: node.continuationEndpoint)
            #expect(try await fake.open(activity.id, window: 16) != nil)
            try await fake.sendStream(Self.payload, claimingTotal: UInt64(Self.payload.count + 4096), checksum: Self.payloadCRC)
            #expect(await eventually { peer.received != nil })
            guard case .failure(let error)? = peer.received else {
                Issue.record("a truncated stream must not be read as complete")
                return
            }
            #expect(error.code == .streamTruncated)
            #expect(error.message.contains("\(Self.payload.count + 4096)"))
        }
    }

    @Test("the honest version of the same stream is read whole")
    func honest() async throws {
        let peer = StreamPeer(sending: Data())
        try await withStreamingOriginator(peer) { node, activity in
            let fake = try FakeContinuer(endpoint: node.continuationEndpoint)
            #expect(try await fake.open(activity.id, window: 16) != nil)
            try await fake.sendStream(Self.payload, claimingTotal: UInt64(Self.payload.count), checksum: Self.payloadCRC)
            #expect(await eventually { peer.received != nil })
            #expect(byteDifference(try peer.received?.get() ?? Data(), Data(Self.payload)) == nil)
        }
    }

    @Test("a peer that goes silent is interrupted after the idle timeout and lost after the resume window: both directions fail with peerLost")
    func silentPeer() async throws {
        let peer = StreamPeer(sending: patternBytes(2_000_000, seed: 8))
        try await withStreamingOriginator(peer, idleTimeout: .milliseconds(400), resumeWindow: .milliseconds(400)) { node, activity in
            let fake = try FakeContinuer(endpoint: node.continuationEndpoint)
            let probe = StallProbe.start(alsoOn: EventLoops.shared), opened = ContinuousClock.now
            #expect(try await fake.open(activity.id, window: 1) != nil)
            // The fake never grants more credit and never sends a keep-alive: as if its process froze.
            #expect(await eventually(within: .seconds(3), allowingFor: probe) { peer.writeError != nil && peer.received != nil })
            let detected = ContinuousClock.now - opened, held = probe.stop()
            #expect(peer.writeError?.code == .peerLost)
            if case .failure(let error)? = peer.received { #expect(error.code == .peerLost) } else { Issue.record("the read must fail too") }
            #expect(detected >= .milliseconds(750) && detected < .seconds(3) + held, "\(detected), the loops held back \(held)")
            #expect(await node.streamCounters.lost == 1)
        }
    }
}
