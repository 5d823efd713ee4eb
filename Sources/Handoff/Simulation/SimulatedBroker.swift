import Foundation
import HandoffWire
import ZeroMQ

/// The broker of a simulated fleet: the production ``BrokerCore`` (cache, sender check, quotas,
/// snapshot answers, requests to re-advertise) in a shell that, instead of sockets, hands what it
/// decides to the simulated network, as ``BrokerLoop`` hands it to ZeroMQ: its XSUB subscribes to
/// everything at each node's publisher (without its cache, to the prefixes its subscribers follow), its XPUB forwards to each node what that node's
/// subscriber subscribed to.
///
/// At sites, each site's broker has its site's name, and all but the first join an upstream, the
/// broker of the site above theirs (SimulatedWorld+Sites.swift carries out the links).
final class SimulatedBroker {
    /// The cache's bounds, as `handoff broker` has them by default.
    static let capacity = 100_000
    static let perOriginQuota = 1_000

    private(set) var core: BrokerCore
    var alive = true
    /// Which process of the broker this is (it counts restarts).
    private(set) var incarnation = 0
    /// Which topics each node's subscriber subscribed to here.
    var subscriptionsOf: [Int: Set<String>] = [:]

    /// Whether some node's subscriber holds `topic` here (XPUB's count of it).
    func holds(_ topic: String) -> Bool { subscriptionsOf.values.contains { $0.contains(topic) } }
    /// Messages it refused as forged or over quota (for the report).
    var refused = 0

    let id: String
    let site: SiteName
    /// Its CURVE key: the one its upstream knows it by, as a relay (`--relay`), and takes its
    /// site's name and interest from. Made from its site's name, so that runs stay seed for seed.
    let key: [UInt8]
    /// Whether it joins an upstream broker (a site's, below the first).
    let joinsUpstream: Bool
    /// Whether it keeps the last-value cache (``SimulationOptions/lastValueCache``).
    let cacheEnabled: Bool
    /// The frontend's (XSUB's) subscriptions at its publishers, sent whole to each that connects:
    /// with the cache, its own subscribe-all (which the cache needs) always among them; without
    /// it, the prefixes its core forwards (``BrokerCore/SubscriberVerdict/forwardToPublishers(_:)``).
    var frontendSubscriptions: XSUBSubscriptions
    /// The hop its own publishers' messages go to other sites with.
    var localHop: Frame { WireSiteHop(hops: 1, origin: site.name, via: site).frame }
    /// At sites: what it, joining upstream, asks of it (snapshots of what its site follows).
    var upstreamSnapshots: UpstreamSnapshots
    /// Whether a round of snapshot slices is scheduled: one chain of rounds at a time, as one loop.
    var sliceScheduled = false

    init(site: String = "sim", joinsUpstream: Bool = false, cacheEnabled: Bool = true) {
        self.site = SiteName(site)!
        self.joinsUpstream = joinsUpstream
        self.cacheEnabled = cacheEnabled
        frontendSubscriptions = Self.newFrontend(cacheEnabled: cacheEnabled)
        id = "broker@\(site)"
        key = Array(Array("key of the broker of \(site)".utf8).prefix(32))
        upstreamSnapshots = UpstreamSnapshots(site: self.site)
        core = Self.newCore(id: id, site: self.site, joinsUpstream: joinsUpstream, cacheEnabled: cacheEnabled)
    }

    private static func newFrontend(cacheEnabled: Bool) -> XSUBSubscriptions { XSUBSubscriptions(cacheEnabled ? [""] : []) }

    private static func newCore(id: String, site: SiteName, joinsUpstream: Bool, cacheEnabled: Bool) -> BrokerCore {
        var sender = WireNodeRef()
        sender.nodeID = id
        sender.name = "broker"
        sender.host = site.name
        return BrokerCore(
            cacheEnabled: cacheEnabled,
            cache: LastValueCache(capacity: capacity, perOriginQuota: perOriginQuota, defaultLease: SimulatedNode.settings.lease),
            sender: sender, upstreams: joinsUpstream ? 1 : 0, site: site,
            // Slices of three: a fleet's answers span rounds, and the bus's messages overtake them.
            snapshotSliceSize: 3,
            // Every node's messages come with its connection's key, as on a CURVE bus.
            keysChecked: true)
    }

    /// The process died and a new one starts, its cache empty.
    func restart() {
        core = Self.newCore(id: id, site: site, joinsUpstream: joinsUpstream, cacheEnabled: cacheEnabled)
        subscriptionsOf = [:]
        frontendSubscriptions = Self.newFrontend(cacheEnabled: cacheEnabled)
        upstreamSnapshots = UpstreamSnapshots(site: site)
        sliceScheduled = false
        incarnation += 1
        alive = true
    }

    func coreDo<T>(_ body: (inout BrokerCore) -> T) -> T { body(&core) }
}
