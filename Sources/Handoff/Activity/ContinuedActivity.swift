import Foundation
import HandoffWire
import SwiftProtobuf

/// An activity continued from another node, with its full state.
///
/// Its fields live in one immutable object, as ``DiscoveredActivity``'s do: a continued activity is
/// handed from the reply to the restore handler, the delegate and the caller's result, and each copy
/// was a reference count for every string, set and map it holds.
public struct ContinuedActivity: Hashable, Sendable, Identifiable, CustomStringConvertible {
    private let fields: Fields
    /// The trace id its continue was traced with (``Node/continueActivity(_:wantingStreams:traceID:)``):
    /// the streams opened for it carry it too. Not part of its value (equality, hash).
    var traceID: String?

    /// The activity's id (the same on every node).
    public var id: String { fields.id }
    /// The activity's reverse-DNS type.
    public var activityType: String { fields.activityType }
    /// The activity's title.
    public var title: String { fields.title }
    /// The state to pick up from.
    public var userInfo: [String: UserInfoValue] { fields.userInfo }
    /// Keys the originator requires in ``userInfo`` (all present: checked on both sides).
    public var requiredUserInfoKeys: Set<String> { fields.requiredUserInfoKeys }
    /// Where to continue in a browser, if anywhere.
    public var webpageURL: URL? { fields.webpageURL }
    /// When the activity stops being offered, if ever.
    public var expirationDate: Date? { fields.expirationDate }
    /// Search keywords.
    public var keywords: Set<String> { fields.keywords }
    /// Whether continuation streams may be opened to the originator.
    public var supportsContinuationStreams: Bool { fields.supportsContinuationStreams }
    /// The originator's team id, if any.
    public var teamID: String? { fields.teamID }
    /// The node the activity was continued from.
    public var origin: NodeInfo { fields.origin }
    /// The activity's version when it was sent.
    public var version: UInt64 { fields.version }
    /// When the originator last changed it.
    public var updatedAt: Date { fields.updatedAt }
    /// Where the originator answers continue requests (and, later, stream requests).
    public var continueEndpoint: String { fields.continueEndpoint }
    /// The document the activity is about, if any: open it with ``Node/openDocument(of:into:)``.
    public var document: DocumentReference? { fields.document }
    /// The activity as it arrived, as the generated message (a plugin's restore changes its
    /// document's URL before handing it on).
    var wire: WireActivity { fields.arrived.wire }
    /// The activity as it arrived, as bytes to hand on (to a plugin): those received, when it was
    /// read in plain values.
    var wireBytes: [UInt8] { fields.arrived.bytes }

    init(wire: WireActivity, continueEndpoint: String) throws(HandoffError) {
        fields = try Fields(wire: wire, continueEndpoint: continueEndpoint)
    }

    init(plain: WirePlainActivity, continueEndpoint: String) throws(HandoffError) {
        fields = try Fields(plain: plain, continueEndpoint: continueEndpoint)
    }

    public static func == (lhs: ContinuedActivity, rhs: ContinuedActivity) -> Bool {
        lhs.fields === rhs.fields || lhs.fields.isEqual(to: rhs.fields)
    }

    public func hash(into hasher: inout Hasher) {
        fields.hash(into: &hasher)
    }

    public var description: String { "\"\(title)\" (\(activityType), v\(version)) from \(origin.name), \(userInfo.count) userInfo entries" }

    /// The fields, never changed once made (hence `Sendable` as they are).
    private final class Fields: Sendable {
        let id: String
        let activityType: String
        let title: String
        let userInfo: [String: UserInfoValue]
        let requiredUserInfoKeys: Set<String>
        let webpageURL: URL?
        let expirationDate: Date?
        let keywords: Set<String>
        let supportsContinuationStreams: Bool
        let teamID: String?
        let origin: NodeInfo
        let version: UInt64
        let updatedAt: Date
        let continueEndpoint: String
        let document: DocumentReference?
        let arrived: Arrived

        /// The fields of the generated message (a reply SwiftProtobuf read: one the plain reader
        /// left), through its plain values.
        convenience init(wire: WireActivity, continueEndpoint: String) throws(HandoffError) {
            try self.init(plain: WirePlainActivity(wire), arrived: .message(wire), continueEndpoint: continueEndpoint)
        }

        /// The fields of a reply read in plain values (``WireReplyEnvelope``).
        init(plain: WirePlainActivity, arrived: Arrived? = nil, continueEndpoint: String) throws(HandoffError) {
            self.arrived = arrived ?? .bytes(plain.bytes)
            id = plain.activityID
            activityType = plain.activityType
            title = plain.title
            userInfo = try Handoff.userInfo(fromPlain: plain.userInfo)
            requiredUserInfoKeys = Set(plain.requiredUserInfoKeys)
            webpageURL = plain.webpageURL.isEmpty ? nil : URL(string: plain.webpageURL)
            expirationDate = plain.expiration?.date
            keywords = Set(plain.keywords)
            supportsContinuationStreams = plain.supportsContinuationStreams
            teamID = plain.teamID.isEmpty ? nil : plain.teamID
            origin = NodeInfo(taking: plain.origin)
            version = plain.version
            updatedAt = (plain.updatedAt ?? WireTimestamp()).date
            self.continueEndpoint = continueEndpoint
            document = try plain.document.map { (document) throws(HandoffError) in try DocumentReference(wire: document, activityType: plain.activityType) }
            try Self.checkRequiredKeys(requiredUserInfoKeys, in: userInfo, activityType: activityType)
        }

        private static func checkRequiredKeys(_ required: Set<String>, in userInfo: [String: UserInfoValue], activityType: String) throws(HandoffError) {
            let missing = required.subtracting(userInfo.keys)
            if !missing.isEmpty {
                throw HandoffError(.missingRequiredUserInfoKey, "the originator sent no value for required key(s) \(missing.sorted().joined(separator: ", "))", activityType: activityType)
            }
        }

        /// The activity as it arrived: the generated message, or (read in plain values) its bytes,
        /// decoded only when something asks for the message (a plugin's restore).
        enum Arrived: Sendable {
            case message(WireActivity)
            case bytes([UInt8])

            var wire: WireActivity {
                switch self {
                case .message(let wire): wire
                // The bytes were read whole as an activity already: they decode again.
                case .bytes(let bytes): (try? WireActivity(serializedBytes: bytes)) ?? WireActivity()
                }
            }

            var bytes: [UInt8] {
                switch self {
                case .message(let wire): (try? wire.serializedBytes()) ?? []
                case .bytes(let bytes): bytes
                }
            }
        }

        /// Every field equal: what the struct's synthesized `==` compared, less the message as it
        /// arrived (its bytes are not kept in one form: the fields are what it said).
        func isEqual(to other: Fields) -> Bool {
            id == other.id && activityType == other.activityType && title == other.title && userInfo == other.userInfo
                && requiredUserInfoKeys == other.requiredUserInfoKeys && webpageURL == other.webpageURL
                && expirationDate == other.expirationDate && keywords == other.keywords
                && supportsContinuationStreams == other.supportsContinuationStreams && teamID == other.teamID
                && origin == other.origin && version == other.version && updatedAt == other.updatedAt
                && continueEndpoint == other.continueEndpoint && document == other.document
        }

        /// Every field, in the order the synthesized `hash(into:)` took them.
        func hash(into hasher: inout Hasher) {
            hasher.combine(id)
            hasher.combine(activityType)
            hasher.combine(title)
            hasher.combine(userInfo)
            hasher.combine(requiredUserInfoKeys)
            hasher.combine(webpageURL)
            hasher.combine(expirationDate)
            hasher.combine(keywords)
            hasher.combine(supportsContinuationStreams)
            hasher.combine(teamID)
            hasher.combine(origin)
            hasher.combine(version)
            hasher.combine(updatedAt)
            hasher.combine(continueEndpoint)
            hasher.combine(document)
        }
    }
}
