import Foundation
import HandoffWire
import ZeroMQ

/// A node as other nodes see it.
public struct NodeInfo: Hashable, Sendable, CustomStringConvertible {
    /// The node's unique id (a UUID unless configured).
    public let id: String
    /// The node's human-readable name.
    public let name: String
    /// The host the node runs on.
    public let host: String
    /// The node's CURVE public key, when it runs secure (see ``Security``).
    public let publicKey: CurveKey?

    public init(id: String, name: String, host: String, publicKey: CurveKey? = nil) {
        self.id = id
        self.name = name
        self.host = host
        self.publicKey = publicKey
    }

    init(wire: borrowing WireNodeRef) {
        self.init(id: wire.nodeID, name: wire.name, host: wire.host, publicKey: Self.key(wire.publicKey))
    }

    /// The node `wire` names (none: empty), its strings taken out of it rather than copied.
    init(taking wire: consuming WireNodeRef?) {
        switch consume wire {
        case .none:
            self.init(wire: WireNodeRef())
        case .some(var node):
            self.init(id: take(&node.nodeID), name: take(&node.name), host: take(&node.host), publicKey: Self.key(node.publicKey))
        }
    }

    /// A NodeRef's key: none when empty (or not a CURVE key).
    private static func key(_ bytes: Data) -> CurveKey? {
        bytes.isEmpty ? nil : try? CurveKey(bytes: Array(bytes))
    }

    var wire: WireNodeRef {
        var node = WireNodeRef()
        node.nodeID = id
        node.name = name
        node.host = host
        if let publicKey { node.publicKey = Data(publicKey.bytes) }
        return node
    }

    public var description: String { "\(name) (\(id.prefix(8)) on \(host))" }
}

/// What became of a continuation.
public enum ContinuationResult: Hashable, Sendable {
    /// The handler for the activity's type restored it.
    case restored(ContinuedActivity)
    /// No handler here for the type: continue at the activity's webpage URL instead.
    case webpage(URL)
}

/// A change in the set of activities a node knows of.
public enum ActivityEvent: Hashable, Sendable, CustomStringConvertible {
    /// An activity was advertised for the first time (or first matched).
    case appeared(DiscoveredActivity)
    /// An activity was advertised again with a newer version.
    case updated(DiscoveredActivity)
    /// An activity is gone.
    case removed(DiscoveredActivity, RemovalReason)

    /// The activity the event is about.
    public var activity: DiscoveredActivity {
        switch self {
        case .appeared(let activity), .updated(let activity), .removed(let activity, _): activity
        }
    }

    public var description: String {
        switch self {
        case .appeared(let activity): "appeared: \(activity)"
        case .updated(let activity): "updated: \(activity)"
        case .removed(let activity, let reason): "removed (\(reason)): \(activity)"
        }
    }
}

/// Why an activity disappeared.
public enum RemovalReason: String, Hashable, Sendable {
    /// The originator resigned it.
    case resigned
    /// The originator invalidated it.
    case invalidated
    /// Its expiration date passed.
    case expired
    /// The originating node shut down.
    case nodeShutdown
    /// Nothing was heard of it for longer than its lease: its node is gone or unreachable.
    case lost

    init(wire: WireWithdrawal.Reason) {
        switch wire {
        case .invalidated: self = .invalidated
        case .expired: self = .expired
        case .nodeShutdown: self = .nodeShutdown
        default: self = .resigned
        }
    }

    var wire: WireWithdrawal.Reason {
        switch self {
        case .resigned, .lost: .resigned
        case .invalidated: .invalidated
        case .expired: .expired
        case .nodeShutdown: .nodeShutdown
        }
    }
}

/// Which activities a discovery stream reports.
public struct ActivityFilter: Hashable, Sendable {
    /// Activity-type prefixes to match (e.g. `org.handoff.contacts.`); empty matches every type.
    /// Filtering happens in ZeroMQ: the node subscribes only to these.
    public var typePrefixes: [String]
    /// Node ids to match; `nil` matches every node.
    public var nodeIDs: Set<String>?
    /// Search keywords (an activity's `keywords`, as Apple's search uses them): an activity
    /// matches when it has any of them, compared without regard to case; `nil` matches every one.
    public var keywords: Set<String>?

    public init(typePrefixes: [String] = [], nodeIDs: Set<String>? = nil, keywords: Set<String>? = nil) {
        self.typePrefixes = typePrefixes
        self.nodeIDs = nodeIDs
        self.keywords = keywords.map { Set($0.map { $0.lowercased() }) }
    }

    /// Every activity on the bus.
    public static let all = ActivityFilter()

    /// Activities whose type starts with `prefix`.
    public static func type(prefix: String) -> ActivityFilter { ActivityFilter(typePrefixes: [prefix]) }

    /// Activities of one node.
    public static func node(_ id: String) -> ActivityFilter { ActivityFilter(nodeIDs: [id]) }

    /// Activities with any of these search keywords.
    public static func keywords(_ keywords: Set<String>) -> ActivityFilter { ActivityFilter(keywords: keywords) }

    func matches(_ activity: DiscoveredActivity) -> Bool {
        (typePrefixes.isEmpty || typePrefixes.contains { activity.hasType(prefix: $0) })
            && (nodeIDs?.contains(activity.origin.id) ?? true)
            && (keywords.map { wanted in activity.keywords.contains { wanted.contains($0.lowercased()) } } ?? true)
    }

    /// The bus topic prefixes to subscribe to for this filter.
    var topics: [String] {
        typePrefixes.isEmpty ? [Topic.activityPrefix] : typePrefixes.map { Topic.activityPrefix + $0 }
    }
}

/// The bus's topic scheme: frame 1 of every bus message. Subscribers filter with ZeroMQ's own prefix
/// matching on it.
enum Topic {
    /// Advertisements and withdrawals: `A:` + the activity type.
    static let activityPrefix = "A:"
    /// Node presence: `P:` + the node id.
    static let presencePrefix = "P:"

    /// Node events (monitoring): `E:` + the activity type. Nodes do not subscribe to these.
    static let eventPrefix = "E:"

    /// A broker's request, as a subscription sent upstream and withdrawn at once, that the node
    /// advertise every current activity again: `R:` + the node id (its cache lost some).
    static let readvertisePrefix = "R:"
    static let readvertisePrefixBytes = Array(readvertisePrefix.utf8)

    /// A site's broker passing a subscribe-all from above on to its publishers, as a subscription
    /// withdrawn at once: `R:*` + a token (a fresh one for each link that comes up above the site).
    /// A node advertises every current activity again, as on a subscribe-all; a site's broker
    /// passes each token on once, so one that comes back round a loop of links ends there, while
    /// links that heal one after another each reach the sites below (``UpstreamCascades``).
    static let readvertiseAllPrefix = "R:*"
    static let readvertiseAllPrefixBytes = Array(readvertiseAllPrefix.utf8)

    static func activity(_ type: String) -> [UInt8] { topic(activityPrefix, type) }
    static func event(_ type: String) -> [UInt8] { topic(eventPrefix, type) }

    /// `prefix` + `name` as bytes, written into one array (a joined string first would be a
    /// second allocation for every advertisement).
    private static func topic(_ prefix: String, _ name: String) -> [UInt8] {
        let prefixCount = prefix.utf8.count, nameCount = name.utf8.count
        return [UInt8](unsafeUninitializedCapacity: prefixCount + nameCount) { buffer, initialized in
            // Both strings' bytes copied where they are (no iterator over the views).
            func copy(_ string: String, to start: Int) {
                let copied: Void? = string.utf8.withContiguousStorageIfAvailable { bytes in
                    UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[start...])).copyMemory(from: UnsafeRawBufferPointer(bytes))
                }
                if copied == nil { _ = UnsafeMutableBufferPointer(rebasing: buffer[start...]).initialize(from: string.utf8) }
            }
            copy(prefix, to: 0)
            copy(name, to: prefixCount)
            initialized = prefixCount + nameCount
        }
    }
}
