import Foundation
import SwiftProtobuf
import Testing

@testable import HandoffWire

// The bodies the fast codec took on last (a stream's per-chunk frames, withdrawals): which take the
// hand-written path, and which are left to SwiftProtobuf.
extension FastEnvelopeCodingTests {
    @Test("a withdrawal whose reason this build does not know is SwiftProtobuf's to read (UNRECOGNIZED) and to write")
    func withdrawalOfAnUnknownReason() throws {
        let envelope = Fixtures.envelope(.withdrawal(.with { $0.activityID = "a"; $0.origin = Fixtures.node; $0.reason = .UNRECOGNIZED(7) }))
        let bytes: [UInt8] = try envelope.serializedBytes()
        #expect(envelope.encoded() == bytes)
        #expect(Self.fast(bytes) == nil)
        #expect(Self.swiftProtobuf(bytes)?.withdrawal.reason == .UNRECOGNIZED(7))
        let negative = Fixtures.envelope(.withdrawal(.with { $0.activityID = "a"; $0.reason = .UNRECOGNIZED(-1) }))
        let negativeBytes: [UInt8] = try negative.serializedBytes()
        #expect(negative.encoded() == negativeBytes)
        #expect(Self.fast(negativeBytes) == nil)
    }

    @Test("a stream's data and credit frames, sent for every chunk, are written by hand; its other frames, and one with unknown fields, by SwiftProtobuf; both to the same bytes")
    func streamFramesWrittenByHand() throws {
        let hot: [WireStreamFrame] = [
            .with { $0.streamID = 3; $0.data = .with { $0.offset = 1 << 40; $0.length = 262_144; $0.totalLength = 1 << 41 } },
            .with { $0.streamID = 1; $0.data = WireStreamData() },
            .with { $0.streamID = 3; $0.credit = .with { $0.chunks = 4; $0.acknowledgedOffset = 1 << 33; $0.endReceived = true } },
            .with { $0.streamID = 0; $0.credit = WireStreamCredit() },
        ]
        for frame in hot {
            let envelope = Fixtures.envelope(.streamFrame(frame))
            let expected: [UInt8] = try envelope.serializedBytes()
            #expect((try? FastEnvelopeEncoder.encode(envelope)) == expected, "\(frame)")
        }
        var unknown = hot[0]
        unknown.data.unknownFields = try WireStreamData(serializedBytes: [0xF8, 0x01, 0x07] as [UInt8]).unknownFields
        let cold: [WireStreamFrame] = [
            .with { $0.streamID = 3; $0.end = .with { $0.totalLength = 5 } },
            .with { $0.streamID = 3; $0.open = .with { $0.activityID = "a"; $0.window = 16 } },
            unknown,
        ]
        for frame in cold {
            let envelope = Fixtures.envelope(.streamFrame(frame))
            #expect(throws: NotOnFastPath.self) { try FastEnvelopeEncoder.encode(envelope) }
            #expect(envelope.encoded() == (try envelope.serializedBytes() as [UInt8]), "\(frame)")
        }
    }
}
