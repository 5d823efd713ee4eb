import Foundation
import HandoffWire
import SwiftProtobuf

/// SplitMix64: a seeded generator, so that every fuzz run can be repeated from its seed.
public struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Seeded fuzzing for the tests (`Tests/HandoffTests/FuzzTests.swift`) and `handoff-bench fuzz-memory`.
///
/// A seeded mutator of wire messages: it starts from valid envelopes of every body kind and
/// flips bits, writes boundary values and oversized varints, inserts, deletes, truncates,
/// duplicates and splices, a few times per input.
public struct Mutator {
    public var generator: SeededGenerator
    public let corpus: [[UInt8]]

    public init(seed: UInt64, corpus: [[UInt8]] = Mutator.envelopes) {
        generator = SeededGenerator(seed: seed)
        self.corpus = corpus
    }

    /// The next input.
    public mutating func next() -> [UInt8] {
        var input = corpus.randomElement(using: &generator)!
        // Mostly one or two changes, so that many inputs still decode and reach what is behind the
        // decoder; now and then many.
        let changes = int(0..<8) == 0 ? int(3..<9) : int(1..<3)
        for _ in 0..<changes { mutate(&input) }
        return input
    }

    /// A number from the same seeded sequence.
    public mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &generator) }

    private mutating func mutate(_ bytes: inout [UInt8]) {
        if bytes.isEmpty { bytes = [UInt8.random(in: 0...255, using: &generator)] }
        let at = int(0..<bytes.count)
        switch int(0..<8) {
        case 0: bytes[at] ^= UInt8(1) << UInt8(int(0..<8))
        case 1: bytes[at] = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0x0A, 0x12][int(0..<7)]
        case 2: bytes.insert(contentsOf: (0..<int(1..<17)).map { _ in UInt8.random(in: 0...255, using: &generator) }, at: at)
        case 3: bytes.removeSubrange(at..<min(bytes.count, at + int(1..<33)))
        case 4: bytes.removeSubrange(at..<bytes.count)
        case 5: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + int(1..<65))], at: at)
        case 6:
            let other = corpus.randomElement(using: &generator)!
            bytes = Array(bytes[..<at]) + other[int(0..<other.count)...]
        default:
            // A length or varint that claims far more than there is.
            bytes.insert(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], at: at)
        }
    }

    /// Valid envelopes of every body kind: the seed corpus.
    public static let envelopes: [[UInt8]] = {
        var origin = WireNodeRef()
        origin.nodeID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
        origin.name = "fuzz"
        origin.host = "h"
        origin.publicKey = Data(repeating: 7, count: 32)
        var advertisement = WireAdvertisement()
        advertisement.activityID = "0F3E2D1C-4B5A-4978-8A6B-5C4D3E2F1A0B"
        advertisement.activityType = "org.handoff.contacts.edit-contact"
        advertisement.title = "Editing Ada"
        advertisement.origin = origin
        advertisement.continueEndpoint = "tcp://127.0.0.1:5571"
        advertisement.version = 3
        advertisement.expiresAt = WireTimestamp(Date(timeIntervalSince1970: 4_102_444_800))  // fixed: the corpus, and so every run, is the same
        advertisement.leaseMs = 6000
        advertisement.keywords = ["a", "b"]
        var activity = WireActivity()
        activity.activityID = advertisement.activityID
        activity.activityType = advertisement.activityType
        activity.title = "Editing Ada"
        var value = WireValue()
        value.kind = .stringValue("Ada")
        var list = WireValue()
        list.kind = .listValue(WireValueList.with { $0.values = [value, value] })
        activity.userInfo = ["draft": value, "many": list]
        activity.requiredUserInfoKeys = ["draft"]
        activity.origin = origin
        activity.version = 3
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = advertisement.activityID
        withdrawal.activityType = advertisement.activityType
        withdrawal.origin = origin
        withdrawal.reason = .resigned
        var presence = WireNodePresence()
        presence.node = origin
        presence.leaseMs = 6000
        presence.activityIds = [advertisement.activityID]
        var request = WireContinueRequest()
        request.activityID = advertisement.activityID
        request.activityType = advertisement.activityType
        var open = WireStreamOpen()
        open.activityID = advertisement.activityID
        open.window = 16
        open.chunkSize = 262_144
        var data = WireStreamData()
        data.offset = 4096
        data.length = 16
        var credit = WireStreamCredit()
        credit.chunks = 4
        var end = WireStreamEnd()
        end.totalLength = 8192
        end.checksum = Data([0xDE, 0xAD, 0xBE, 0xEF])
        let bodies: [WireEnvelope.OneOf_Body] = [
            .advertisement(advertisement), .withdrawal(withdrawal), .nodePresence(presence),
            .continueRequest(request), .continueReply(WireContinueReply.with { $0.activity = activity }),
            .continueReply(WireContinueReply.with { $0.error = WireError.with { $0.code = .activityExpired; $0.message = "gone" } }),
            .snapshotReply(WireSnapshotReply.with { $0.count = 2; $0.typePrefix = "org." }),
            .streamFrame(WireStreamFrame.with { $0.streamID = 1; $0.kind = .open(open) }),
            .streamFrame(WireStreamFrame.with { $0.streamID = 1; $0.kind = .data(data) }),
            .streamFrame(WireStreamFrame.with { $0.streamID = 1; $0.kind = .credit(credit) }),
            .streamFrame(WireStreamFrame.with { $0.streamID = 1; $0.kind = .end(end) }),
            .nodeEvent(WireNodeEvent.with { $0.kind = .continued; $0.activityID = advertisement.activityID; $0.peer = origin }),
        ]
        // Byte for byte the same in every run: a fixed time, and maps in a fixed order.
        var options = BinaryEncodingOptions()
        options.useDeterministicOrdering = true
        return bodies.enumerated().map { index, body in
            try! WireEnvelope(body: body, sender: origin, sequence: UInt64(index + 1), correlationID: UInt64(index),
                              sentAt: Date(timeIntervalSince1970: 1_763_700_000)).serializedBytes(options: options)
        }
    }()
}
