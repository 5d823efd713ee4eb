import Foundation
import HandoffWire
import SwiftProtobuf
import Testing

/// `WireBusSummary.read` against SwiftProtobuf's full decode of the same bytes.
@Suite struct BusSummaryTests {
    /// What the summary must be, built from the full decode.
    static func reference(_ envelope: WireEnvelope) -> WireBusSummary {
        func node(_ ref: WireNodeRef) -> WireBusSummary.Node { .init(id: ref.nodeID, publicKey: Array(ref.publicKey)) }
        let body: WireBusSummary.Body = switch envelope.body {
        case .advertisement(let ad):
            .advertisement(activityID: ad.activityID, origin: node(ad.origin), version: ad.version, leaseMs: ad.leaseMs,
                           expiresAt: ad.hasExpiresAt ? ad.expiresAt.date : nil)
        case .withdrawal(let withdrawal): .withdrawal(activityID: withdrawal.activityID, origin: node(withdrawal.origin))
        case .nodePresence(let presence):
            .presence(node: node(presence.node), leaseMs: presence.leaseMs, activityIDs: presence.activityIds, partial: presence.partial)
        default: .other
        }
        return WireBusSummary(sender: node(envelope.sender), body: body, traceID: envelope.traceID.isEmpty ? nil : envelope.traceID)
    }

    static func read(_ bytes: [UInt8]) -> Result<WireBusSummary, WireDecodingError> {
        bytes.withUnsafeBytes { raw in Result { () throws(WireDecodingError) in try WireBusSummary.read(raw) } }
    }

    static func decode(_ bytes: [UInt8]) -> Result<WireEnvelope, WireDecodingError> {
        Result { () throws(WireDecodingError) in try WireEnvelope.decode(bytes) }
    }

    /// The contract between the two readers, for any bytes: what the full decode accepts is read
    /// to the same summary; what it rejects is rejected with the same error, unless the bytes hold
    /// a body the summary does not look into (`.other`): then the summary may read them, or reject
    /// them for what it finds after that body.
    static func expectAgreement(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        switch (decode(bytes), read(bytes)) {
        case (.success(let envelope), .success(let summary)):
            #expect(summary == reference(envelope), sourceLocation: sourceLocation)
            return summary == reference(envelope)
        case (.success(let envelope), .failure(let error)):
            Issue.record("the full decode read \(envelope), the summary failed: \(error); bytes \(bytes)", sourceLocation: sourceLocation)
            return false
        case (.failure, .success(let summary)):
            #expect(summary.body == .other, "the summary read \(summary) from bytes the full decode rejects: \(bytes)", sourceLocation: sourceLocation)
            return summary.body == .other
        case (.failure(let expected), .failure(let error)):
            let agrees = error == expected || holdsOtherBody(bytes)
            #expect(agrees, "\(error) where the full decode found \(expected); bytes \(bytes)", sourceLocation: sourceLocation)
            return agrees
        }
    }

    /// Whether the envelope's top-level fields, walked as far as they are well formed, include a
    /// body other than an advertisement, a withdrawal or a presence (fields 13–20 but 16).
    static func holdsOtherBody(_ bytes: [UInt8]) -> Bool {
        var index = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0, shift: UInt64 = 0
            while index < bytes.count, shift <= 63 {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        while let tag = varint() {
            let number = tag >> 3
            switch tag & 7 {
            case 0: guard varint() != nil else { return false }
            case 1: index += 8
            case 5: index += 4
            case 2:
                if (13...20).contains(number), number != 16 { return true }
                guard let length = varint(), length <= UInt64(bytes.count - index) else { return false }
                index += Int(length)
            default: return false
            }
        }
        return false
    }

    @Test func theWalkerFindsOtherBodies() throws {
        #expect(!Self.holdsOtherBody(try Fixtures.envelope(.advertisement(Fixtures.advertisement)).serializedBytes()))
        #expect(Self.holdsOtherBody(try Fixtures.envelope(.nodeEvent(WireNodeEvent())).serializedBytes()))
    }

    @Test(arguments: Fixtures.bodies.indices)
    func everyBodyKindReadsAsTheFullDecodeDoes(index: Int) throws {
        let bytes: [UInt8] = try Fixtures.envelope(Fixtures.bodies[index]).serializedBytes()
        let summary = try Self.read(bytes).get()
        #expect(summary == Self.reference(try WireEnvelope.decode(bytes)))
        #expect(summary.sender.id == Fixtures.node.nodeID)
    }

    @Test func anAdvertisementWithoutExpiryOrKey() throws {
        var ad = Fixtures.advertisement
        ad.clearExpiresAt()
        ad.origin.publicKey = Data()
        let bytes: [UInt8] = try Fixtures.envelope(.advertisement(ad)).serializedBytes()
        guard case .advertisement(_, let origin, _, _, let expiresAt) = try Self.read(bytes).get().body else {
            Issue.record("not an advertisement")
            return
        }
        #expect(expiresAt == nil)
        #expect(origin.publicKey.isEmpty)
    }

    @Test func theRejectionsOfTheFullDecode() {
        // No version, a version from the future, no body, a body of a field this build does not know.
        #expect(Self.read([0x52, 0x00]) == .failure(.unsupportedProtocolVersion(0)))
        #expect(Self.read([0x08, 0x02, 0x52, 0x00]) == .failure(.unsupportedProtocolVersion(2)))
        #expect(Self.read([0x08, 0x01]) == .failure(.missingBody))
        #expect(Self.read([0x08, 0x01, 0x82, 0x01, 0x00]) == .failure(.missingBody))  // field 16, reserved
        #expect(Self.read([0x08, 0x01, 0x52, 0x04, 0x0A, 0x02, 0xFF, 0xFE]) == .failure(.malformed(.invalidUTF8)))
        #expect(Self.read([0x08, 0x01, 0x52, 0x05, 0x0A, 0x02]) == .failure(.malformed(.truncated)))
        #expect(Self.read([0x08, 0x01, 0x0F, 0x01]) == .failure(.malformed(.malformedProtobuf)))
        for bytes: [UInt8] in [[0x52, 0x00], [0x08, 0x02, 0x52, 0x00], [0x08, 0x01], [0x08, 0x01, 0x82, 0x01, 0x00],
                               [0x08, 0x01, 0x52, 0x04, 0x0A, 0x02, 0xFF, 0xFE], [0x08, 0x01, 0x52, 0x05, 0x0A, 0x02], [0x08, 0x01, 0x0F, 0x01]] {
            #expect(Self.expectAgreement(bytes))
        }
    }

    /// Two envelopes one after the other are one envelope to protobuf: fields merge, a oneof of
    /// another case replaces the first.
    @Test func concatenatedEnvelopesMergeAsProtobufMerges() throws {
        let all: [[UInt8]] = try Fixtures.bodies.map { try Fixtures.envelope($0).serializedBytes() }
        var other = Fixtures.node
        other.nodeID = "another-node"
        let foreign: [UInt8] = try Fixtures.envelope(.withdrawal(WireWithdrawal.with { $0.origin = other })).serializedBytes()
        for first in all + [foreign] {
            for second in all + [foreign] {
                #expect(Self.expectAgreement(first + second))
            }
        }
    }

    /// Random envelopes of the three bodies the broker reads, with unknown fields, then every kind
    /// of damage to their bytes: both readers must agree on every one.
    @Test func randomAndDamagedEnvelopesAgreeWithTheFullDecode() throws {
        var random = SplitMix(seed: 0x5EED_B05)
        var checked = 0, rejected = 0
        for _ in 0..<300 {
            var bytes: [UInt8] = try Self.randomEnvelope(&random).serializedBytes()
            if random.next() % 2 == 0 { bytes += Self.unknownField(&random) }
            #expect(Self.expectAgreement(bytes))
            for _ in 0..<40 {
                let damaged = SplitMix.damage(bytes, &random)
                if case .failure = Self.decode(damaged) { rejected += 1 }
                checked += 1
                guard Self.expectAgreement(damaged) else { return }
            }
        }
        // The damage must exercise both outcomes, or the test proves little.
        #expect(rejected > checked / 10 && rejected < checked * 9 / 10, "\(rejected) of \(checked) rejected")
    }

    static func randomEnvelope(_ random: inout SplitMix) -> WireEnvelope {
        func string() -> String { random.string(maxLength: 39) }
        func node() -> WireNodeRef { random.node(maxLength: 39) }
        let body: WireEnvelope.OneOf_Body = switch random.next() % 3 {
        case 0:
            .advertisement(WireAdvertisement.with {
                $0.activityID = string()
                $0.activityType = string()
                $0.title = string()
                $0.origin = node()
                $0.continueEndpoint = string()
                $0.version = random.next() >> (random.next() % 64)
                if random.next() % 2 == 0 { $0.expiresAt = WireTimestamp(Date(timeIntervalSince1970: Double(random.next() % 4_000_000_000))) }
                $0.leaseMs = UInt32(truncatingIfNeeded: random.next())
                $0.supportsContinuationStreams = random.next() % 2 == 0
                $0.webpageURL = string()
                $0.keywords = (0..<random.next() % 4).map { _ in string() }
                if random.next() % 2 == 0 { $0.updatedAt = WireTimestamp(Date(timeIntervalSince1970: Double(random.next() % 4_000_000_000))) }
            })
        case 1:
            .withdrawal(WireWithdrawal.with {
                $0.activityID = string()
                $0.activityType = string()
                $0.origin = node()
                $0.reason = .resigned
            })
        default:
            .nodePresence(WireNodePresence.with {
                $0.node = node()
                $0.continueEndpoint = string()
                $0.leaseMs = UInt32(truncatingIfNeeded: random.next())
                $0.activityIds = (0..<random.next() % 5).map { _ in string() }
                $0.partial = random.next() % 2 == 0
                if random.next() % 2 == 0 {
                    $0.traffic = WireNodeTraffic.with {
                        $0.messagesIn = random.next() % 100_000
                        $0.bytesIn = random.next()
                        $0.messagesOut = random.next() % 1_000
                    }
                }
            })
        }
        var envelope = WireEnvelope(body: body, sender: node(), sequence: random.next(),
                                    sentAt: Date(timeIntervalSince1970: Double(random.next() % 4_000_000_000)))
        if random.next() % 4 == 0 { envelope.traceID = string() }
        return envelope
    }

    /// A field of a number the envelope does not define, of a random wire type.
    static func unknownField(_ random: inout SplitMix) -> [UInt8] {
        let number: UInt8 = 7 + UInt8(random.next() % 3)  // 7–9: between the header and the body
        switch random.next() % 4 {
        case 0: return [number << 3 | 0, 0x96, 0x01]
        case 1: return [number << 3 | 1] + Array(repeating: 7, count: 8)
        case 2: return [number << 3 | 2, 3, 1, 2, 3]
        default: return [number << 3 | 3, 0x08, 0x01, number << 3 | 4]  // a group holding a varint
        }
    }
}

/// A small deterministic random generator (SplitMix64), so that a failure can be replayed.
struct SplitMix: RandomNumberGenerator {
    /// `bytes` with one random kind of damage: a bit flipped, a byte replaced, inserted or
    /// removed, or the end cut off.
    /// Up to `maxLength` characters, ASCII and not.
    mutating func string(maxLength: Int) -> String {
        let alphabet = Array("abcXYZ019.-_ éü✓😀")
        return String((0..<Int(next() % UInt64(maxLength + 1))).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
    }

    /// A node, with a key or without.
    mutating func node(maxLength: Int) -> WireNodeRef {
        var node = WireNodeRef()
        node.nodeID = string(maxLength: maxLength)
        node.name = string(maxLength: maxLength)
        node.host = string(maxLength: maxLength)
        if next() % 2 == 0 { node.publicKey = Data((0..<32).map { _ in UInt8(truncatingIfNeeded: next()) }) }
        return node
    }

    static func damage(_ bytes: [UInt8], _ random: inout SplitMix) -> [UInt8] {
        var damaged = bytes
        switch random.next() % 5 {
        case 0: damaged[Int(random.next() % UInt64(damaged.count))] ^= UInt8(1 << (random.next() % 8))
        case 1: damaged[Int(random.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: random.next())
        case 2: damaged.insert(UInt8(truncatingIfNeeded: random.next()), at: Int(random.next() % UInt64(damaged.count)))
        case 3: damaged.remove(at: Int(random.next() % UInt64(damaged.count)))
        default: damaged = Array(damaged.prefix(Int(random.next() % UInt64(damaged.count))))
        }
        return damaged
    }

    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
