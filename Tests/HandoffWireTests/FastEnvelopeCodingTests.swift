import Foundation
import SwiftProtobuf
import Testing

@testable import HandoffWire

/// The hand-written codec of the hot envelopes against SwiftProtobuf: the same bytes out, the same
/// envelope in, and SwiftProtobuf's answer wherever the fast decoder declines.
@Suite("The fast envelope codec, held to SwiftProtobuf")
struct FastEnvelopeCodingTests {
    static func swiftProtobuf(_ bytes: [UInt8]) -> WireEnvelope? {
        try? WireEnvelope(serializedBytes: bytes)
    }

    static func fast(_ bytes: [UInt8]) -> WireEnvelope? {
        bytes.withUnsafeBytes(FastEnvelopeDecoder.decode)
    }

    /// For any bytes: when the fast decoder answers, SwiftProtobuf accepts them and reads the same.
    static func expectAgreement(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        guard let fast = fast(bytes) else { return true }
        let expected = swiftProtobuf(bytes)
        #expect(expected == fast, "bytes \(bytes)", sourceLocation: sourceLocation)
        return expected == fast
    }

    @Test("every body of the fixtures encodes byte for byte as SwiftProtobuf encodes it")
    func fixturesEncodeAlike() throws {
        for body in Fixtures.bodies {
            let envelope = Fixtures.envelope(body, correlationID: 99)
            #expect(envelope.encoded() == (try envelope.serializedBytes() as [UInt8]), "\(Fixtures.caseName(body))")
        }
        var activity = Fixtures.activity
        activity.userInfo["not a number"] = WireValue.with { $0.doubleValue = .nan }
        let envelope = Fixtures.envelope(.continueReply(.with { $0.activity = activity }))
        #expect(envelope.encoded() == (try envelope.serializedBytes() as [UInt8]))
    }

    @Test("the hot bodies of the fixtures decode by hand to what SwiftProtobuf decodes")
    func fixturesDecodeAlike() throws {
        let hot: [WireEnvelope.OneOf_Body] = [
            .advertisement(Fixtures.advertisement),
            .continueRequest(.with { $0.activityID = "a"; $0.activityType = "org.x.y"; $0.wantStreams = true; $0.refresh = true }),
            .continueReply(.with { $0.activity = Fixtures.activity }),
            .withdrawal(.with { $0.activityID = "a"; $0.activityType = "org.x.y"; $0.origin = Fixtures.node; $0.reason = .nodeShutdown }),
            .nodePresence(.with { $0.node = Fixtures.node; $0.leaseMs = 6_000; $0.activityIds = ["a", "", "b"]; $0.partial = true; $0.traffic = .with { $0.bytesOut = 9 } }),
            .streamFrame(.with { $0.streamID = 3; $0.data = .with { $0.offset = 1 << 40; $0.length = 262_144; $0.totalLength = 1 << 41 } }),
            .streamFrame(.with { $0.streamID = 3; $0.data = .with { $0.offset = 9; $0.payload = Data([1, 2, 3]) } }),
            .streamFrame(.with { $0.streamID = 3; $0.credit = .with { $0.chunks = 4; $0.acknowledgedOffset = 1 << 33; $0.endReceived = true } }),
        ]
        for body in hot {
            let bytes: [UInt8] = try Fixtures.envelope(body, correlationID: 7).serializedBytes()
            let fast = try #require(Self.fast(bytes), "\(Fixtures.caseName(body)) took the slow path")
            #expect(fast == Self.swiftProtobuf(bytes))
        }
    }

    @Test("random envelopes of the hot bodies: the same bytes out, the same envelope in, by hand")
    func randomEnvelopes() throws {
        var random = SplitMix(seed: 0xFA57_C0DE)
        for round in 0..<400 {
            let envelope = Self.randomEnvelope(&random)
            let bytes: [UInt8] = try envelope.serializedBytes()
            #expect(envelope.encoded() == bytes, "round \(round)")
            let fast = try #require(Self.fast(bytes), "round \(round) took the slow path")
            #expect(fast == envelope, "round \(round)")
        }
    }

    @Test("an envelope written from its parts, never built, is the one built from them, byte for byte, hot body or not")
    func envelopesFromTheirParts() throws {
        var random = SplitMix(seed: 0x9A27_5E4D)
        let sentAt = Date(timeIntervalSince1970: 1_790_000_000.25)
        var bodies = (0..<200).compactMap { _ in Self.randomEnvelope(&random).body }
        // Bodies the fast encoder leaves to SwiftProtobuf take the built envelope's way.
        bodies.append(.error(.with { $0.message = "no" }))
        bodies.append(.withdrawal(.with { $0.activityID = "w"; $0.reason = .UNRECOGNIZED(9) }))
        bodies.append(.continueReply(.with { $0.error = .with { $0.message = "no" } }))
        for (round, body) in bodies.enumerated() {
            let sender = random.node(maxLength: 23)
            let sequence = random.next(), correlationID = random.next() >> (random.next() % 64)
            let traceID: String? = round % 3 == 0 ? random.string(maxLength: 12) : nil
            var built = WireEnvelope(body: body, sender: sender, sequence: sequence, correlationID: correlationID, sentAt: sentAt)
            if let traceID { built.traceID = traceID }
            let expected: [UInt8] = try built.serializedBytes()
            let written = WireEnvelope.encoded(body: body, sender: sender, sequence: sequence, correlationID: correlationID, sentAt: sentAt, traceID: traceID)
            #expect(written == expected, "round \(round)")
        }
    }

    @Test("a continue reply written from its activity's encoded bytes is, byte for byte, the envelope built from the activity; a sender with unknown fields takes SwiftProtobuf's way to the same envelope")
    func continueReplyFromEncodedActivity() throws {
        var random = SplitMix(seed: 0x2E91_CAC4)
        let sentAt = Date(timeIntervalSince1970: 1_790_000_000.5)
        var activities = [Fixtures.activity]
        while activities.count < 120 {
            if case .continueReply(let reply)? = Self.randomEnvelope(&random).body, case .activity(let activity)? = reply.result { activities.append(activity) }
        }
        for (round, activity) in activities.enumerated() {
            var sender = random.node(maxLength: 23)
            // Field 127, unknown to this version: the sender kept it from a decode.
            if round % 10 == 9 { sender = try WireNodeRef(serializedBytes: try sender.serializedBytes() + [0xF8, 0x07, 0x01]) }
            let sequence = random.next(), correlationID = random.next() >> (random.next() % 64)
            let built = WireEnvelope(body: .continueReply(.with { $0.activity = activity }), sender: sender, sequence: sequence, correlationID: correlationID, sentAt: sentAt)
            let written = WireEnvelope.encoded(
                continueReplyActivity: try activity.serializedBytes(), sender: sender, sequence: sequence, correlationID: correlationID, sentAt: sentAt)
            if round % 10 == 9 {
                #expect(try WireEnvelope(serializedBytes: written) == built, "round \(round)")
            } else {
                #expect(written == (try built.serializedBytes()), "round \(round)")
            }
        }
    }

    @Test("node events, unknown kinds among them, encode byte for byte as SwiftProtobuf encodes them")
    func nodeEventsEncodeAlike() throws {
        var random = SplitMix(seed: 19)
        let kinds: [WireNodeEvent.Kind] = [.unspecified, .continued, .streamOpened, .streamProgress, .streamFinished, .streamFailed, .UNRECOGNIZED(77), .UNRECOGNIZED(-3)]
        for round in 0..<200 {
            let event = WireNodeEvent.with {
                $0.kind = kinds[Int(random.next() % UInt64(kinds.count))]
                $0.activityID = random.next() % 2 == 0 ? "activity \(random.next())" : ""
                $0.activityType = random.next() % 2 == 0 ? "org.example.type" : ""
                if random.next() % 2 == 0 { $0.peer = .with { $0.nodeID = "peer"; $0.name = "a peer \(round)" } }
                $0.streamID = random.next() >> (random.next() % 64)
                $0.bytesSent = random.next() >> (random.next() % 64)
                $0.bytesReceived = random.next() >> (random.next() % 64)
                $0.expectedLength = random.next() >> (random.next() % 64)
                $0.detail = random.next() % 3 == 0 ? "why, at length: \(String(repeating: "x", count: Int(random.next() % 300)))" : ""
            }
            let envelope = Fixtures.envelope(.nodeEvent(event), correlationID: random.next() % 3)
            #expect(envelope.encoded() == (try envelope.serializedBytes() as [UInt8]), "round \(round)")
        }
    }

    /// Every kind of damage, unknown fields, and envelopes run together (protobuf merges them):
    /// the fast decoder answers as SwiftProtobuf does or leaves the bytes to it.
    @Test("damaged, extended and concatenated envelopes: the fast decoder agrees or declines")
    func damagedEnvelopes() throws {
        var random = SplitMix(seed: 0xDA3A_6ED)
        var checked = 0, taken = 0
        for _ in 0..<250 {
            let bytes: [UInt8] = try Self.randomEnvelope(&random).serializedBytes()
            let second: [UInt8] = try Self.randomEnvelope(&random).serializedBytes()
            #expect(Self.fast(bytes + second) == nil || Self.expectAgreement(bytes + second))
            // A message field given again merges into the first (a scalar's last value wins).
            for again: WireEnvelope in [.with { $0.sender = .with { $0.nodeID = "again" } }, .with { $0.sentAt = .with { $0.nanos = 5 } },
                                        .with { $0.sequence = 3 }, .with { $0.traceID = "again" }] {
                let merged = bytes + (try again.serializedBytes() as [UInt8])
                #expect(Self.swiftProtobuf(merged) != nil)
                #expect(Self.expectAgreement(merged))
            }
            #expect(Self.fast(bytes + BusSummaryTests.unknownField(&random)) == nil, "an unknown field is SwiftProtobuf's to keep")
            for _ in 0..<40 {
                let damaged = SplitMix.damage(bytes, &random)
                checked += 1
                if Self.fast(damaged) != nil { taken += 1 }
                guard Self.expectAgreement(damaged) else { return }
            }
        }
        // Damage must leave the fast decoder some bytes to answer and some to decline, or this proves little.
        #expect(taken > checked / 10 && taken < checked * 9 / 10, "\(taken) of \(checked) read by hand")
    }

    /// The bus's decode of `bytes`.
    static func bus(_ bytes: [UInt8]) -> Result<WireBusEnvelope, WireDecodingError> {
        bytes.withUnsafeBytes { raw in Result { () throws(WireDecodingError) in try WireBusEnvelope.decode(raw) } }
    }

    static func plain(_ bytes: [UInt8]) -> WireAdvertisementEnvelope? {
        if case .success(.advertisement(let plain)) = bus(bytes) { plain } else { nil }
    }

    /// For any bytes, the bus's decode answers as `decode` does (the same error, the same envelope,
    /// an untraced advertisement's in plain values), and gives in plain values every untraced
    /// advertisement the hand-written reader takes.
    static func expectBusAgreement(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let expected = Result { () throws(WireDecodingError) in try WireEnvelope.decode(bytes) }
        let agrees: Bool
        switch (bus(bytes), expected) {
        case (.failure(let error), .failure(let expectedError)):
            agrees = error == expectedError
        case (.success(.other(let envelope)), .success(let decoded)):
            // Whole: anything but an untraced advertisement, or one left to SwiftProtobuf.
            let untracedAdvertisement = if case .advertisement = decoded.body { decoded.traceID.isEmpty } else { false }
            agrees = envelope == decoded && !(untracedAdvertisement && fast(bytes) != nil)
        case (.success(.advertisement(let plain)), .success(let decoded)):
            let isAdvertisement = if case .advertisement = decoded.body { true } else { false }
            agrees = isAdvertisement && decoded.traceID.isEmpty && decoded.advertisement == WireAdvertisement(plain.advertisement)
                && decoded.sequence == plain.sequence && (decoded.hasSender ? decoded.sender : nil) == plain.sender
                && (decoded.hasSentAt ? decoded.sentAt : nil) == plain.sentAt
                && (plain.advertisement.origin == nil) == !decoded.advertisement.hasOrigin
        default:
            agrees = false
        }
        #expect(agrees, "bytes \(bytes)", sourceLocation: sourceLocation)
        return agrees
    }

    @Test("the bus's decode answers as decode does, an untraced advertisement in plain values; every other envelope whole")
    func plainAdvertisements() throws {
        var random = SplitMix(seed: 0xAD5_F1E1D)
        var read = 0, advertisements = 0
        for round in 0..<400 {
            let envelope = Self.randomEnvelope(&random)
            let bytes: [UInt8] = try envelope.serializedBytes()
            if case .advertisement = envelope.body, envelope.traceID.isEmpty { advertisements += 1 }
            if Self.plain(bytes) != nil { read += 1 }
            #expect(Self.expectBusAgreement(bytes), "round \(round)")
            for _ in 0..<10 { _ = Self.expectBusAgreement(SplitMix.damage(bytes, &random)) }
        }
        // Every untraced advertisement of these (none unknown, none merged) is read plain.
        #expect(read == advertisements && advertisements > 50, "\(read) of \(advertisements)")
        var old = Fixtures.envelope(.advertisement(Fixtures.advertisement))
        old.protocolVersion = WireProtocol.version + 1
        let newer: [UInt8] = try old.serializedBytes()
        #expect(Self.bus(newer) == .failure(.unsupportedProtocolVersion(WireProtocol.version + 1)), "a version decode rejects")
    }

    @Test("an advertisement written from plain values is, byte for byte, the envelope SwiftProtobuf writes for it")
    func plainAdvertisementsEncodeAlike() throws {
        var random = SplitMix(seed: 0x9_1A1E)
        var written = 0
        for round in 0..<300 {
            var envelope = Self.randomEnvelope(&random)
            guard case .advertisement = envelope.body else { continue }
            envelope.correlationID = 0  // (an advertisement is no exchange's)
            if !envelope.hasSender { envelope.sender = random.node(maxLength: 9) }
            let expected: [UInt8] = try envelope.serializedBytes()
            var untraced = envelope  // (a traced one is read whole: the plain values come from its untraced twin)
            untraced.traceID = ""
            let plain = try #require(Self.plain(try untraced.serializedBytes()))
            let sentAt = try #require(plain.sentAt).date
            let bytes = WireEnvelope.encoded(advertisement: plain.advertisement, sender: envelope.sender, sequence: envelope.sequence,
                                             sentAt: sentAt, traceID: envelope.traceID.isEmpty ? nil : envelope.traceID)
            #expect(bytes == expected, "round \(round)")
            written += 1
        }
        #expect(written > 50)
        // An origin with fields this build does not know: SwiftProtobuf writes it, kept.
        var origin = random.node(maxLength: 9)
        try origin.merge(serializedBytes: [0x38, 0x01] as [UInt8])  // field 7
        var advertisement = WirePlainAdvertisement()
        advertisement.activityID = "a"
        advertisement.origin = origin
        let sender = random.node(maxLength: 9), sentAt = Date(timeIntervalSince1970: 1_800_000_000)
        let expected: [UInt8] = try WireEnvelope(body: .advertisement(WireAdvertisement(advertisement)), sender: sender, sequence: 4, sentAt: sentAt).serializedBytes()
        #expect(WireEnvelope.encoded(advertisement: advertisement, sender: sender, sequence: 4, sentAt: sentAt) == expected)
    }

    @Test("unknown fields kept by a decode are written back as SwiftProtobuf writes them")
    func unknownFieldsSurviveEncoding() throws {
        var random = SplitMix(seed: 5)
        let bytes: [UInt8] = try Self.randomEnvelope(&random).serializedBytes() + [0x38, 0x96, 0x01]  // field 7
        let envelope = try WireEnvelope.decode(bytes)
        #expect(!envelope.unknownFields.data.isEmpty)
        #expect(envelope.encoded() == (try envelope.serializedBytes() as [UInt8]))
    }

    static func randomEnvelope(_ random: inout SplitMix) -> WireEnvelope {
        func string() -> String { random.string(maxLength: random.next() % 8 == 0 ? 199 : 23) }
        func timestamp() -> WireTimestamp {
            WireTimestamp(Date(timeIntervalSince1970: Double(Int64(bitPattern: random.next()) % 8_000_000_000) / 1.5))
        }
        func node() -> WireNodeRef { random.node(maxLength: 23) }
        func value(depth: Int) -> WireValue {
            WireValue.with { made in
                switch random.next() % (depth < 3 ? 9 : 7) {
                case 0: made.stringValue = string()
                case 1: made.intValue = Int64(bitPattern: random.next()) >> (random.next() % 64)
                case 2: made.doubleValue = Double(Int64(bitPattern: random.next()) >> (random.next() % 64)) / 3
                case 3: made.boolValue = random.next() % 2 == 0
                case 4: made.bytesValue = Data((0..<random.next() % 150).map { _ in UInt8(truncatingIfNeeded: random.next()) })
                case 5: made.urlValue = "https://example.org/" + string()
                case 6: made.dateValue = timestamp()
                case 7: made.listValue = .with { $0.values = (0..<random.next() % 4).map { _ in value(depth: depth + 1) } }
                default: made.mapValue = .with { $0.entries = userInfo(depth: depth + 1) }
                }
            }
        }
        func userInfo(depth: Int) -> [String: WireValue] {
            var entries: [String: WireValue] = [:]
            for _ in 0..<random.next() % 6 { entries[string()] = value(depth: depth) }
            return entries
        }
        let body: WireEnvelope.OneOf_Body
        switch random.next() % 5 {
        case 0:
            var advertisement = BusSummaryTests.randomEnvelope(&random).advertisement
            advertisement.teamID = random.next() % 2 == 0 ? string() : ""
            body = .advertisement(advertisement)
        case 3 where random.next() % 2 == 0:
            body = .withdrawal(.with {
                $0.activityID = string()
                if random.next() % 3 != 0 { $0.activityType = string() }
                if random.next() % 4 != 0 { $0.origin = node() }
                $0.reason = WireWithdrawal.Reason(rawValue: Int(random.next() % 5))!
            })
        case 3:
            body = .streamFrame(.with {
                $0.streamID = random.next() >> (random.next() % 64)
                $0.data = .with {
                    $0.offset = random.next() >> (random.next() % 64)
                    if random.next() % 4 == 0 { $0.payload = Data((0..<random.next() % 300).map { _ in UInt8(truncatingIfNeeded: random.next()) }) }
                    $0.length = UInt32(truncatingIfNeeded: random.next() >> (random.next() % 64))
                    $0.totalLength = random.next() % 2 == 0 ? 0 : random.next() >> (random.next() % 64)
                }
            })
        case 4 where random.next() % 2 == 0:
            body = .nodePresence(.with {
                if random.next() % 4 != 0 { $0.node = node() }
                $0.continueEndpoint = random.next() % 2 == 0 ? "tcp://" + string() : ""
                $0.leaseMs = UInt32(truncatingIfNeeded: random.next() >> (random.next() % 64))
                $0.activityIds = (0..<random.next() % 6).map { _ in string() }
                $0.partial = random.next() % 3 == 0
                if random.next() % 2 == 0 {
                    $0.traffic = .with {
                        $0.messagesIn = random.next() >> (random.next() % 64)
                        $0.bytesIn = random.next() >> (random.next() % 64)
                        $0.messagesOut = random.next() >> (random.next() % 64)
                        $0.bytesOut = random.next() >> (random.next() % 64)
                    }
                }
            })
        case 4:
            body = .streamFrame(.with {
                $0.streamID = random.next() >> (random.next() % 64)
                $0.credit = .with {
                    $0.chunks = UInt32(truncatingIfNeeded: random.next() >> (random.next() % 64))
                    $0.acknowledgedOffset = random.next() >> (random.next() % 64)
                    $0.endReceived = random.next() % 2 == 0
                }
            })
        case 1:
            body = .continueRequest(.with {
                $0.activityID = string()
                $0.activityType = string()
                $0.wantStreams = random.next() % 2 == 0
                $0.refresh = random.next() % 2 == 0
            })
        default:
            body = .continueReply(.with {
                $0.activity = WireActivity.with {
                    $0.activityID = string()
                    $0.activityType = string()
                    $0.title = string()
                    $0.userInfo = userInfo(depth: 0)
                    $0.requiredUserInfoKeys = (0..<random.next() % 3).map { _ in string() }
                    $0.webpageURL = random.next() % 2 == 0 ? "https://example.org/" + string() : ""
                    $0.keywords = (0..<random.next() % 3).map { _ in string() }
                    if random.next() % 2 == 0 { $0.expiration = timestamp() }
                    $0.eligibleForHandoff = random.next() % 2 == 0
                    $0.supportsContinuationStreams = random.next() % 2 == 0
                    $0.teamID = random.next() % 2 == 0 ? string() : ""
                    if random.next() % 4 != 0 { $0.origin = node() }
                    $0.version = random.next() >> (random.next() % 64)
                    if random.next() % 2 == 0 { $0.updatedAt = timestamp() }
                    if random.next() % 3 == 0 {
                        $0.document = .with {
                            $0.url = "file:///" + string()
                            $0.version = random.next() % 1000
                            $0.sha256 = Data((0..<32).map { _ in UInt8(truncatingIfNeeded: random.next()) })
                            $0.size = random.next() >> 20
                        }
                    }
                }
            })
        }
        var envelope = WireEnvelope(body: body, sender: node(), sequence: random.next(), correlationID: random.next() >> (random.next() % 64),
                                    sentAt: Date(timeIntervalSince1970: Double(random.next() % 4_000_000_000)))
        if random.next() % 4 == 0 { envelope.traceID = string() }
        if random.next() % 8 == 0 { envelope.clearSender() }
        return envelope
    }
}
