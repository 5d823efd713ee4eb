import Foundation
import SwiftProtobuf

/// A userInfo value (activity.proto, `Value`) in plain values: what a continue reply's userInfo is
/// read into instead of generated `WireValue`s, each a storage object copied at its first field
/// set.
package indirect enum WirePlainValue: Sendable, Equatable {
    /// No kind set: null, which the node leaves out (activity.proto says so).
    case null
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case bytes(Data)
    /// As sent: whether it parses is the node's to say.
    case url(String)
    case date(WireTimestamp)
    case list([WirePlainValue])
    case map([String: WirePlainValue])
}

/// An activity in a continue reply (activity.proto, `Activity`), in plain values: what
/// ``WireReplyEnvelope`` reads where the generated `WireActivity` went before.
package struct WirePlainActivity: Sendable {
    package var activityID = ""
    package var activityType = ""
    package var title = ""
    /// The entries as read, in order: a key given twice keeps its last value once they make a
    /// map (as in protobuf). Made a map once, by whoever takes them (the node, as its own values).
    package var userInfo: [(key: String, value: WirePlainValue)] = []
    package var requiredUserInfoKeys: [String] = []
    package var webpageURL = ""
    package var keywords: [String] = []
    package var expiration: WireTimestamp?
    package var eligibleForHandoff = false
    package var supportsContinuationStreams = false
    package var teamID = ""
    package var origin: WireNodeRef?
    package var version: UInt64 = 0
    package var updatedAt: WireTimestamp?
    package var document: WireDocumentRef?
    /// The activity's bytes as they came, for whoever needs it whole (a plugin takes it as bytes).
    package var bytes: [UInt8] = []

    package init() {}
}

/// A message a continuing node's DEALER receives, read once: a continue reply holding an activity
/// in plain values, a stream's chunk or credit as its frame alone, anything else as the generated
/// envelope.
package enum WireReplyEnvelope: Sendable {
    case activityReply(correlationID: UInt64, WirePlainActivity)
    /// A stream's data or credit frame in an untraced envelope: all a continuing node takes from
    /// its envelope (built whole, the envelope was a storage object made and freed for each chunk).
    case streamFrame(WireStreamFrame)
    case other(WireEnvelope)

    /// Decodes and validates an envelope a continuing node received: accepts and rejects exactly
    /// what `WireEnvelope.decode` does, with the same errors; an activity reply's activity holds
    /// what decode's does (ContinueReadersTests holds the two to each other).
    /// - Parameter strings: Where strings that repeat from message to message (ids, types, the
    ///   sender's and origin's names) are looked up first and kept (``WireStrings``).
    package static func decode(_ bytes: UnsafeRawBufferPointer, strings: WireStrings? = nil) throws(WireDecodingError) -> Self {
        try WireEnvelope.validated(
            FastEnvelopeDecoder.decodeForClient(bytes, strings: strings), of: bytes, plain: { $0 }, other: Self.other)
    }
}

// MARK: - To and from generated

extension WireActivity {
    /// The generated message of an activity read in plain values: what SwiftProtobuf reads from
    /// the same bytes (ContinueReadersTests).
    init(_ plain: WirePlainActivity) {
        self.init()
        activityID = plain.activityID
        activityType = plain.activityType
        title = plain.title
        if !plain.userInfo.isEmpty {
            userInfo = Dictionary(plain.userInfo.lazy.map { ($0.key, WireValue($0.value)) }, uniquingKeysWith: { _, last in last })
        }
        if !plain.requiredUserInfoKeys.isEmpty { requiredUserInfoKeys = plain.requiredUserInfoKeys }
        webpageURL = plain.webpageURL
        if !plain.keywords.isEmpty { keywords = plain.keywords }
        if let expiration = plain.expiration { self.expiration = expiration }
        eligibleForHandoff = plain.eligibleForHandoff
        supportsContinuationStreams = plain.supportsContinuationStreams
        teamID = plain.teamID
        if let origin = plain.origin { self.origin = origin }
        version = plain.version
        if let updatedAt = plain.updatedAt { self.updatedAt = updatedAt }
        if let document = plain.document { self.document = document }
    }
}

extension WireValue {
    /// The generated message of a value read in plain values.
    init(_ plain: WirePlainValue) {
        self.init()
        switch plain {
        case .null: break
        case .string(let string): stringValue = string
        case .int(let int): intValue = int
        case .double(let double): doubleValue = double
        case .bool(let bool): boolValue = bool
        case .bytes(let bytes): bytesValue = bytes
        case .url(let url): urlValue = url
        case .date(let time): dateValue = time
        case .list(let values): listValue = .with { $0.values = values.map(WireValue.init) }
        case .map(let entries): mapValue = .with { $0.entries = entries.mapValues(WireValue.init) }
        }
    }
}

extension WirePlainActivity {
    /// The plain values of a generated activity (one SwiftProtobuf read); `bytes` left empty.
    package init(_ wire: WireActivity) {
        self.init()
        activityID = wire.activityID
        activityType = wire.activityType
        title = wire.title
        userInfo = wire.userInfo.map { ($0.key, WirePlainValue($0.value)) }
        requiredUserInfoKeys = wire.requiredUserInfoKeys
        webpageURL = wire.webpageURL
        keywords = wire.keywords
        expiration = wire.hasExpiration ? wire.expiration : nil
        eligibleForHandoff = wire.eligibleForHandoff
        supportsContinuationStreams = wire.supportsContinuationStreams
        teamID = wire.teamID
        origin = wire.hasOrigin ? wire.origin : nil
        version = wire.version
        updatedAt = wire.hasUpdatedAt ? wire.updatedAt : nil
        document = wire.hasDocument ? wire.document : nil
    }
}

extension WirePlainValue {
    /// The plain value of a generated one.
    package init(_ wire: WireValue) {
        switch wire.kind {
        case .stringValue(let string): self = .string(string)
        case .intValue(let int): self = .int(int)
        case .doubleValue(let double): self = .double(double)
        case .boolValue(let bool): self = .bool(bool)
        case .bytesValue(let bytes): self = .bytes(bytes)
        case .urlValue(let url): self = .url(url)
        case .dateValue(let time): self = .date(time)
        case .listValue(let list): self = .list(list.values.map(WirePlainValue.init))
        case .mapValue(let map): self = .map(map.entries.mapValues(WirePlainValue.init))
        case nil: self = .null
        }
    }
}
