import Foundation
import HandoffWire

/// A node heard on the bus, as its presence describes it.
public struct PresentNode: Sendable, Hashable, CustomStringConvertible {
    /// The node: id, name, host, key.
    public let info: NodeInfo
    /// Where it answers continue requests.
    public let continueEndpoint: String
    /// How many activities it has current (as its last presence listed them).
    public let activityCount: Int
    /// Whether that list was cut to fit the frame limit (it has more).
    public let listIsPartial: Bool
    /// When its last presence arrived (this node's clock).
    public let lastHeard: Date

    public var description: String { "\(info.name) (\(info.id)) on \(info.host): \(activityCount) activities" }
}

/// The nodes this node hears on the bus, each until its presence lease runs out. Bounded: past
/// ``capacity`` a node not yet listed is not added.
struct NodeDirectory {
    let capacity: Int
    private var entries: [String: (node: PresentNode, heardAt: ContinuousClock.Instant, deadline: ContinuousClock.Instant)] = [:]

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Takes a presence (already believed); returns how long the node was silent before it, when
    /// it was listed.
    @discardableResult
    mutating func heard(_ presence: WireNodePresence, lease: Duration, now: ContinuousClock.Instant, wallClock: Date = Date()) -> Duration? {
        let id = presence.node.nodeID
        let previous = entries[id]?.heardAt
        guard previous != nil || entries.count < capacity else { return nil }
        let node = PresentNode(
            info: NodeInfo(wire: presence.node), continueEndpoint: presence.continueEndpoint,
            activityCount: presence.activityIds.count, listIsPartial: presence.partial, lastHeard: wallClock)
        entries[id] = (node, now, now + lease)
        return previous.map { now - $0 }
    }

    /// Forgets the nodes whose lease ran out; returns their ids.
    @discardableResult
    mutating func expire(now: ContinuousClock.Instant) -> [String] {
        let lapsed = entries.filter { $0.value.deadline <= now }.map(\.key)
        for id in lapsed { entries[id] = nil }
        return lapsed
    }

    /// Forgets a node (it left).
    mutating func remove(_ id: String) {
        entries[id] = nil
    }

    /// Every node heard and not lapsed, by name.
    var nodes: [PresentNode] {
        entries.values.map(\.node).sorted { ($0.info.name, $0.info.id) < ($1.info.name, $1.info.id) }
    }
}
