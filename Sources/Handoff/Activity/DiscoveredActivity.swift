import Foundation
import HandoffWire

/// An activity another node advertises on the bus: enough to show it and to continue it.
///
/// It carries no ``UserActivity/userInfo``: that comes with continuation (``ContinuedActivity``).
///
/// Its fields live in one immutable object, so that a copy (into an ``ActivityEvent``, for each
/// discover stream, for the continuation client) is one reference count, not one per string: an
/// advertisement heard was copied a dozen times on its way, a dozen strings each time.
public struct DiscoveredActivity: Hashable, Sendable, Identifiable, CustomStringConvertible {
    private let fields: Fields

    /// The activity's id.
    public var id: String { fields.id }
    /// The activity's reverse-DNS type.
    public var activityType: String { fields.activityType }
    /// The activity's title.
    public var title: String { fields.title }
    /// The node that advertises it.
    public var origin: NodeInfo { fields.origin }
    /// Where the originator answers continue requests.
    public var continueEndpoint: String { fields.continueEndpoint }
    /// The activity's version when last advertised.
    public var version: UInt64 { fields.version }
    /// When the activity stops being offered, if ever.
    public var expirationDate: Date? { fields.expirationDate }
    /// How long the activity stays known without a fresh advertisement.
    public var lease: Duration { fields.lease }
    /// Whether continuation streams may be opened to the originator.
    public var supportsContinuationStreams: Bool { fields.supportsContinuationStreams }
    /// The originator's team id, if any.
    public var teamID: String? { fields.teamID }
    /// Where to continue in a browser, if anywhere.
    public var webpageURL: URL? { fields.webpageURL }
    /// Search keywords.
    public var keywords: [String] { fields.keywords }
    /// When the originator last made it current or changed it, by the originator's clock (nil
    /// from nodes older than this field).
    public var updatedAt: Date? { fields.updatedAt }

    /// The activity an advertisement describes, its strings taken out of `wire` rather than
    /// copied (a copy was a retain here and a release where the decoded envelope was let go, eight
    /// of each per advertisement heard); `wire` is left holding empty ones.
    init(taking wire: inout WirePlainAdvertisement) {
        fields = Fields(taking: &wire)
    }

    /// The same from an advertisement of either form, copied.
    init(wire: some WireAdvertisementFields) {
        var plain = WirePlainAdvertisement(wire)
        self.init(taking: &plain)
    }

    public static func == (lhs: DiscoveredActivity, rhs: DiscoveredActivity) -> Bool {
        lhs.fields === rhs.fields || lhs.fields.isEqual(to: rhs.fields)
    }

    public func hash(into hasher: inout Hasher) {
        fields.hash(into: &hasher)
    }

    /// Whether its type starts with `prefix`: what a watcher's filter asks of every event, read
    /// where the type is held (the `activityType` property hands out a copy, a reference count).
    func hasType(prefix: String) -> Bool { fields.activityType.hasPrefix(prefix) }

    public var description: String { "\"\(title)\" (\(activityType), v\(version)) from \(origin.name)" }

    /// About what it takes in memory where a node keeps it: its strings' bytes, and 512 for the
    /// object, its table entry and its schedule items. Each string may be nearly a whole frame
    /// (64 KiB) from a peer that lies, so a table of them is bounded by this too.
    var footprint: Int {
        let fields = fields, origin = fields.origin
        var bytes = 512 + fields.id.utf8.count + fields.activityType.utf8.count + fields.title.utf8.count
        bytes += fields.continueEndpoint.utf8.count + (fields.teamID?.utf8.count ?? 0) + (fields.webpageURL?.absoluteString.utf8.count ?? 0)
        for keyword in fields.keywords { bytes += 16 + keyword.utf8.count }
        return bytes + origin.id.utf8.count + origin.name.utf8.count + origin.host.utf8.count + (origin.publicKey == nil ? 0 : 32)
    }

    /// The fields, never changed once made (hence `Sendable` as they are).
    private final class Fields: Sendable {
        let id: String
        let activityType: String
        let title: String
        let origin: NodeInfo
        let continueEndpoint: String
        let version: UInt64
        let expirationDate: Date?
        let lease: Duration
        let supportsContinuationStreams: Bool
        let teamID: String?
        let webpageURL: URL?
        let keywords: [String]
        let updatedAt: Date?

        init(taking wire: inout WirePlainAdvertisement) {
            id = take(&wire.activityID)
            activityType = take(&wire.activityType)
            title = take(&wire.title)
            var node: WireNodeRef?
            swap(&node, &wire.origin)
            origin = NodeInfo(taking: node)
            continueEndpoint = take(&wire.continueEndpoint)
            version = wire.version
            expirationDate = wire.expirationDate
            lease = .milliseconds(Int64(WireLimits.granted(leaseMs: wire.leaseMs)))
            supportsContinuationStreams = wire.supportsContinuationStreams
            let teamID = take(&wire.teamID)
            self.teamID = teamID.isEmpty ? nil : teamID
            let webpageURL = take(&wire.webpageURL)
            self.webpageURL = webpageURL.isEmpty ? nil : URL(string: webpageURL)
            keywords = take(&wire.keywords)
            updatedAt = wire.updatedAtDate
        }

        /// Every field equal: what the struct's synthesized `==` compared.
        func isEqual(to other: Fields) -> Bool {
            id == other.id && activityType == other.activityType && title == other.title && origin == other.origin
                && continueEndpoint == other.continueEndpoint && version == other.version
                && expirationDate == other.expirationDate && lease == other.lease
                && supportsContinuationStreams == other.supportsContinuationStreams && teamID == other.teamID
                && webpageURL == other.webpageURL && keywords == other.keywords && updatedAt == other.updatedAt
        }

        /// Every field, in the order the synthesized `hash(into:)` took them.
        func hash(into hasher: inout Hasher) {
            hasher.combine(id)
            hasher.combine(activityType)
            hasher.combine(title)
            hasher.combine(origin)
            hasher.combine(continueEndpoint)
            hasher.combine(version)
            hasher.combine(expirationDate)
            hasher.combine(lease)
            hasher.combine(supportsContinuationStreams)
            hasher.combine(teamID)
            hasher.combine(webpageURL)
            hasher.combine(keywords)
            hasher.combine(updatedAt)
        }
    }
}
