import Foundation
import SwiftProtobuf
import Testing

@testable import HandoffWire

/// The readers of a continue's two messages against `WireEnvelope.decode`: the continuing node's
/// DEALER's (`WireReplyEnvelope`: an activity reply's activity in plain values holding what the
/// generated one holds) and the originator's ROUTER's (`WireServerEnvelope`: a request in its
/// parts); the same errors, the same envelopes.
@Suite("A continue's request and reply read in plain values, held to SwiftProtobuf")
struct ContinueReadersTests {
    /// What the plain reader makes of a generated value.
    static func plain(_ wire: WireValue) -> WirePlainValue {
        switch wire.kind {
        case .stringValue(let string): .string(string)
        case .intValue(let int): .int(int)
        case .doubleValue(let double): .double(double)
        case .boolValue(let bool): .bool(bool)
        case .bytesValue(let bytes): .bytes(bytes)
        case .urlValue(let url): .url(url)
        case .dateValue(let time): .date(time)
        case .listValue(let list): .list(list.values.map(plain))
        case .mapValue(let map): .map(map.entries.mapValues(plain))
        case nil: .null
        }
    }

    static func read(_ bytes: [UInt8], strings: WireStrings? = nil) -> Result<WireReplyEnvelope, WireDecodingError> {
        bytes.withUnsafeBytes { raw in Result { () throws(WireDecodingError) in try WireReplyEnvelope.decode(raw, strings: strings) } }
    }

    /// Whether `plain` holds what `wire` says, its values as a node makes them.
    static func same(_ plain: WirePlainActivity, _ wire: WireActivity) -> Bool {
        plain.activityID == wire.activityID && plain.activityType == wire.activityType && plain.title == wire.title
            && Dictionary(plain.userInfo.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 }) == wire.userInfo.mapValues(Self.plain)
            && plain.requiredUserInfoKeys == wire.requiredUserInfoKeys
            && plain.webpageURL == wire.webpageURL && plain.keywords == wire.keywords
            && plain.expiration == (wire.hasExpiration ? wire.expiration : nil) && plain.eligibleForHandoff == wire.eligibleForHandoff
            && plain.supportsContinuationStreams == wire.supportsContinuationStreams && plain.teamID == wire.teamID
            && plain.origin == (wire.hasOrigin ? wire.origin : nil) && plain.version == wire.version
            && plain.updatedAt == (wire.hasUpdatedAt ? wire.updatedAt : nil) && plain.document == (wire.hasDocument ? wire.document : nil)
            && (try? WireActivity(serializedBytes: plain.bytes)) == wire && WireActivity(plain) == wire
    }

    /// For any bytes: the same error as decode, or the same envelope, an activity reply's in plain
    /// values (then true) or whole.
    @discardableResult
    static func expectAgreement(_ bytes: [UInt8], strings: WireStrings? = nil, sourceLocation: SourceLocation = #_sourceLocation) -> Bool? {
        let expected = Result { () throws(WireDecodingError) in try WireEnvelope.decode(bytes) }
        let agrees: Bool
        var plain: Bool?
        switch (read(bytes, strings: strings), expected) {
        case (.failure(let error), .failure(let expectedError)):
            agrees = error == expectedError
        case (.success(.other(let envelope)), .success(let decoded)):
            agrees = envelope == decoded
            plain = false
        case (.success(.activityReply(let correlationID, let activity)), .success(let decoded)):
            if case .continueReply(let reply) = decoded.body, case .activity(let wire) = reply.result {
                agrees = correlationID == decoded.correlationID && same(activity, wire)
            } else {
                agrees = false
            }
            plain = true
        case (.success(.streamFrame(let frame)), .success(let decoded)):
            // Only an untraced frame the hand-written reader takes comes alone.
            agrees = decoded.body == .streamFrame(frame) && decoded.traceID.isEmpty && FastEnvelopeCodingTests.fast(bytes) != nil
            plain = false
        default:
            agrees = false
        }
        #expect(agrees, "bytes \(bytes)", sourceLocation: sourceLocation)
        return agrees ? plain : nil
    }

    /// A random envelope as `FastEnvelopeCodingTests` makes them, an activity reply's userInfo
    /// sometimes with a value of no kind (null) or a URL that does not parse (the node's to refuse),
    /// and sometimes an error reply or a field given twice.
    static func randomEnvelope(_ random: inout SplitMix) throws -> (bytes: [UInt8], readPlain: Bool) {
        var envelope = FastEnvelopeCodingTests.randomEnvelope(&random)
        guard case .continueReply(var reply) = envelope.body, case .activity(var activity) = reply.result else {
            return (try envelope.serializedBytes(), false)
        }
        switch random.next() % 6 {
        case 0: activity.userInfo["null"] = WireValue()
        case 1: activity.userInfo["nested null"] = .with { $0.listValue = .with { $0.values = [WireValue(), .with { $0.boolValue = true }] } }
        case 2: activity.userInfo["no url"] = .with { $0.urlValue = "http://[not a url" }
        case 3:
            reply.error = .with { $0.code = .alreadyContinued; $0.message = "once" }
            envelope.body = .continueReply(reply)
            return (try envelope.serializedBytes(), false)
        case 4:
            // The reply given again: protobuf merges the two (its title the second's).
            reply.activity = activity
            envelope.body = .continueReply(reply)
            let again = WireEnvelope.with { $0.continueReply = .with { $0.activity = .with { $0.title = "again" } } }
            return (try envelope.serializedBytes() + (try again.serializedBytes() as [UInt8]), false)
        default: break
        }
        reply.activity = activity
        envelope.body = .continueReply(reply)
        return (try envelope.serializedBytes(), true)
    }

    @Test("random envelopes: every activity reply read in plain values, null values and unparseable URLs among them; an error reply, a reply given twice and every other body whole, as decode reads them")
    func randomEnvelopes() throws {
        var random = SplitMix(seed: 0x9E91_7AC7)
        var plain = 0, replies = 0
        for round in 0..<1_000 {
            let (bytes, readPlain) = try Self.randomEnvelope(&random)
            let read = Self.expectAgreement(bytes)
            #expect(read == readPlain, "round \(round): \(bytes)")
            if readPlain { replies += 1 }
            if read == true { plain += 1 }
        }
        #expect(plain == replies && replies > 100, "\(plain) of \(replies)")
    }

    @Test("with a table of the strings that repeat, the reply and the request readers read what decode reads, replies and requests alike")
    func repeatedStrings() throws {
        var random = SplitMix(seed: 0x5791_1165)
        let strings = WireStrings()
        var envelopes: [[UInt8]] = []
        for _ in 0..<200 { envelopes.append(try Self.randomEnvelope(&random).bytes) }
        // Each envelope twice, so that the second reading finds its strings in the table.
        for bytes in envelopes + envelopes + envelopes.map({ SplitMix.damage($0, &random) }) {
            Self.expectAgreement(bytes, strings: strings)
            Self.expectServerAgreement(bytes, strings: strings)
        }
        #expect(strings.hits > 500, "\(strings.hits) strings found in the table")
    }

    @Test("a userInfo key given twice in a reply keeps its last value, as decode's map does; a null last value leaves it null")
    func keyGivenTwice() throws {
        for last in [WireValue.with { $0.stringValue = "b" }, WireValue()] {
            var first = Fixtures.activity
            first.userInfo["k"] = .with { $0.stringValue = "a" }
            // Two encodings of one message run together are one message: the second's entry comes last.
            let activity: [UInt8] = try first.serializedBytes() + (try WireActivity.with { $0.userInfo = ["k": last] }.serializedBytes() as [UInt8])
            let bytes = WireEnvelope.encoded(continueReplyActivity: activity, sender: Fixtures.node, sequence: 1, correlationID: 9)
            #expect(Self.expectAgreement(bytes) == true)
            guard case .success(.activityReply(_, let plain)) = Self.read(bytes) else { Issue.record("read in plain values"); continue }
            #expect(plain.userInfo.filter { $0.key == "k" }.map(\.value) == [.string("a"), Self.plain(last)])
        }
    }

    /// For any bytes, the ROUTER's reader answers as decode does: the same error, the same
    /// envelope, a continue request's fields. Whether it read a request in its parts.
    @discardableResult
    static func expectServerAgreement(_ bytes: [UInt8], strings: WireStrings? = nil, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        let expected = Result { () throws(WireDecodingError) in try WireEnvelope.decode(bytes) }
        let read = bytes.withUnsafeBytes { raw in Result { () throws(WireDecodingError) in try WireServerEnvelope.decode(raw, strings: strings) } }
        let agrees: Bool
        var request = false
        switch (read, expected) {
        case (.failure(let error), .failure(let expectedError)):
            agrees = error == expectedError
        case (.success(.other(let envelope)), .success(let decoded)):
            let isRequest = if case .continueRequest = decoded.body { true } else { false }
            // A request goes whole only when the hand-written reader leaves it to SwiftProtobuf.
            agrees = envelope == decoded && !(isRequest && FastEnvelopeCodingTests.fast(bytes) != nil)
        case (.success(.continueRequest(let header, let body)), .success(let decoded)):
            agrees = decoded.body == .continueRequest(body) && header.correlationID == decoded.correlationID
                && header.sender == decoded.sender && header.traceID == decoded.traceID
            request = true
        case (.success(.streamFrame(let frame, let sender)), .success(let decoded)):
            agrees = decoded.body == .streamFrame(frame) && sender == decoded.sender && decoded.traceID.isEmpty
                && FastEnvelopeCodingTests.fast(bytes) != nil
        default:
            agrees = false
        }
        #expect(agrees, "bytes \(bytes)", sourceLocation: sourceLocation)
        return request
    }

    @Test("the ROUTER's reader answers as decode does, every continue request in its parts, with or without a table of repeated strings; damaged bytes too")
    func requests() throws {
        var random = SplitMix(seed: 0x0E0_5E7F)
        let strings = WireStrings()
        var requests = 0, read = 0
        for round in 0..<600 {
            let envelope = FastEnvelopeCodingTests.randomEnvelope(&random)
            let bytes: [UInt8] = try envelope.serializedBytes()
            if case .continueRequest = envelope.body { requests += 1 }
            if Self.expectServerAgreement(bytes, strings: round % 2 == 0 ? strings : nil) { read += 1 }
            for _ in 0..<10 { Self.expectServerAgreement(SplitMix.damage(bytes, &random), strings: strings) }
        }
        #expect(read == requests && requests > 80, "\(read) of \(requests)")
    }

    @Test("a stream's data and credit frames come alone to both readers, with the request's sender at the ROUTER; traced ones, and the rarer kinds, whole")
    func streamFrames() throws {
        var data = WireStreamData()
        data.offset = 262_144
        data.totalLength = 1 << 30
        var credit = WireStreamCredit()
        credit.chunks = 4
        credit.acknowledgedOffset = 1 << 20
        var open = WireStreamOpen()
        open.activityID = "A"
        for (kind, alone) in [(WireStreamFrame.OneOf_Kind.data(data), true), (.credit(credit), true), (.open(open), false)] {
            for traceID in ["", "4bf92f3577b34da6a3ce929d0e0e4736"] {
                var frame = WireStreamFrame()
                frame.streamID = 7
                frame.kind = kind
                var envelope = WireEnvelope()
                envelope.protocolVersion = WireProtocol.version
                envelope.sender = Fixtures.node
                envelope.traceID = traceID
                envelope.body = .streamFrame(frame)
                let bytes: [UInt8] = try envelope.serializedBytes()
                let expected = alone && traceID.isEmpty
                let reply = Self.read(bytes)
                if case .success(.streamFrame(let read)) = reply { #expect(expected && read == frame) } else { #expect(!expected, "\(kind)") }
                let server = bytes.withUnsafeBytes { raw in Result { () throws(WireDecodingError) in try WireServerEnvelope.decode(raw) } }
                if case .success(.streamFrame(let read, let sender)) = server {
                    #expect(expected && read == frame && sender == Fixtures.node)
                } else {
                    #expect(!expected, "\(kind)")
                }
                Self.expectAgreement(bytes)
                Self.expectServerAgreement(bytes)
            }
        }
    }

    @Test("damaged, extended and concatenated envelopes: the reply reader gives decode's answer or error")
    func damagedEnvelopes() throws {
        var random = SplitMix(seed: 0x0DA3_A6ED)
        var checked = 0, plain = 0
        for _ in 0..<250 {
            let bytes = try Self.randomEnvelope(&random).bytes
            let second = try Self.randomEnvelope(&random).bytes
            Self.expectAgreement(bytes + second)
            Self.expectAgreement(bytes + BusSummaryTests.unknownField(&random))
            for _ in 0..<40 {
                checked += 1
                if Self.expectAgreement(SplitMix.damage(bytes, &random)) == true { plain += 1 }
            }
        }
        // Damage must leave some replies whole enough to read in plain values, or this proves little.
        #expect(plain > checked / 100 && plain < checked / 2, "\(plain) of \(checked) read in plain values")
        var newer = FastEnvelopeCodingTests.randomEnvelope(&random)
        newer.body = .continueReply(.with { $0.activity = Fixtures.activity })
        newer.protocolVersion = WireProtocol.version + 1
        guard case .failure(let error) = Self.read(try newer.serializedBytes()) else { Issue.record("a newer version must be refused"); return }
        #expect(error == .unsupportedProtocolVersion(WireProtocol.version + 1))
    }
}
