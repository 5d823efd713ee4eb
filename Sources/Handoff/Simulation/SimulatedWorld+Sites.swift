import Foundation
import HandoffWire
import ZeroMQ

/// A site's link to its upstream, as its broker's two sockets see it: `up` carries what the site
/// sends up (its messages, and its down socket's subscriptions), `down` what comes down (the
/// upstream's messages, and its frontend's subscriptions).
struct SiteLinkState {
    var up = SimulatedWorld.Link()
    var down = SimulatedWorld.Link()
    /// Cuts in force, counted.
    var cuts = 0
    var upSince: Duration?
    /// The site's down socket's (XSUB's) subscriptions at the upstream's backend, which libzmq
    /// sends again on every new connection.
    var subscriptions = XSUBSubscriptions()
    /// What the upstream's backend (XPUB) holds of them: it sends the site what matches.
    var upstreamHolds: Set<String> = []
    /// What the site's up socket (XPUB) holds of the upstream frontend's subscriptions.
    var siteHolds: Set<String> = []
}

/// Sites (`SimulationOptions.sites`): a broker per site, joined in a tree (site s below site
/// (s − 1) / 2) by links that are cut and heal. What each broker decides is the production ``BrokerCore``'s (its
/// upstream and site rules); this carries it out as ``BrokerLoop`` (BrokerLoop+Upstream.swift,
/// BrokerLoop+Sites.swift) does over the link's sockets, as libzmq's XSUB and XPUB pass
/// subscriptions: on a new connection each side's subscriptions again; on a broken one, the
/// upstream's backend and the site's up socket each drop the other's (XPUB tells its owner).
extension SimulatedWorld {
    func handleSite(_ event: Event) {
        switch event {
        case .siteUp(let site, let epoch, let frames):
            if arrivesUp(site, epoch) { upstreamReceives(frames, from: site) }
        case .siteDown(let site, let epoch, let frames):
            if arrivesDown(site, epoch) { siteReceivesFromUpstream(site, frames) }
        case .leafSubscribes(let site, let epoch, let frame):
            if arrivesUp(site, epoch) { upstreamBackendSubscription(frame, from: site, key: brokers[site].key) }
        case .upstreamSubscribes(let site, let epoch, let frame):
            if arrivesDown(site, epoch) { siteUpSubscription(site, frame) }
        default:
            break
        }
    }

    /// Whether what a site sent up on its link's connection `epoch` reaches its upstream: the
    /// connection has not broken since, and the upstream lives.
    private func arrivesUp(_ site: Int, _ epoch: Int) -> Bool {
        sites[site].up.epoch == epoch && brokers[upstream(of: site)].alive
    }

    /// Whether what came down a site's link on connection `epoch` reaches the site's broker.
    private func arrivesDown(_ site: Int, _ epoch: Int) -> Bool {
        sites[site].down.epoch == epoch && brokers[site].alive
    }

    /// The site whose broker is `site`'s upstream.
    func upstream(of site: Int) -> Int { options.upstreamSite(of: site) }

    /// The sites joined below a broker.
    func sitesBelow(_ b: Int) -> [Int] { sites.indices.dropFirst().filter { upstream(of: $0) == b } }

    /// The sites whose link a broker's crash or restart breaks or brings back: its own to its
    /// upstream, and those of the sites below it.
    func sitesJoined(to b: Int) -> [Int] { (b > 0 ? [b] : []) + sitesBelow(b) }

    /// Since when a message from a node at `origin`'s site has had its way to node `index` (its
    /// own broker, and each link between the two sites, up to where their ways meet), or `nil`.
    func pathUpSince(fromSite origin: Int, to index: Int) -> Duration? {
        let own = site(of: index)
        guard var since = brokerUpSince[own][index] else { return nil }
        var (a, b) = (origin, own)
        while a != b {
            // The deeper of the two climbs its link (the higher index is never shallower).
            let below = max(a, b)
            guard let up = sites[below].upSince else { return nil }
            since = max(since, up)
            if a == below { a = upstream(of: a) } else { b = upstream(of: b) }
        }
        return since
    }

    // MARK: The link

    func connectSite(_ site: Int) {
        guard brokers[upstream(of: site)].alive, brokers[site].alive, sites[site].cuts == 0, sites[site].upSince == nil else { return }
        log("site-\(site)'s link to its upstream comes up")
        sites[site].upSince = now
        // The site's down socket (XSUB) sends its subscriptions on the new connection as it attaches
        // it, in its trie's order: before anything its broker sends once it hears of the connection
        // (a snapshot request then follows the interest it is answered by, `L:` before `S:`).
        for topic in sites[site].subscriptions.topics {
            schedule(.leafSubscribes(site: site, epoch: sites[site].up.epoch, frame: [1] + Array(topic.utf8)), at: arrival(on: &sites[site].up))
        }
        // The site's broker hears its link connect (libzmq's monitor) before any subscription.
        for subscription in brokers[site].coreDo({ $0.upstreamLinkConnected(now: instant, token: nextToken) }) { passToPublishers(site, subscription) }
        for topic in brokers[upstream(of: site)].frontendSubscriptions.topics {
            schedule(.upstreamSubscribes(site: site, epoch: sites[site].down.epoch, frame: [1] + Array(topic.utf8)), at: arrival(on: &sites[site].down))
        }
    }

    /// The link breaks: what was on its way is lost, and each end that lives drops the other's
    /// subscriptions (the upstream the site's interest, the site the upstream's subscribe-all).
    func disconnectSite(_ site: Int) {
        guard sites[site].upSince != nil else { return }
        log("site-\(site)'s link to its upstream breaks")
        sites[site].upSince = nil
        for direction in [\SiteLinkState.up, \SiteLinkState.down] {
            sites[site][keyPath: direction].epoch += 1
            sites[site][keyPath: direction].lastArrival = now
        }
        let upstreamHeld = sites[site].upstreamHolds.sorted(), siteHeld = sites[site].siteHolds.sorted()
        // libzmq's own withdrawals, made as the connection goes: no metadata, no key.
        if brokers[upstream(of: site)].alive { for topic in upstreamHeld { upstreamBackendSubscription([0] + Array(topic.utf8), from: site, key: nil) } }
        if brokers[site].alive { for topic in siteHeld { siteUpSubscription(site, [0] + Array(topic.utf8)) } }
        sites[site].upstreamHolds = []
        sites[site].siteHolds = []
    }

    func cutSite(_ site: Int) {
        sites[site].cuts += 1
        disconnectSite(site)
    }

    func healSite(_ site: Int) {
        guard sites[site].cuts > 0 else { return }
        sites[site].cuts -= 1
        connectSite(site)
    }

    // MARK: A site's broker

    /// A message up to the upstream, when its frontend's subscription lets it through.
    func sendUp(_ site: Int, _ frames: [Frame]) {
        guard sites[site].upSince != nil else { return }
        let topic = String(decoding: frames[0].bytes, as: UTF8.self)
        guard sites[site].siteHolds.contains(where: { topic.hasPrefix($0) }) else { return }
        schedule(.siteUp(site: site, epoch: sites[site].up.epoch, frames: frames.map(\.bytes)), at: arrival(on: &sites[site].up))
    }

    /// The site's down socket (un)subscribes at the upstream, counted as XSUB counts: a
    /// subscription always goes, an unsubscription when its count ends.
    func subscribeUpstream(_ site: Int, _ frame: [UInt8]) {
        guard sites[site].subscriptions.passes(frame), sites[site].upSince != nil else { return }
        schedule(.leafSubscribes(site: site, epoch: sites[site].up.epoch, frame: frame), at: arrival(on: &sites[site].up))
    }

    /// A subscriber's (un)subscription at a site's broker, passed up as its site's interest
    /// (``BrokerLoop/passInterestUpstream(_:)``), with the key it came with (`nil`: libzmq's own,
    /// as a connection went) and whether that key is a relay's (a site's below).
    func passInterestUpstream(_ b: Int, _ frame: Frame, key: [UInt8]?, relay: Bool) {
        let interest = brokers[b].coreDo { $0.interestUpstream(frame, key: key, relay: relay) }
        guard let send = interest.send else { return }
        subscribeUpstream(b, send)
        if let typePrefix = interest.snapshotNoLongerOf {
            for topic in brokers[b].upstreamSnapshots.cancel(typePrefix, now: instant) { subscribeUpstream(b, [0] + topic) }
            scheduleUpstreamSnapshotsDue(b)
        }
        guard let typePrefix = interest.snapshotOf,
              let topic = brokers[b].upstreamSnapshots.ask(typePrefix, now: instant, randomToken: nextToken()) else { return }
        log("\(brokerName(b)) asks upstream for its snapshot of \(typePrefix)")
        subscribeUpstream(b, [1] + topic)
    }

    /// The upstream frontend's (un)subscription at a site's up socket (``BrokerLoop/fromUpstreamSubscriber(_:)``).
    func siteUpSubscription(_ site: Int, _ frame: [UInt8]) {
        let topic = String(decoding: frame.dropFirst(), as: UTF8.self)
        if frame.first == 1 { sites[site].siteHolds.insert(topic) } else { sites[site].siteHolds.remove(topic) }
        let passing = brokers[site].coreDo { $0.upstreamSubscription(Frame(frame), now: instant, token: nextToken) }
        // Held back: the broker's poll wakes when it is due (BrokerLoop's pollTimeout).
        if passing.isEmpty, let due = brokers[site].core.upstreamSubscriptions.nextDue {
            schedule(.upstreamSubscriptionsDue(site: site, incarnation: brokers[site].incarnation), at: max(due - origin, now))
        }
        for subscription in passing { passToPublishers(site, subscription) }
    }

    /// The upstream's subscriptions held back as repeats whose second has ended, passed now
    /// (``BrokerLoop/upstreamHousekeeping(now:)``).
    func passDueUpstreamSubscriptions(_ site: Int) {
        for subscription in brokers[site].coreDo({ $0.dueUpstreamSubscriptions(now: instant, token: nextToken) }) { passToPublishers(site, subscription) }
    }

    /// An upstream's subscription passed to the site's publishers; with its subscribe-all, a
    /// snapshot of each type the site follows asked upstream.
    private func passToPublishers(_ site: Int, _ frame: [UInt8]) {
        frontendSends(site, frame)
        guard UpstreamCascades.isSubscribeAll(frame) else { return }
        for typePrefix in brokers[site].core.upstreamInterest.activityTypePrefixes.sorted() {
            guard let topic = brokers[site].upstreamSnapshots.ask(typePrefix, now: instant, randomToken: nextToken()) else { continue }
            subscribeUpstream(site, [1] + topic)
        }
    }

    /// A message from upstream at a site's broker (``BrokerLoop/fromUpstream(_:)``).
    func siteReceivesFromUpstream(_ site: Int, _ frames: [[UInt8]]) {
        let broker = brokers[site]
        if frames.count == 2, broker.upstreamSnapshots.typePrefix(of: frames[0]) != nil {
            siteReceivesSnapshot(site, topic: frames[0], frames[1])
            return
        }
        guard frames.count == 3, let (name, topic) = Topic.splitSite(frames[0]), name.elementsEqual(broker.site.bytes),
              let hop = WireSiteHop(frame: Frame(frames[2])), let envelope = try? WireEnvelope.decode(Data(frames[1])) else { return }
        guard let onward = broker.coreDo({ $0.hopFromUpstream(hop) }) else { return }
        let message = [Frame(Array(topic)), Frame(frames[1])]
        guard case .forward(let askToReadvertise, _) = broker.coreDo({ $0.upstreamMessage(message, fromSite: hop.via, now: instant) }) else {
            return
        }
        if let origin = askToReadvertise {
            originsAsked += 1
            log("\(brokerName(site)) asks upstream that \(origin) advertise again what its cache lacks")
            let ask = Array((Topic.readvertisePrefix + origin).utf8)
            subscribeUpstream(site, [1] + ask)
            subscribeUpstream(site, [0] + ask)
        }
        sendToSubscribers(site, topic: Array(topic), envelope: envelope)
        sendToSitesBelow(site, message, hop: onward.frame, excluding: hop.origin)
    }

    /// A snapshot's message from upstream: an advertisement, cached and passed on when it is news
    /// here; the reply that ends it.
    private func siteReceivesSnapshot(_ site: Int, topic: [UInt8], _ bytes: [UInt8]) {
        let broker = brokers[site]
        guard let envelope = try? WireEnvelope.decode(Data(bytes)) else { return }
        if case .advertisement(let advertisement) = envelope.body {
            broker.upstreamSnapshots.advertisementArrived(on: topic, now: instant)
            guard let live = broker.coreDo({ $0.upstreamSnapshotAdvertisement(Frame(bytes), type: advertisement.activityType, now: instant) }) else { return }
            let message = [Frame(live), Frame(bytes)]
            sendToSubscribers(site, topic: live, envelope: envelope)
            sendToSitesBelow(site, message, hop: broker.localHop, excluding: nil)
            return
        }
        guard case .snapshotReply(let reply) = envelope.body,
              broker.upstreamSnapshots.replyArrived(on: topic, count: Int(reply.count), now: instant, jitter: nextJitter()) else { return }
        subscribeUpstream(site, [0] + topic)
        // Short: asked again once its backoff is over, as the broker's poll wakes for it (and
        // a prefix waiting its turn asked now).
        scheduleUpstreamSnapshotsDue(site)
    }

    /// The broker's poll wakes when an upstream snapshot is due to be asked (again).
    private func scheduleUpstreamSnapshotsDue(_ site: Int) {
        guard let due = brokers[site].upstreamSnapshots.nextRetry else { return }
        schedule(.upstreamSubscriptionsDue(site: site, incarnation: brokers[site].incarnation), at: max(due - origin, now))
    }

    /// Snapshots asked upstream that are over by time, asked no more (the next subscribe-all asks
    /// again); those whose backoff after a short answer is over, asked again.
    func expireUpstreamSnapshots(_ site: Int) {
        let over = brokers[site].upstreamSnapshots.expired(now: instant, jitter: nextJitter)
        for topic in over { subscribeUpstream(site, [0] + topic) }
        for topic in brokers[site].upstreamSnapshots.dueRetries(now: instant, randomToken: nextToken) {
            log("\(brokerName(site)) asks upstream for a snapshot that came short or waited its turn")
            subscribeUpstream(site, [1] + topic)
        }
        if !over.isEmpty { scheduleUpstreamSnapshotsDue(site) }
    }

    // MARK: The upstream

    /// A message a site sent up, at its upstream's frontend (``BrokerLoop/fromSite(_:)``).
    private func upstreamReceives(_ frames: [[UInt8]], from site: Int) {
        guard frames.count == 3, let hop = WireSiteHop(frame: Frame(frames[2])),
              let envelope = try? WireEnvelope.decode(Data(frames[1])) else { return }
        let message = [Frame(frames[0]), Frame(frames[1])]
        let b = upstream(of: site)
        guard case .forward(let verdict, let onward) = brokers[b].coreDo({ $0.siteMessage(message, hop: hop, now: instant) }) else {
            log("\(brokerName(b)) drops a message from site-\(site): it came round a loop")
            return
        }
        carryOut(b, verdict, message, envelope: envelope, hop: onward.frame, fromSite: hop.via, from: "site-\(site)")
    }

    /// A site's (un)subscription at its upstream's backend (``BrokerLoop/fromSubscriber(_:)``);
    /// an upstream that joins one of its own passes it on as its site's interest.
    private func upstreamBackendSubscription(_ frame: [UInt8], from site: Int, key: [UInt8]?) {
        let topic = String(decoding: frame.dropFirst(), as: UTF8.self)
        if frame.first == 1 { sites[site].upstreamHolds.insert(topic) } else { sites[site].upstreamHolds.remove(topic) }
        let b = upstream(of: site), upstream = brokers[b]
        switch upstream.coreDo({ $0.siteSubscription(Frame(frame), key: key, relay: true) }) {
        case .refused:
            return
        case .ignored:
            // libzmq's own withdrawal: what was forwarded for the topic goes (BrokerLoop+Sites.swift).
            if key == nil, frame.first == 0 { forwardSiteInterest(b, frame, key: nil) }
            return
        case .taken:
            forwardSiteInterest(b, frame, key: key)
            return
        case .notSite:
            switch upstream.coreDo({ $0.subscriberMessage([Frame(frame)], key: key, relay: true, now: instant) }) {
            case .forwardToPublishers(let send):
                frontendSends(b, send)
            case .publishersSendEverything:
                frontendSends(b, [1])
            case .passRequest(let topic):
                // Up as a request, not as the site's interest (BrokerLoop.fromSubscriber).
                passRequest(b, topic)
                return
            case .answerSnapshot(let snapshotTopic, let typePrefix):
                beginSnapshot(b, topic: snapshotTopic, typePrefix: typePrefix, asker: "site-\(site)")
            case .keep:
                break
            }
        }
        if upstream.joinsUpstream { passInterestUpstream(b, Frame(frame), key: key, relay: true) }
    }

    /// A site's interest on to the publishers (without the cache, whose frontend hears
    /// everything) and upstream, as ``BrokerLoop`` forwards it (BrokerLoop+Sites.swift).
    private func forwardSiteInterest(_ b: Int, _ frame: [UInt8], key: [UInt8]?) {
        let broker = brokers[b]
        if !broker.cacheEnabled {
            switch broker.coreDo({ $0.forwardToPublishers(frame, key: key, relay: true, now: instant) }) {
            case .forwardToPublishers(let send): frontendSends(b, send)
            case .publishersSendEverything: frontendSends(b, [1])
            default: break
            }
        }
        if broker.joinsUpstream { passInterestUpstream(b, Frame(frame), key: key, relay: true) }
    }

    /// A message down to a site, when what the site subscribed lets it through.
    func sendDown(_ site: Int, _ frames: [[UInt8]]) {
        guard sites[site].upSince != nil else { return }
        let topic = String(decoding: frames[0], as: UTF8.self)
        guard sites[site].upstreamHolds.contains(where: { topic.hasPrefix($0) }) else { return }
        schedule(.siteDown(site: site, epoch: sites[site].down.epoch, frames: frames), at: arrival(on: &sites[site].down))
    }

    /// A message to each site below `b` that follows its topic, but the one it came from
    /// (``BrokerLoop/sendToSites(_:hop:excluding:)``).
    func sendToSitesBelow(_ b: Int, _ frames: [Frame], hop: Frame, excluding: String?) {
        for topic in brokers[b].coreDo({ $0.siteTopics(for: frames[0], excluding: excluding) }) {
            guard let (name, _) = Topic.splitSite(topic), let site = sitesBelow(b).first(where: { brokers[$0].site.bytes.elementsEqual(name) }) else { continue }
            sendDown(site, [topic, frames[1].bytes, hop.bytes])
        }
    }

    /// A broker asks the sites below it to have `origin` advertise again ("R:" and its id, at
    /// every publisher of its frontend: the sites' up sockets among them).
    func askSitesBelowToReadvertise(_ b: Int, _ origin: String) {
        let topic = Array((Topic.readvertisePrefix + origin).utf8)
        passToSitesBelow(b, [1] + topic)
        passToSitesBelow(b, [0] + topic)
    }

    /// One of a broker frontend's subscriptions, to the up socket of each site below it connected.
    func passToSitesBelow(_ b: Int, _ frame: [UInt8]) {
        for site in sitesBelow(b) where sites[site].upSince != nil {
            schedule(.upstreamSubscribes(site: site, epoch: sites[site].down.epoch, frame: frame), at: arrival(on: &sites[site].down))
        }
    }

    // MARK: Both

    /// A request for the publishers, subscribed and withdrawn at once at them and above
    /// (``BrokerLoop``'s passRequest).
    func passRequest(_ b: Int, _ topic: [UInt8]) {
        frontendSends(b, [1] + topic)
        frontendSends(b, [0] + topic)
        if brokers[b].joinsUpstream {
            subscribeUpstream(b, [1] + topic)
            subscribeUpstream(b, [0] + topic)
        }
    }

    /// A broker's frontend (XSUB) (un)subscribes at its publishers: its nodes, and the up sockets
    /// of the sites below it.
    func frontendSends(_ b: Int, _ frame: [UInt8]) {
        guard brokers[b].frontendSubscriptions.passes(frame) else { return }
        let topic = String(decoding: frame.dropFirst(), as: UTF8.self)
        for index in nodes.indices where connectedToBroker(b, index) {
            schedule(.brokerAsks(broker: b, to: index, epoch: brokerLinks[b][index].down.epoch, topic: topic, subscribe: frame.first == 1),
                     at: arriveFromBroker(b, to: index))
        }
        passToSitesBelow(b, frame)
    }
}
