import Foundation
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// A continuing peer that speaks the wire contract by hand over a DEALER, as a third party or a
/// hostile member would: it claims whatever node id it likes. For tests.
final class WirePeer {
    private let context: Context
    private let dealer: Socket
    private var sequence: UInt64 = 0

    init(connectingTo endpoint: String) throws {
        context = try Context()
        dealer = try context.socket(.dealer)
        try dealer.connect(endpoint)
    }

    deinit { dealer.close() }

    /// Sends one envelope claiming to come from `nodeID`, with `payload` as a second frame.
    func send(_ body: WireEnvelope.OneOf_Body, as nodeID: String = "hostile", correlationID: UInt64 = 0, traceID: String = "", payload: [UInt8]? = nil) throws {
        var sender = WireNodeRef()
        sender.nodeID = nodeID
        sequence += 1
        var envelope = WireEnvelope(body: body, sender: sender, sequence: sequence, correlationID: correlationID)
        envelope.traceID = traceID
        let bytes: [UInt8] = try envelope.serializedBytes()
        try dealer.send(bytes, more: payload != nil)
        if let payload { try dealer.send(payload) }
    }

    /// Sends raw frames as one message, well-formed or not.
    func send(frames: [[UInt8]]) throws {
        for (index, frame) in frames.enumerated() { try dealer.send(frame, more: index < frames.count - 1) }
    }

    /// Sends one stream frame of pair `streamID`.
    func send(stream streamID: UInt64, _ kind: WireStreamFrame.OneOf_Kind, as nodeID: String = "hostile", payload: [UInt8]? = nil) throws {
        var frame = WireStreamFrame()
        frame.streamID = streamID
        frame.kind = kind
        try send(.streamFrame(frame), as: nodeID, payload: payload)
    }

    /// Opens pair `streamID` on `activityID` as a continuing node does (StreamOpen, step 1).
    func openStream(_ streamID: UInt64, activityID: String, window: UInt32, chunkSize: UInt32 = 65536,
                    direction: WireStreamDirection = .unspecified, as nodeID: String = "hostile") throws {
        var open = WireStreamOpen()
        open.activityID = activityID
        open.window = window
        open.chunkSize = chunkSize
        open.direction = direction
        open.checksumAlgorithm = .crc32C
        try send(stream: streamID, .open(open), as: nodeID)
    }

    /// The next envelope that comes back (a payload frame after it is dropped) and the size of its
    /// frame, or `nil` when none arrives within `timeout`.
    func receive(within timeout: Duration) async throws -> (envelope: WireEnvelope, size: Int)? {
        guard let frames = try await receiveMessage(within: timeout) else { return nil }
        return (try WireEnvelope.decode(frames[0].data), frames[0].count)
    }

    /// The next envelope that comes back with the payload frame after it, if any (a stream chunk's
    /// bytes), or `nil` when none arrives within `timeout`.
    func receiveWithPayload(within timeout: Duration) async throws -> (envelope: WireEnvelope, payload: Data?)? {
        guard let frames = try await receiveMessage(within: timeout) else { return nil }
        let payload = frames.count > 1 ? frames.dropFirst().reduce(into: Data()) { $0 += $1.data } : nil
        return (try WireEnvelope.decode(frames[0].data), payload)
    }

    /// Every frame of the next message, or `nil` when none arrives within `timeout`.
    private func receiveMessage(within timeout: Duration) async throws -> [Frame]? {
        guard let first = try await dealer.receive(timeout: timeout) else { return nil }
        var frames = [first]
        while frames.last!.hasMore { frames.append(try await dealer.receive()) }
        return frames
    }
}
