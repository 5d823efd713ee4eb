import Foundation
import HandoffWire

/// The broker of a simulated fleet: the production ``BrokerCore`` (cache, sender check, quotas,
/// snapshot answers, requests to re-advertise) in a shell that, instead of sockets, hands what it
/// decides to the simulated network, as ``BrokerLoop`` hands it to ZeroMQ: its XSUB subscribes to
/// everything at each node's publisher, its XPUB forwards to each node what that node's
/// subscriber subscribed to.
final class SimulatedBroker {
    static let id = "broker@sim"
    /// The cache's bounds, as `handoff broker` has them by default.
    static let capacity = 100_000
    static let perOriginQuota = 1_000

    private(set) var core: BrokerCore
    var alive = true
    /// Which process of the broker this is (it counts restarts).
    private(set) var incarnation = 0
    /// Which topics each node's subscriber subscribed to here.
    var subscriptionsOf: [Int: Set<String>] = [:]
    /// Messages it refused as forged or over quota (for the report).
    var refused = 0

    init() {
        core = Self.newCore()
    }

    private static func newCore() -> BrokerCore {
        var sender = WireNodeRef()
        sender.nodeID = id
        sender.name = "broker"
        sender.host = "sim"
        return BrokerCore(
            cacheEnabled: true,
            cache: LastValueCache(capacity: capacity, perOriginQuota: perOriginQuota, defaultLease: SimulatedNode.settings.lease),
            sender: sender, site: SiteName("sim")!)
    }

    /// The process died and a new one starts, its cache empty.
    func restart() {
        core = Self.newCore()
        subscriptionsOf = [:]
        incarnation += 1
        alive = true
    }

    func coreDo<T>(_ body: (inout BrokerCore) -> T) -> T { body(&core) }
}
