import Foundation
import HandoffWire
import SwiftProtobuf
import Testing

@Suite struct DecodingTests {
    /// Bytes of a valid envelope carrying the fixture advertisement.
    func advertisementBytes() throws -> [UInt8] {
        try Fixtures.envelope(.advertisement(Fixtures.advertisement)).serializedBytes()
    }

    /// Expects `decode` to fail with exactly `expected`.
    func expectRejected(_ bytes: [UInt8], _ expected: WireDecodingError, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let envelope = try WireEnvelope.decode(bytes)
            Issue.record("decoded \(envelope) instead of failing with \(expected)", sourceLocation: sourceLocation)
        } catch {
            // `error` is statically a WireDecodingError: decode uses typed throws.
            #expect(error == expected, sourceLocation: sourceLocation)
        }
    }

    @Test func validEnvelopeIsAccepted() throws {
        let envelope = try WireEnvelope.decode(advertisementBytes())
        #expect(envelope.advertisement == Fixtures.advertisement)
    }

    @Test func truncatedBytesAreRejected() throws {
        let bytes = try advertisementBytes()
        expectRejected(Array(bytes.dropLast()), .malformed(.truncated))
        expectRejected(Array(bytes.prefix(bytes.count / 2)), .malformed(.truncated))
    }

    @Test func invalidWireTypeIsRejected() {
        // Wire types 6 and 7 do not exist; 4 (end group) without a matching start is invalid.
        expectRejected([0x08, 0x01, 0x0E, 0x01], .malformed(.malformedProtobuf))
        expectRejected([0x08, 0x01, 0x0F, 0x01], .malformed(.malformedProtobuf))
        expectRejected([0x08, 0x01, 0x54], .malformed(.malformedProtobuf))
    }

    @Test func mismatchedWireTypeOfAKnownFieldIsRejected() {
        // Per the protobuf spec a known field number with another (valid) wire type is treated as
        // an unknown field, so the field counts as absent and the envelope fails validation.
        // Field 1 (protocol_version, a varint) sent as a 32-bit fixed value:
        expectRejected([0x0D, 0x01, 0x00, 0x00, 0x00, 0x52, 0x00], .unsupportedProtocolVersion(0))
        // Field 10 (advertisement, a message) sent as a varint:
        expectRejected([0x08, 0x01, 0x50, 0x01], .missingBody)
    }

    @Test func invalidUTF8IsRejected() {
        // protocol_version = 1, advertisement { title = 0xFF 0xFE }.
        expectRejected([0x08, 0x01, 0x52, 0x04, 0x1A, 0x02, 0xFF, 0xFE], .malformed(.invalidUTF8))
        // The same with valid UTF-8 ("hi") decodes, so the bytes above differ only in the encoding.
        let envelope = try? WireEnvelope.decode([0x08, 0x01, 0x52, 0x04, 0x1A, 0x02, 0x68, 0x69] as [UInt8])
        #expect(envelope?.advertisement.title == "hi")
    }

    @Test func missingProtocolVersionIsRejected() throws {
        var envelope = Fixtures.envelope(.advertisement(Fixtures.advertisement))
        envelope.protocolVersion = 0
        expectRejected(try envelope.serializedBytes(), .unsupportedProtocolVersion(0))
    }

    @Test(arguments: [WireProtocol.version + 1, 1_000, UInt32.max])
    func newerProtocolVersionIsRejected(version: UInt32) throws {
        var envelope = Fixtures.envelope(.advertisement(Fixtures.advertisement))
        envelope.protocolVersion = version
        expectRejected(try envelope.serializedBytes(), .unsupportedProtocolVersion(version))
    }

    @Test func envelopeWithoutBodyIsRejected() throws {
        var envelope = Fixtures.envelope(.advertisement(Fixtures.advertisement))
        envelope.body = nil
        expectRejected(try envelope.serializedBytes(), .missingBody)
        expectRejected([], .unsupportedProtocolVersion(0))
        expectRejected([0x08, 0x01], .missingBody)
        // A body kind from a future version (field 29) is unknown here: no body we can handle.
        expectRejected([0x08, 0x01, 0xEA, 0x01, 0x00], .missingBody)
    }

    @Test func rejectionsMapToWireErrors() {
        #expect(WireDecodingError.malformed(.truncated).wireError.code == .malformedMessage)
        #expect(WireDecodingError.missingBody.wireError.code == .malformedMessage)
        let unsupported = WireDecodingError.unsupportedProtocolVersion(2).wireError
        #expect(unsupported.code == .unsupportedProtocolVersion)
        #expect(unsupported.details["supported_version"] == "1")
        #expect(unsupported.message.contains("2"))
    }

    @Test func errorCodesKeepTheirWireNumbers() {
        #expect(WireErrorCode.handoffFailed.rawValue == 1)
        #expect(WireErrorCode.connectionUnavailable.rawValue == 2)
        #expect(WireErrorCode.remoteApplicationTimedOut.rawValue == 3)
        #expect(WireErrorCode.userInfoTooLarge.rawValue == 4)
        #expect(WireErrorCode.activityNotFound.rawValue == 10)
        #expect(WireErrorCode.malformedMessage.rawValue == 20)
        #expect(WireErrorCode.streamsNotSupported.rawValue == 30)
        #expect(WireErrorCode.peerLost.rawValue == 40)
        #expect(WireErrorCode.replayedMessage.rawValue == 52)
    }
}

@Suite struct CompatibilityTests {
    /// A typical bus message: the fixture advertisement in an envelope.
    @Test func advertisementEnvelopeIsSmall() throws {
        let bytes: [UInt8] = try Fixtures.envelope(.advertisement(Fixtures.advertisement)).serializedBytes()
        // Measured: 370 bytes (313 without team_id, webpage_url and keywords). Most of it is text:
        // two UUIDs, the node (as sender and as origin, 78 bytes each), endpoint, URL, title.
        // The bound catches accidental growth (such as user_info creeping onto the bus).
        #expect(bytes.count <= 400, "advertisement envelope is \(bytes.count) bytes")

        var minimal = Fixtures.advertisement
        minimal.teamID = ""
        minimal.webpageURL = ""
        minimal.keywords = []
        let minimalBytes: [UInt8] = try Fixtures.envelope(.advertisement(minimal)).serializedBytes()
        #expect(minimalBytes.count <= 340, "minimal advertisement envelope is \(minimalBytes.count) bytes")
        // No user_info travels on the bus.
        #expect(bytes.count < (try Fixtures.activity.serializedBytes() as [UInt8]).count)
    }

    /// Bytes a future version might add: field 40 (varint 300) and field 41 (string "future").
    static let futureFields: [UInt8] = [0xC0, 0x02, 0xAC, 0x02, 0xCA, 0x02, 0x06] + Array("future".utf8)

    @Test func unknownFieldsFromANewerVersionSurvive() throws {
        // A newer advertisement: today's fields followed by two fields we do not know.
        let futureAd: [UInt8] = try Fixtures.advertisement.serializedBytes() + Self.futureFields
        // A newer envelope: an unknown header field (6) before the body.
        var future: [UInt8] = [0x08, 0x01, 0x30, 0x07]
        future += [0x52] + varint(futureAd.count) + futureAd

        let envelope = try WireEnvelope.decode(future)
        #expect(envelope.advertisement.title == Fixtures.advertisement.title)
        #expect(envelope.advertisement.unknownFields.data == Data(Self.futureFields))
        #expect(envelope.unknownFields.data == Data([0x30, 0x07]))

        // Relaying the envelope keeps every byte of the newer fields.
        let reencoded: [UInt8] = try envelope.serializedBytes()
        #expect(reencoded.count == future.count)
        let again = try WireEnvelope.decode(reencoded)
        #expect(again == envelope)
        #expect(again.advertisement.unknownFields.data == Data(Self.futureFields))
    }

    @Test func unknownEnumValuesSurvive() throws {
        // Withdrawal.reason = 9 and Error.code = 77 do not exist yet.
        var withdrawal = WireWithdrawal()
        withdrawal.activityID = "x"
        withdrawal.reason = .UNRECOGNIZED(9)
        var error = WireError()
        error.code = .UNRECOGNIZED(77)
        let decoded = try WireEnvelope.decode(try WireEnvelope(
            body: .withdrawal(withdrawal), sender: Fixtures.node, sequence: 1
        ).serializedBytes() as [UInt8])
        #expect(decoded.withdrawal.reason == .UNRECOGNIZED(9))
        #expect(decoded.withdrawal.reason.rawValue == 9)
        #expect(try error.roundTripped().code.rawValue == 77)
    }

    func varint(_ value: Int) -> [UInt8] {
        var value = UInt64(value)
        var bytes: [UInt8] = []
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
        return bytes
    }
}
