// Hand-written helpers around the generated wire types. Everything else in this directory is
// generated from Proto/ by Proto/generate.sh (the *.pb.swift files: DO NOT EDIT them).

import Foundation
import SwiftProtobuf

/// The Handoff wire protocol as spoken by this build.
public enum WireProtocol {
    /// The `protocolVersion` this build stamps on every ``WireEnvelope`` and the newest one it
    /// accepts. Bumped only for incompatible changes to the contract in `Proto/`.
    public static let version: UInt32 = 1
}

// MARK: - Timestamps

extension WireTimestamp {
    /// Creates a timestamp for a date, normalized like `google.protobuf.Timestamp`
    /// (`nanos` in `0 ..< 1_000_000_000`, also for dates before 1970).
    ///
    /// - Parameter date: The point in time, rounded to the nearest nanosecond that `Date` resolves.
    public init(_ date: Date) {
        let interval = date.timeIntervalSince1970
        var seconds = interval.rounded(.down)
        var nanos = ((interval - seconds) * 1_000_000_000).rounded()
        if nanos >= 1_000_000_000 {
            seconds += 1
            nanos -= 1_000_000_000
        }
        self.init()
        self.seconds = Int64(seconds)
        self.nanos = Int32(nanos)
    }

    /// The timestamp as a `Date` (sub-microsecond precision is limited by `Date`'s `Double`).
    public var date: Date { Self.date(seconds: seconds, nanos: nanos) }

    /// The `Date` of a timestamp's two fields.
    public static func date(seconds: Int64, nanos: Int32) -> Date {
        Date(timeIntervalSince1970: Double(seconds) + Double(nanos) / 1_000_000_000)
    }
}

// MARK: - Envelopes

/// Why ``WireEnvelope/decode(_:)`` rejected a message.
public enum WireDecodingError: Error, Equatable, CustomStringConvertible {
    /// The bytes are not a valid envelope: truncated, a wrong wire type, invalid UTF-8 in a string,
    /// nesting too deep, ... The associated value is SwiftProtobuf's reason.
    case malformed(BinaryDecodingError)
    /// `protocolVersion` is 0 (missing) or newer than ``WireProtocol/version``.
    case unsupportedProtocolVersion(UInt32)
    /// The envelope has no body, or only a body kind this build does not know.
    case missingBody

    /// The error to send back to the peer whose message was rejected.
    public var wireError: WireError {
        var error = WireError()
        error.message = description
        switch self {
        case .malformed, .missingBody:
            error.code = .malformedMessage
        case .unsupportedProtocolVersion:
            error.code = .unsupportedProtocolVersion
            error.details["supported_version"] = String(WireProtocol.version)
        }
        return error
    }

    public var description: String {
        switch self {
        case .malformed(let reason):
            "malformed envelope: \(reason)"
        case .unsupportedProtocolVersion(0):
            "envelope has no protocol_version"
        case .unsupportedProtocolVersion(let version):
            "unsupported protocol_version \(version) (this node speaks \(WireProtocol.version))"
        case .missingBody:
            "envelope has no body this node understands"
        }
    }
}

extension WireEnvelope {
    /// Creates an envelope stamped with ``WireProtocol/version``.
    ///
    /// - Parameters:
    ///   - body: What the envelope carries.
    ///   - sender: The sending node.
    ///   - sequence: The sender's next sequence number (strictly increasing per sender).
    ///   - correlationID: Matches a reply to its request; 0 when not part of an exchange.
    ///   - sentAt: The send time; defaults to now.
    public init(
        body: OneOf_Body,
        sender: WireNodeRef,
        sequence: UInt64,
        correlationID: UInt64 = 0,
        sentAt: Date = Date()
    ) {
        self.init()
        self.protocolVersion = WireProtocol.version
        self.correlationID = correlationID
        self.sender = sender
        self.sentAt = WireTimestamp(sentAt)
        self.sequence = sequence
        self.body = body
    }

    /// Decodes and validates an envelope received from a socket.
    ///
    /// Unknown fields (from newer peers) are kept and survive re-encoding.
    ///
    /// - Parameter bytes: One complete message in protobuf binary format, e.g. `[UInt8]` or `Data`.
    /// - Returns: The envelope; its `protocolVersion` is supported and its `body` is set.
    /// - Throws: ``WireDecodingError/malformed(_:)`` for bytes that are not an envelope,
    ///   ``WireDecodingError/unsupportedProtocolVersion(_:)`` for a missing or too-new version,
    ///   ``WireDecodingError/missingBody`` for an envelope without a known body.
    public static func decode(
        _ bytes: some SwiftProtobufContiguousBytes
    ) throws(WireDecodingError) -> WireEnvelope {
        // The hot bodies read by hand; anything else, and every error, from SwiftProtobuf, which
        // reads the caller's own bytes (a stream frame's envelope is not copied first).
        let fast = bytes.withUnsafeBytes(FastEnvelopeDecoder.decode)
        return try validated { try fast ?? WireEnvelope(serializedBytes: bytes) }
    }

    /// Decodes and validates an envelope from bytes in place (a received frame's), as
    /// ``decode(_:)`` does.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(WireDecodingError) -> WireEnvelope {
        try validated { try FastEnvelopeDecoder.decode(bytes) ?? WireEnvelope(serializedBytes: Array(bytes)) }
    }

    /// What a one-pass reader made of `bytes` (``FastEnvelopeDecoder/Decoded``), checked as
    /// ``decode(_:)-(UnsafeRawBufferPointer)`` checks an envelope: its kind in plain values with its
    /// version checked, handed to `plain`; any other envelope validated, or (`nil`: bytes the
    /// reader left) read by SwiftProtobuf and validated, handed to `other`. So the readers accept
    /// and reject what decode does, with the same errors.
    static func validated<Plain, Read>(
        _ fast: FastEnvelopeDecoder.Decoded<Plain>?, of bytes: UnsafeRawBufferPointer, plain: (Plain) -> Read, other: (WireEnvelope) -> Read
    ) throws(WireDecodingError) -> Read {
        switch fast {
        case .plain(let version, let value)?:
            try checkProtocolVersion(version)
            return plain(value)
        case .envelope(let envelope)?:
            return other(try validated { envelope })
        case nil:
            return other(try validated { try WireEnvelope(serializedBytes: Array(bytes)) })
        }
    }

    /// The envelope `decode` gives, its decoding errors and the envelope's own checks as
    /// ``WireDecodingError``s.
    static func validated(_ decode: () throws -> WireEnvelope) throws(WireDecodingError) -> WireEnvelope {
        let envelope: WireEnvelope
        do {
            envelope = try decode()
        } catch let error as BinaryDecodingError {
            throw .malformed(error)
        } catch {
            // SwiftProtobuf documents BinaryDecodingError as the only error here.
            throw .malformed(.malformedProtobuf)
        }
        try checkProtocolVersion(envelope.protocolVersion)
        guard envelope.body != nil else {
            throw .missingBody
        }
        return envelope
    }

    /// An envelope's `protocolVersion` is set and not newer than this build's.
    static func checkProtocolVersion(_ version: UInt32) throws(WireDecodingError) {
        guard version != 0, version <= WireProtocol.version else { throw .unsupportedProtocolVersion(version) }
    }
}
