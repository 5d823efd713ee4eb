import HandoffWire

/// The size limits of the wire contract (wire.proto, "Limits"): what a peer may send, and what a
/// node may put on the bus.
public enum WireLimits {
    /// The largest frame a peer may send on a bus socket (topic and envelope alike). Nodes and
    /// brokers set `ZMQ_MAXMSGSIZE` to it on every bus socket: a larger frame, or a larger
    /// handshake command, disconnects its sender before anything is buffered.
    public static let maxBusFrame = 65_536

    /// The largest frame a peer may send to a socket that takes only subscriptions: a node's
    /// publisher, a broker's backend and capture, a site's link up. The longest subscription the
    /// contract makes is under 330 bytes (`L:` + site + `|` + `A:` + type); libzmq keeps every
    /// distinct one in a trie until its connection goes, at about 30 bytes of memory per byte of
    /// topic (a flood of 500 subscriptions of 60,000 random bytes took a broker from 35 to 951
    /// MiB). A larger frame disconnects its sender before anything is kept.
    public static let maxSubscriptionFrame = 1_024

    /// The most UTF-8 bytes an advertisement may carry in an activity's type, title, keywords and
    /// webpage URL together (what it carries besides fixed-size fields), well inside ``maxBusFrame``.
    public static let maxAdvertisedText = 16_384

    /// The longest activity id a peer may send (Handoff's are UUIDs, 36 bytes). A request naming a
    /// longer one is malformed, and its answer does not repeat it.
    public static let maxActivityID = 128

    /// The longest lease a receiver grants: a longer `lease_ms` (a uint32 of milliseconds reaches
    /// 49.7 days) is taken as one hour, so that no peer keeps its activities, or itself, alive at
    /// other nodes and brokers for weeks after it went. A node's own lease may not be longer.
    public static let maxLease: Duration = .seconds(3600)

    /// A lease as a receiver grants it: at most ``maxLease``.
    static func granted(leaseMs: UInt32) -> UInt32 { min(leaseMs, maxLeaseMs) }
    private static let maxLeaseMs = UInt32(maxLease.components.seconds) * 1000

    /// The longest activity type (``UserActivity/validate(activityType:)`` checks it).
    public static let maxActivityType = 255

    /// The longest node id (Handoff's are UUIDs, 36 bytes).
    public static let maxNodeID = 128

    /// The longest node name, host (a DNS name is at most 253) and continue endpoint a presence
    /// may carry: each node and operator's view keeps them for every node it hears.
    public static let maxNodeName = 256
    public static let maxHost = 255
    public static let maxEndpoint = 512

    /// Whether a presence is within the contract's lengths: its node's id, name and host, its
    /// continue endpoint, and every activity id it lists.
    static func fits(_ presence: WireNodePresence) -> Bool {
        let node = presence.node
        return node.nodeID.utf8.count <= maxNodeID && node.name.utf8.count <= maxNodeName && node.host.utf8.count <= maxHost
            && presence.continueEndpoint.utf8.count <= maxEndpoint
            && presence.activityIds.allSatisfy { fitsBus(activityID: $0.utf8, nodeID: EmptyCollection()) }
    }

    /// Whether what a bus message names (an activity, its type when the message carries it, the
    /// node it is about) is within the contract's lengths: a message naming longer ones is
    /// malformed. Every table a receiver keeps is keyed by these, and each entry would otherwise
    /// hold up to a whole frame (64 KiB) of name.
    static func fitsBus(activityID: some Collection<UInt8>, activityType: some Collection<UInt8> = EmptyCollection(), nodeID: some Collection<UInt8>) -> Bool {
        pastBusLengths(activityID: activityID.count, activityType: activityType.count, nodeID: nodeID.count) == nil
    }

    /// What a bus message names past the contract's lengths, in words, or `nil`: the one rule that
    /// nodes (``fitsBus(activityID:activityType:nodeID:)``) and brokers (``BrokerBusContent``)
    /// apply, given the lengths in bytes of what the message names (`nil`: it names no activity).
    /// An activity id is 1 to ``maxActivityID`` bytes; a type at most ``maxActivityType``; the node
    /// it is about and its sender at most ``maxNodeID``.
    static func pastBusLengths(activityID: Int?, activityType: Int = 0, nodeID: Int, senderID: Int = 0) -> String? {
        if let activityID, activityID == 0 || activityID > maxActivityID {
            return "names an activity id of \(activityID) bytes (the contract allows 1 to \(maxActivityID))"
        }
        if activityType > maxActivityType {
            return "names an activity type of \(activityType) bytes (the contract allows at most \(maxActivityType))"
        }
        if nodeID > maxNodeID {
            return "names a node id of \(nodeID) bytes (the contract allows at most \(maxNodeID))"
        }
        if senderID > maxNodeID {
            return "names a sender id of \(senderID) bytes (the contract allows at most \(maxNodeID))"
        }
        return nil
    }

    /// Whether an activity id and type a peer sent are within the contract's lengths.
    static func fits(activityID: String, activityType: String) -> Bool {
        activityID.utf8.count <= maxActivityID && activityType.utf8.count <= maxActivityType
    }

    /// The error for a request whose id or type is over the limits, without repeating them.
    static func oversizedIdentifiers(activityID: String, activityType: String) -> HandoffError {
        HandoffError(.malformedMessage, "the activity id (\(activityID.utf8.count) bytes) or type (\(activityType.utf8.count) bytes) is over the contract's limits (\(maxActivityID) and \(maxActivityType) bytes)")
    }
}
