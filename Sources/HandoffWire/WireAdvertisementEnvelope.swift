import Foundation
import SwiftProtobuf

/// An advertisement's fields in plain values: `WireAdvertisement` (wire.proto, `Advertisement`)
/// without its storage object. A generated message with one copies its empty default storage at
/// the first field set, and goes through that object for every field read after; a follower hears
/// an advertisement for every activity of the bus, and reads each whole once.
public struct WirePlainAdvertisement: Sendable, Equatable, WireAdvertisementFields {
    public var activityID = ""
    public var activityType = ""
    public var title = ""
    /// `nil` when the advertisement names no origin (the generated message's `hasOrigin` false).
    public var origin: WireNodeRef?
    public var continueEndpoint = ""
    public var version: UInt64 = 0
    public var expiresAt: WireTimestamp?
    public var leaseMs: UInt32 = 0
    public var supportsContinuationStreams = false
    public var teamID = ""
    public var webpageURL = ""
    public var keywords: [String] = []
    public var updatedAt: WireTimestamp?

    public init() {}
}

/// An Advertisement's fields as both of its forms give them (the generated `WireAdvertisement`,
/// the plain `WirePlainAdvertisement`): what reads or writes one whole is written once, over this.
public protocol WireAdvertisementFields {
    var activityID: String { get }
    var activityType: String { get }
    var title: String { get }
    /// The origin; `nil` when it names none.
    var originIfSet: WireNodeRef? { get }
    var continueEndpoint: String { get }
    var version: UInt64 { get }
    var expiresAtIfSet: WireTimestamp? { get }
    var leaseMs: UInt32 { get }
    var supportsContinuationStreams: Bool { get }
    var teamID: String { get }
    var webpageURL: String { get }
    var keywords: [String] { get }
    var updatedAtIfSet: WireTimestamp? { get }
}

extension WirePlainAdvertisement {
    /// The plain values of an advertisement of either form.
    public init(_ fields: some WireAdvertisementFields) {
        self.init()
        activityID = fields.activityID
        activityType = fields.activityType
        title = fields.title
        origin = fields.originIfSet
        continueEndpoint = fields.continueEndpoint
        version = fields.version
        expiresAt = fields.expiresAtIfSet
        leaseMs = fields.leaseMs
        supportsContinuationStreams = fields.supportsContinuationStreams
        teamID = fields.teamID
        webpageURL = fields.webpageURL
        keywords = fields.keywords
        updatedAt = fields.updatedAtIfSet
    }

    public var originIfSet: WireNodeRef? { origin }
    public var expiresAtIfSet: WireTimestamp? { expiresAt }
    public var updatedAtIfSet: WireTimestamp? { updatedAt }
}

extension WireAdvertisement: WireAdvertisementFields {
    // (Each read of a message field of a generated message copies it: read once each.)
    public var originIfSet: WireNodeRef? { hasOrigin ? origin : nil }
    public var expiresAtIfSet: WireTimestamp? { hasExpiresAt ? expiresAt : nil }
    public var updatedAtIfSet: WireTimestamp? { hasUpdatedAt ? updatedAt : nil }
}

extension WireAdvertisement {
    /// The generated message holding `plain`'s fields.
    public init(_ plain: WirePlainAdvertisement) {
        self.init()
        activityID = plain.activityID
        activityType = plain.activityType
        title = plain.title
        if let origin = plain.origin { self.origin = origin }
        continueEndpoint = plain.continueEndpoint
        version = plain.version
        if let expiresAt = plain.expiresAt { self.expiresAt = expiresAt }
        leaseMs = plain.leaseMs
        supportsContinuationStreams = plain.supportsContinuationStreams
        teamID = plain.teamID
        webpageURL = plain.webpageURL
        if !plain.keywords.isEmpty { keywords = plain.keywords }
        if let updatedAt = plain.updatedAt { self.updatedAt = updatedAt }
    }
}

/// An envelope holding an untraced advertisement, read from its bytes into plain values: what a
/// follower takes from the bus most, without the two storage objects (the envelope's and the
/// advertisement's) a ``WireEnvelope`` would make and copy.
public struct WireAdvertisementEnvelope: Sendable, Equatable {
    /// The sender; `nil` when the envelope names none.
    public var sender: WireNodeRef?
    public var sentAt: WireTimestamp?
    public var sequence: UInt64
    public var advertisement: WirePlainAdvertisement
}

/// A bus message's envelope as a follower takes it: an untraced advertisement in plain values,
/// anything else (a traced advertisement among them) as the generated envelope.
public enum WireBusEnvelope: Sendable, Equatable {
    case advertisement(WireAdvertisementEnvelope)
    case other(WireEnvelope)

    /// Decodes and validates an envelope received from the bus, reading its bytes once: accepts
    /// and rejects exactly what `WireEnvelope.decode` does, with the same errors, and
    /// the envelope it gives is decode's, an untraced advertisement's in plain values
    /// (FastEnvelopeCodingTests holds the two to each other).
    ///
    /// - Parameter strings: Where strings that repeat from message to message (ids, names, hosts,
    ///   types, endpoints) are looked up first and kept (``WireStrings``); the reader's own table.
    public static func decode(_ bytes: UnsafeRawBufferPointer, strings: WireStrings? = nil) throws(WireDecodingError) -> WireBusEnvelope {
        try WireEnvelope.validated(FastEnvelopeDecoder.decodeForBus(bytes, strings: strings), of: bytes, plain: Self.advertisement, other: Self.other)
    }
}
