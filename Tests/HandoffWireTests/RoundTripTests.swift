import Foundation
import HandoffWire
import SwiftProtobuf
import Testing

@Suite struct RoundTripTests {
    @Test func activityWithEveryValueKindRoundTrips() throws {
        let activity = Fixtures.activity
        #expect(Fixtures.kinds(in: activity.userInfo.values)
            == ["string", "int", "double", "bool", "bytes", "url", "date", "list", "map"])

        let decoded = try activity.roundTripped()
        #expect(decoded == activity)
        // Spot-check deep values, not just equality of the whole message.
        #expect(decoded.userInfo["cursor"]?.intValue == -1_234_567_890_123)
        #expect(decoded.userInfo["digest"]?.bytesValue == Data([0x00, 0xFF, 0x10, 0x80]))
        #expect(decoded.userInfo["null"]?.kind == nil)
        let history = try #require(decoded.userInfo["history"]?.listValue.values)
        #expect(history.count == 3)
        #expect(history[1].mapValue.entries["tags"]?.listValue.values.map(\.stringValue) == ["a", "b"])
        #expect(decoded.userInfo["opened"]?.dateValue.date == Date(timeIntervalSince1970: 1_700_000_000.5))
        #expect(decoded.origin.host == "build-box.local")
        #expect(decoded.hasExpiration && decoded.version == 7)
    }

    @Test func everyEnvelopeBodyKindRoundTrips() throws {
        #expect(Set(Fixtures.bodies.map(Fixtures.caseName)).count == 10)
        for (index, body) in Fixtures.bodies.enumerated() {
            let envelope = Fixtures.envelope(body, correlationID: UInt64(index + 1))
            let bytes: [UInt8] = try envelope.serializedBytes()
            let decoded = try WireEnvelope.decode(bytes)
            #expect(decoded == envelope, "body \(Fixtures.caseName(body))")
            #expect(decoded.body == body)
            #expect(decoded.protocolVersion == WireProtocol.version)
            #expect(decoded.correlationID == UInt64(index + 1))
            #expect(decoded.sequence == 42)
            #expect(decoded.sender == Fixtures.node)
            #expect(decoded.sentAt.date == Fixtures.sentAt)
        }
    }

    @Test func everyStreamFrameKindRoundTrips() throws {
        let frames = Fixtures.streamFrames
        #expect(Set(frames.compactMap(\.kind).map(Fixtures.caseName)).count == 7)
        for frame in frames {
            let bytes: Data = try Fixtures.envelope(.streamFrame(frame)).serializedData()
            let decoded = try WireEnvelope.decode(bytes)
            #expect(decoded.streamFrame == frame)
            #expect(decoded.streamFrame.streamID == 9)
        }
        let open = try frames[0].roundTripped().open
        #expect(open.direction == .originToContinuer && open.window == 8 && open.expectedLength == 1_000_000)
        let end = try frames[3].roundTripped().end
        #expect(end.checksumAlgorithm == .crc32C && end.checksum == Data([0xDE, 0xAD, 0xBE, 0xEF]))
    }

    @Test func contactRoundTrips() throws {
        var contact = Contact()
        contact.id = "C0FFEE00-0000-4000-8000-000000000001"
        contact.firstName = "Zoë"
        contact.lastName = "Ørsted-Núñez"
        contact.phoneNumber = "+49 30 1234567"
        contact.email = "zoe@example.com"
        let decoded = try contact.roundTripped()
        #expect(decoded == contact)
        #expect(decoded.lastName == "Ørsted-Núñez")

        var list = ContactList()
        list.contacts = [contact, Contact()]
        #expect(try list.roundTripped() == list)
    }

    @Test func tenThousandContactsRoundTrip() throws {
        var list = ContactList()
        list.contacts = (0..<10_000).map { i in
            Contact.with {
                $0.id = String(format: "00000000-0000-4000-8000-%012d", i)
                $0.firstName = "First\(i)"
                $0.lastName = "Last\(i)"
                $0.phoneNumber = "+1 555 \(1_000_000 + i)"
                $0.email = "person\(i)@example.com"
            }
        }
        let bytes: [UInt8] = try list.serializedBytes()
        #expect(bytes.count > 10_000 * 60)
        let decoded = try ContactList(serializedBytes: bytes)
        #expect(decoded.contacts.count == 10_000)
        #expect(decoded.contacts[9_999].email == "person9999@example.com")
        #expect(decoded.contacts[1_234].id == "00000000-0000-4000-8000-000000001234")
        #expect(decoded == list)
    }
}

@Suite struct TimestampTests {
    @Test func dateConversionNormalizesLikeGoogleTimestamp() {
        let positive = WireTimestamp(Date(timeIntervalSince1970: 1_700_000_000.25))
        #expect(positive.seconds == 1_700_000_000 && positive.nanos == 250_000_000)

        let negative = WireTimestamp(Date(timeIntervalSince1970: -1.25))
        #expect(negative.seconds == -2 && negative.nanos == 750_000_000)
        #expect(negative.date == Date(timeIntervalSince1970: -1.25))

        let now = Date()
        #expect(abs(WireTimestamp(now).date.timeIntervalSince(now)) < 1e-6)
    }

    @Test func bytesAreGoogleProtobufTimestampBytes() throws {
        var timestamp = WireTimestamp()
        timestamp.seconds = 1_700_000_000
        timestamp.nanos = 5
        let bytes: [UInt8] = try timestamp.serializedBytes()
        let google = try Google_Protobuf_Timestamp(serializedBytes: bytes)
        #expect(google.seconds == 1_700_000_000 && google.nanos == 5)
        #expect(try google.serializedBytes() == bytes)
    }
}
