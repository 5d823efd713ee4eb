// Hand-written: the hot envelopes (an advertisement, a continue request, a continue reply holding
// an activity, a stream's data and credit frames) decoded without SwiftProtobuf's generic decoder, which was most of the CPU a node
// spent reading them (a continue reply's map of userInfo values above all).
//
// It takes only what it can read exactly as SwiftProtobuf would, and hands everything else to
// SwiftProtobuf: another body, a field it does not know (SwiftProtobuf keeps those), a message
// field or oneof member given twice (SwiftProtobuf merges those), a wire type that does not match,
// bad UTF-8, anything malformed. So for any bytes its answer, when it gives one, is the one
// SwiftProtobuf gives (FastEnvelopeCodingTests holds the two to each other over random and damaged
// envelopes), and errors are always SwiftProtobuf's.

import Foundation
import SwiftProtobuf

enum FastEnvelopeDecoder {
    /// The envelope, or `nil` to leave these bytes to SwiftProtobuf.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> WireEnvelope? {
        var read = Read()
        guard (try? envelope(ProtobufReader(bytes), into: &read)) != nil else { return nil }
        return read.generated
    }

    /// What a reader that keeps one kind of envelope in plain values (an untraced advertisement
    /// for the bus, a continue reply's activity, a continue request) made of an envelope's bytes;
    /// ``WireEnvelope/validated(_:of:plain:other:)`` checks it as decode would.
    enum Decoded<Plain> {
        /// That kind, in plain values; its envelope's version not yet checked.
        case plain(protocolVersion: UInt32, Plain)
        /// Any other envelope the reader takes, as generated.
        case envelope(WireEnvelope)
    }

    /// The envelope read once, an untraced advertisement left in plain values (moved out of what
    /// was read, not copied: a copy was a reference count for each string), anything else built;
    /// `nil` to leave these bytes to SwiftProtobuf.
    /// With `strings`, the strings that repeat from message to message are looked up there first.
    static func decodeForBus(_ bytes: UnsafeRawBufferPointer, strings: WireStrings? = nil) -> Decoded<WireAdvertisementEnvelope>? {
        var read = Read()
        guard (try? envelope(ProtobufReader(bytes, strings: strings), into: &read)) != nil else { return nil }
        // A traced one stays whole: tracing takes the envelope as it came.
        guard read.header.traceID.isEmpty, let advertisement = read.advertisement.take() else { return .envelope(read.generated) }
        let envelope = WireAdvertisementEnvelope(
            sender: read.header.sender.take(), sentAt: read.header.sentAt, sequence: read.header.sequence, advertisement: advertisement)
        return .plain(protocolVersion: read.header.protocolVersion, envelope)
    }

    // Below, every throw (the reader's errors and NotOnFastPath alike) means the same: the bytes
    // go to SwiftProtobuf.
    typealias Reader = ProtobufReader

    /// An envelope's own fields and its body, as read: an advertisement and a continue reply's
    /// activity in plain values (a generated `WireAdvertisement` or `WireActivity` copies its empty
    /// default storage object at its first field), the other hot bodies as generated.
    struct Read {
        var header = EnvelopeHeader(protocolVersion: 0, correlationID: 0, sender: nil, sentAt: nil, sequence: 0, traceID: "")
        var advertisement: WirePlainAdvertisement?
        var replyActivity: WirePlainActivity?
        var otherBody: OtherBody?

        /// What was read, as the generated envelope.
        var generated: WireEnvelope {
            var envelope = WireEnvelope()
            envelope.protocolVersion = header.protocolVersion
            envelope.correlationID = header.correlationID
            if let sender = header.sender { envelope.sender = sender }
            if let sentAt = header.sentAt { envelope.sentAt = sentAt }
            envelope.sequence = header.sequence
            envelope.traceID = header.traceID
            if let advertisement { envelope.body = .advertisement(WireAdvertisement(advertisement)) }
            if let replyActivity {
                var reply = WireContinueReply()
                reply.activity = WireActivity(replyActivity)
                envelope.body = .continueReply(reply)
            }
            switch otherBody {
            case .continueRequest(let request)?: envelope.body = .continueRequest(request)
            case .streamFrame(let frame)?: envelope.body = .streamFrame(frame)
            case .withdrawal(let withdrawal)?: envelope.body = .withdrawal(withdrawal)
            case .presence(let presence)?: envelope.body = .nodePresence(presence)
            case nil: break
            }
            return envelope
        }

        /// A stream frame read in an untraced envelope: all a node takes from such an envelope. A
        /// traced one stays whole: tracing takes the envelope as it came.
        var untracedStreamFrame: WireStreamFrame? {
            guard header.traceID.isEmpty, case .streamFrame(let frame)? = otherBody else { return nil }
            return frame
        }
    }

    enum OtherBody {
        case continueRequest(WireContinueRequest)
        case streamFrame(WireStreamFrame)
        case withdrawal(WireWithdrawal)
        case presence(WireNodePresence)
    }

    /// Reads into the caller's `read` (a fresh one): returned, it was copied out and the
    /// original destroyed, a reference count for each of its strings, twice.
    static func envelope(_ reader: Reader, into read: inout Read) throws {
        var reader = reader
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .varint): read.header.protocolVersion = UInt32(truncatingIfNeeded: try reader.varint())
            case (2, .varint): read.header.correlationID = try reader.varint()
            case (3, .lengthDelimited):
                read.header.sender = WireNodeRef()
                try node(reader.nested(reader.lengthDelimited()), into: &read.header.sender!)
            case (4, .lengthDelimited): read.header.sentAt = try timestamp(reader.nested(reader.lengthDelimited()))
            case (5, .varint): read.header.sequence = try reader.varint()
            case (6, .lengthDelimited): read.header.traceID = try reader.string()
            case (10, .lengthDelimited):
                try seen.body()
                // Read in place: a struct of a dozen strings returned and stored was a reference
                // count for each, twice.
                read.advertisement = WirePlainAdvertisement()
                try advertisement(reader.nested(reader.lengthDelimited()), into: &read.advertisement!)
            case (14, .lengthDelimited):
                try seen.body()
                read.otherBody = .continueRequest(try continueRequest(reader.nested(reader.lengthDelimited())))
            case (15, .lengthDelimited):
                try seen.body()
                read.replyActivity = WirePlainActivity()
                try replyActivity(reader.nested(reader.lengthDelimited()), into: &read.replyActivity!)
            case (13, .lengthDelimited):
                try seen.body()
                read.otherBody = .streamFrame(try streamFrame(reader.nested(reader.lengthDelimited())))
            case (11, .lengthDelimited):
                try seen.body()
                read.otherBody = .withdrawal(try withdrawal(reader.nested(reader.lengthDelimited())))
            case (12, .lengthDelimited):
                try seen.body()
                read.otherBody = .presence(try presence(reader.nested(reader.lengthDelimited())))
            default: throw NotOnFastPath()
            }
        }
    }

    static func node(_ reader: Reader) throws -> WireNodeRef {
        var node = WireNodeRef()
        try self.node(reader, into: &node)
        return node
    }

    /// Reads a node into a fresh one in place (as ``envelope(_:into:)``, for the same reason).
    static func node(_ reader: Reader, into node: inout WireNodeRef) throws {
        var reader = reader
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .lengthDelimited): node.nodeID = try reader.repeatedString()
            case (2, .lengthDelimited): node.name = try reader.repeatedString()
            case (3, .lengthDelimited): node.host = try reader.repeatedString()
            case (4, .lengthDelimited): node.publicKey = try reader.repeatedBytes()
            default: throw NotOnFastPath()
            }
        }
    }

    static func timestamp(_ reader: Reader) throws -> WireTimestamp {
        var reader = reader
        var time = WireTimestamp()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .varint): time.seconds = Int64(bitPattern: try reader.varint())
            case (2, .varint): time.nanos = Int32(truncatingIfNeeded: try reader.varint())
            default: throw NotOnFastPath()
            }
        }
        return time
    }

    private static func advertisement(_ reader: Reader, into advertisement: inout WirePlainAdvertisement) throws {
        var reader = reader
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            if number != 12 { try seen.first(number) }
            switch (number, type) {
            case (1, .lengthDelimited): advertisement.activityID = try reader.string()
            case (2, .lengthDelimited): advertisement.activityType = try reader.repeatedString()
            case (3, .lengthDelimited): advertisement.title = try reader.string()
            case (4, .lengthDelimited):
                advertisement.origin = WireNodeRef()
                try node(reader.nested(reader.lengthDelimited()), into: &advertisement.origin!)
            case (5, .lengthDelimited): advertisement.continueEndpoint = try reader.repeatedString()
            case (6, .varint): advertisement.version = try reader.varint()
            case (7, .lengthDelimited): advertisement.expiresAt = try timestamp(reader.nested(reader.lengthDelimited()))
            case (8, .varint): advertisement.leaseMs = UInt32(truncatingIfNeeded: try reader.varint())
            case (9, .varint): advertisement.supportsContinuationStreams = try reader.varint() != 0
            case (10, .lengthDelimited): advertisement.teamID = try reader.repeatedString()
            case (11, .lengthDelimited): advertisement.webpageURL = try reader.string()
            case (12, .lengthDelimited): advertisement.keywords.append(try reader.string())
            case (13, .lengthDelimited): advertisement.updatedAt = try timestamp(reader.nested(reader.lengthDelimited()))
            default: throw NotOnFastPath()
            }
        }
    }

    private static func continueRequest(_ reader: Reader) throws -> WireContinueRequest {
        var reader = reader
        var request = WireContinueRequest()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .lengthDelimited): request.activityID = try reader.repeatedString()
            case (2, .lengthDelimited): request.activityType = try reader.repeatedString()
            case (3, .varint): request.wantStreams = try reader.varint() != 0
            case (4, .varint): request.refresh = try reader.varint() != 0
            default: throw NotOnFastPath()
            }
        }
        return request
    }

    /// How many times field `number` occurs in the message `reader` reads.
    static func count(of number: Int, in reader: Reader) throws -> Int {
        var reader = reader, count = 0
        while let (field, type) = try reader.nextField() {
            if field == number { count += 1 }
            try reader.skip(type, number: field)
        }
        return count
    }

    static func document(_ reader: Reader) throws -> WireDocumentRef {
        var reader = reader
        var document = WireDocumentRef()
        var seen = SeenFields()
        while let (number, type) = try reader.nextField() {
            try seen.first(number)
            switch (number, type) {
            case (1, .lengthDelimited): document.url = try reader.string()
            case (2, .varint): document.version = try reader.varint()
            case (3, .lengthDelimited): document.sha256 = Data(try reader.lengthDelimited())
            case (4, .varint): document.size = try reader.varint()
            default: throw NotOnFastPath()
            }
        }
        return document
    }
}

/// Which fields of a message were read, so that one given twice goes to SwiftProtobuf (which
/// merges a message field given twice, and takes the last of a scalar: simpler to leave both).
struct SeenFields {
    private var fields: UInt32 = 0
    private var hasBody = false

    mutating func first(_ number: Int) throws(NotOnFastPath) {
        guard number < 32 else { throw NotOnFastPath() }
        let bit: UInt32 = 1 << UInt32(number)
        guard fields & bit == 0 else { throw NotOnFastPath() }
        fields |= bit
    }

    /// The envelope's body, a oneof: one member only.
    mutating func body() throws(NotOnFastPath) {
        guard !hasBody else { throw NotOnFastPath() }
        hasBody = true
    }
}
