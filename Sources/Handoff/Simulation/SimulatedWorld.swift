import Foundation
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// A fleet of simulated nodes on one virtual clock, in one thread: every event (a tick, a
/// message arriving, a planned operation) runs in order of time, and ties in the order they were
/// queued, so one seed always gives the same run. The network between the nodes is ZeroMQ's in
/// direct mode, as the nodes see it: per connection in order, delayed, lost when the connection
/// breaks (a partition, a crash), subscriptions sent again when it comes back; a stopped process
/// reads what waited for it when it goes on.
final class SimulatedWorld {
    enum Event {
        case tick(node: Int)
        case bus(from: Int, to: Int, epoch: Int, topic: [UInt8], envelope: WireEnvelope)
        case subscription(from: Int, to: Int, epoch: Int, topic: String, subscribe: Bool)
        case planned(SimulationSchedule.Planned)
        case resume(node: Int)
        /// A node that shut down exits (`incarnation`: the process that shut down).
        case exit(node: Int, incarnation: Int)
        case continueRequest(from: Int, to: Int, epoch: Int, correlationID: UInt64, request: WireContinueRequest)
        case continueReply(from: Int, to: Int, epoch: Int, correlationID: UInt64, envelope: WireEnvelope)
        /// Will-save of an answer ended (`incarnation`: the originator's process it ran in).
        case saved(node: Int, incarnation: Int, answer: PendingAnswer)
        /// With brokers: a node's publisher → a broker's XSUB.
        case toBroker(broker: Int, from: Int, epoch: Int, topic: [UInt8], envelope: WireEnvelope)
        /// With brokers: a node's subscriber (un)subscribes at a broker's XPUB.
        case brokerSubscription(broker: Int, from: Int, epoch: Int, topic: String, subscribe: Bool)
        /// With brokers: a broker's XPUB → a node's subscriber.
        case fromBroker(broker: Int, to: Int, epoch: Int, topic: [UInt8], envelope: WireEnvelope)
        /// With brokers: a broker's XSUB (un)subscribes at a node's publisher (everything, or "R:").
        case brokerAsks(broker: Int, to: Int, epoch: Int, topic: String, subscribe: Bool)
        /// With brokers: a cache's next expiry (`incarnation`: the broker process it was set in).
        case brokerTick(broker: Int, incarnation: Int)
        /// With brokers: a round of a broker's loop while snapshot answers are under way.
        case brokerSnapshotSlice(broker: Int, incarnation: Int)
        /// At sites: a site's broker → the upstream's frontend (a bus message sent up, with its hop).
        case siteUp(site: Int, epoch: Int, frames: [[UInt8]])
        /// At sites: the upstream's backend → a site's broker (a bus message sent down, with its
        /// hop; or a snapshot's message).
        case siteDown(site: Int, epoch: Int, frames: [[UInt8]])
        /// At sites: a site's broker (un)subscribes at the upstream's backend (its interest, a
        /// snapshot, a request to advertise again).
        case leafSubscribes(site: Int, epoch: Int, frame: [UInt8])
        /// At sites: the upstream's frontend (un)subscribes at a site's broker (everything, or "R:").
        case upstreamSubscribes(site: Int, epoch: Int, frame: [UInt8])
        /// At sites: a held-back repeat of the upstream's subscriptions is due to pass, or a short
        /// upstream snapshot to be asked again, as the broker's poll wakes for it (`incarnation`:
        /// the broker process that held it).
        case upstreamSubscriptionsDue(site: Int, incarnation: Int)
        /// A continuation stream frame on the connection between the stream's two nodes.
        case streamFrame(stream: Int, to: SimulatedStream.Side, epoch: Int, kind: WireStreamFrame.OneOf_Kind, payload: Frame?)
        /// A slow or pausing reader reads again.
        case streamRead(stream: Int, side: SimulatedStream.Side)
        /// A stream open's wait for its answer ends.
        case streamOpenTimeout(stream: Int)
    }

    struct Queued {
        let at: Duration
        let order: UInt64
        let event: Event
    }

    /// A connection's state, each direction of a pair of nodes.
    struct Link {
        var epoch = 0
        var lastArrival = Duration.zero
        var duplicateNext = false
    }

    let options: SimulationOptions
    /// The invariants' bounds for these options, worked out once (they are asked after every step).
    let bounds: SimulationInvariants.Bounds
    let origin = ContinuousClock.now
    let epochDate = Date(timeIntervalSince1970: 1_900_000_000)
    private(set) var now = Duration.zero
    var instant: ContinuousClock.Instant { origin + now }
    /// True time as a wall clock; a node reads its own clock (``date(of:)``).
    var date: Date { epochDate.addingTimeInterval(now.seconds) }
    let clocks: SimulatedClocks

    var nodes: [SimulatedNode] = []
    var links: [[Link]]
    /// With brokers (one, or a pair): each, each node's connection to it (up: node → broker, down:
    /// broker → node), the partitions in force between it and each node (counted), and since when
    /// each node's connection to it has been up; all by broker, then node.
    let brokers: [SimulatedBroker]
    var brokerLinks: [[(up: Link, down: Link)]]
    var brokerPartitions: [[Int: Int]]
    var brokerUpSince: [[Int: Duration]]
    /// At sites: each site's link to its upstream, by site (site 0, the tree's root, has none).
    var sites: [SiteLinkState]
    /// A broker's place in a node's ``SimulatedNode/subscriptionsOfPeer``.
    func brokerPeer(_ b: Int) -> Int { options.nodes + b }
    /// How many answer a snapshot request: the brokers, or every other node.
    var snapshotAnswerers: Int { brokers.isEmpty ? options.nodes - 1 : options.hasSites ? 1 : brokers.count }
    /// Partitions in force between two nodes (lower index first), counted.
    var partitions: [Int: Int] = [:]
    /// Since when each pair's connection has been up (key as ``partitions``).
    var upSince: [Int: Duration] = [:]
    private var queue = EventQueue()
    /// The messages' delays and the snapshot tokens, drawn from the seed.
    var network: SimulationRandom
    var truth = SimulationTruth()
    /// The invariants' own bookkeeping: did-updates already checked, since when each held
    /// activity has lagged behind a version its node knows, and the ended activities the check of
    /// bounds has set aside (SimulationInvariants).
    var didUpdatesChecked = 0
    var heldLagging: [String: Duration] = [:]
    var forgottenActivities = ForgottenActivities()
    /// The nodes that follow each activity type, by index (what a node follows never changes in a
    /// run): worked out once per type (``followers(ofType:)``), not for each activity.
    var followersOfType: [String: [Int]] = [:]
    let trace: ((String) -> Void)?
    /// The delegate of activities whose will-save runs (activities hold their delegate weakly).
    let saver = SimulatedSaver()
    /// The continuation streams opened so far, by number, and the node each was opened with.
    var streams: [SimulatedStream] = []
    var streamOrigins: [Int] = []
    /// Streams draw their delays and tokens apart, so that a seed's other events run as they did
    /// before streams were simulated; their frames keep order per connection.
    var streamNetwork: SimulationRandom
    /// The followers' snapshot backoffs draw their jitter apart too, for the same reason.
    private var jitters: SimulationRandom
    var streamArrivals: [Int: Duration] = [:]
    /// Nodes that shut down, for the invariant that their withdrawals reach their followers.
    var departures: [Departure] = []
    private(set) var steps = 0
    private(set) var deliveries = 0
    /// What made-up presences cost (``SimulationReport``): the presences, the followers' rounds
    /// of snapshot requests, and the origins brokers asked to advertise again, singly and all.
    var madeUpPresences = 0, snapshotRounds = 0, originsAsked = 0, everyoneAsked = 0
    /// Messages a broker took from its publishers that none of its subscribers followed (``SimulationReport``).
    var unfollowedAtBrokers = 0

    /// `follows`: what each node follows, instead of drawing it from the seed (tests).
    init(options: SimulationOptions, seed: UInt64, hostile: Set<Int>, follows: [[String]]? = nil, trace: ((String) -> Void)?) {
        self.options = options
        bounds = SimulationInvariants.Bounds(options)
        self.trace = trace
        network = SimulationRandom(seed: seed ^ 0x5DEE_CE66_D1CE_4E5B)
        streamNetwork = SimulationRandom(seed: seed ^ 0x57E4_A3F0_0D15_EA5E)
        jitters = SimulationRandom(seed: seed ^ 0x1F7E_B0C5_0FF5_EED5)
        links = Array(repeating: Array(repeating: Link(), count: options.nodes), count: options.nodes)
        brokers = options.hasSites
            // (Without the cache, the hub only: a broker that joins an upstream needs its cache, Broker.start.)
            ? (0..<options.sites).map { site in SimulatedBroker(site: "site-\(site)", joinsUpstream: site > 0, cacheEnabled: options.lastValueCache || site > 0) }
            : (0..<options.brokerCount).map { _ in SimulatedBroker(cacheEnabled: options.lastValueCache) }
        sites = options.hasSites ? (0..<options.sites).map { _ in SiteLinkState() } : []
        brokerLinks = Array(repeating: Array(repeating: (Link(), Link()), count: options.nodes), count: options.brokerCount)
        brokerPartitions = Array(repeating: [:], count: options.brokerCount)
        brokerUpSince = Array(repeating: [:], count: options.brokerCount)
        clocks = SimulatedClocks(nodes: options.nodes, skew: options.clockSkew, seed: seed)
        var keys = SimulationRandom(seed: seed ^ 0xA5A5_A5A5_A5A5_A5A5)
        for index in 0..<options.nodes {
            let drawn = SimulationSchedule.followed[Int(keys.next() % UInt64(SimulationSchedule.followed.count))]
            let follows = follows?[index] ?? drawn
            nodes.append(SimulatedNode(index: index, follows: follows, hostile: hostile.contains(index), peers: snapshotAnswerers,
                                       sliceSize: options.sliceSize ?? Advertiser.bulkSlice,
                                       snapshotsAtOnce: options.snapshotsAtOnce ?? Follower.maxSnapshotsUnderWay, now: instant, date: date(of: index), random: &keys))
        }
        for node in nodes { giveRandomness(to: node) }
    }

    /// Hands `node`'s machines the run's randomness (tokens, backoff jitter), as it starts and
    /// each time it starts again.
    func giveRandomness(to node: SimulatedNode) {
        node.useRandomness(tokens: { [unowned self] in self.nextToken() }, jitter: { [unowned self] in self.nextJitter() })
    }

    /// A delay drawn from the run's randomness.
    func delay(_ range: ClosedRange<Duration>) -> Duration { network.duration(range) }

    /// A snapshot token from the run's randomness.
    func nextToken() -> String { network.token() }

    /// A snapshot backoff's jitter (in 0..<1) from the run's randomness.
    func nextJitter() -> Double { Double.random(in: 0..<1, using: &jitters) }

    func pair(_ a: Int, _ b: Int) -> Int { min(a, b) * options.nodes + max(a, b) }

    func connected(_ a: Int, _ b: Int) -> Bool {
        a != b && nodes[a].alive && nodes[b].alive && partitions[pair(a, b), default: 0] == 0
    }

    func schedule(_ event: Event, at: Duration) {
        queue.push(Queued(at: at, order: queue.nextOrder(), event: event))
    }

    func log(_ line: @autoclosure () -> String) {
        trace?("[\(String(format: "%9.3f", now.seconds))] \(line())")
    }

    // MARK: Running

    /// Starts every node, then runs events until the duration is over or `check` finds a failure.
    func run(_ schedule: SimulationSchedule, skipping: Set<Int>, check: (SimulatedWorld, Int?) -> SimulationFailure?) -> SimulationFailure? {
        for a in nodes.indices { for b in nodes.indices where a < b { upSince[pair(a, b)] = .zero } }
        for b in brokers.indices {
            for node in nodes { connectBroker(b, node.index, notify: false) }
            self.schedule(.brokerTick(broker: b, incarnation: 0), at: .zero)
        }
        for site in sites.indices.dropFirst() { connectSite(site) }
        for node in nodes {
            start(node.index)
            self.schedule(.tick(node: node.index), at: network.duration(.zero...(.milliseconds(250))))
        }
        for planned in schedule.planned where !skipping.contains(planned.entry) { self.schedule(.planned(planned), at: planned.at) }
        while let next = queue.pop(), next.at <= options.duration {
            now = next.at
            steps += 1
            let touched = handle(next.event)
            if let failure = check(self, touched) { return failure }
        }
        return nil
    }

    /// Runs one event; returns the node whose knowledge it may have changed.
    private func handle(_ event: Event) -> Int? {
        switch event {
        case .tick(let index):
            let node = nodes[index]
            guard node.alive else { return nil }
            if let until = node.stoppedUntil, now < until { return nil }  // `resume` ticks it
            perform(index, node.followerDo { $0.tick(now: instant, date: date(of: index)) })
            endRequests(node.client.expire(now: instant), of: index)
            retryRefreshes(at: index)
            let tick = node.advertiserDo { $0.tick(now: instant, date: date(of: index)) }
            for activity in tick.expired { truth.ended(activity.id, at: now) }
            if let note = tick.note { log("\(node.id): \(note)") }
            publish(from: index, tick.messages)
            tickStreams(at: index)
            if tick.presence { node.followerDo { $0.pruneSequences(now: instant) } }
            let next = min(now + .milliseconds(250), node.advertiserDo { $0.nextDue } - origin)
            schedule(.tick(node: index), at: max(next, now + .milliseconds(1)))
            return index
        case .resume(let index):
            let node = nodes[index]
            guard node.alive, let until = node.stoppedUntil, now >= until else { return nil }
            node.stoppedUntil = nil
            node.resumedAt = now
            log("\(node.id) goes on")
            schedule(.tick(node: index), at: now)
            return nil
        case .exit(let index, let incarnation):
            exit(index, incarnation: incarnation)
            return nil
        case .bus(let from, let to, let epoch, let topic, let envelope):
            guard arrives(event, from: from, to: to, epoch: epoch) else { return nil }
            return deliver(envelope, topic: topic, to: to, connectionKey: nodes[from].key)
        case .subscription(let from, let to, let epoch, let topic, let subscribe):
            guard arrives(event, from: from, to: to, epoch: epoch) else { return nil }
            let node = nodes[to]
            if subscribe {
                node.subscriptionsOfPeer[from, default: []].insert(topic)
                let (note, messages) = node.advertiserDo { $0.subscribed(to: Array(topic.utf8)[...], bus: .direct, now: instant) }
                if let note { log("\(node.id): \(note)") }
                publish(from: to, messages)
            } else {
                node.subscriptionsOfPeer[from]?.remove(topic)
            }
            return nil
        case .planned(let planned):
            return apply(planned.operation)
        case .continueRequest(let from, let to, let epoch, let correlationID, let request):
            guard arrives(event, from: from, to: to, epoch: epoch) else { return nil }
            serve(request, from: from, at: to, correlationID: correlationID)
            return nil
        case .continueReply(let from, let to, let epoch, let correlationID, let envelope):
            guard arrives(event, from: from, to: to, epoch: epoch) else { return nil }
            replied(envelope, correlationID: correlationID, at: to)
            return nil
        case .saved(let index, let incarnation, let answer):
            guard nodes[index].alive, nodes[index].incarnation == incarnation, readsNow(event, at: index) else { return nil }
            answer.activity.didSave()
            handOver(answer, at: index)
            return nil
        case .toBroker(let b, let from, let epoch, let topic, let envelope):
            guard brokers[b].alive, brokerLinks[b][from].up.epoch == epoch else { return nil }
            brokerReceives(b, envelope, topic: topic, from: from)
            return nil
        case .brokerSubscription(let b, let from, let epoch, let topic, let subscribe):
            guard brokers[b].alive, brokerLinks[b][from].up.epoch == epoch else { return nil }
            brokerSubscription(b, topic, subscribe: subscribe, from: from)
            return nil
        case .fromBroker(let b, let to, let epoch, let topic, let envelope):
            guard brokerLinks[b][to].down.epoch == epoch, nodes[to].alive, readsNow(event, at: to) else { return nil }
            return deliver(envelope, topic: topic, to: to, connectionKey: nil)
        case .brokerAsks(let b, let to, let epoch, let topic, let subscribe):
            guard brokerLinks[b][to].down.epoch == epoch, nodes[to].alive, readsNow(event, at: to) else { return nil }
            brokerAsks(b, to, topic: topic, subscribe: subscribe)
            return nil
        case .brokerTick(let b, let incarnation):
            brokerTick(b, incarnation: incarnation)
            return nil
        case .brokerSnapshotSlice(let b, let incarnation):
            brokerSnapshotSlice(b, incarnation: incarnation)
            return nil
        case .upstreamSubscriptionsDue(let site, let incarnation):
            guard brokers[site].alive, brokers[site].incarnation == incarnation else { return nil }
            expireUpstreamSnapshots(site)
            passDueUpstreamSubscriptions(site)
            return nil
        case .siteUp, .siteDown, .leafSubscribes, .upstreamSubscribes:
            handleSite(event)
            return nil
        case .streamFrame, .streamRead, .streamOpenTimeout:
            handleStream(event)
            return nil
        }
    }

    /// A bus message reaches a node's follower (unless the node drops it unread, as its own echo).
    private func deliver(_ envelope: WireEnvelope, topic: [UInt8], to: Int, connectionKey: Data?) -> Int {
        let node = nodes[to]
        deliveries += 1
        let ownEcho = node.followerDo { follower in
            follower.dropsUnread(topic: topic) {
                guard envelope.sender.nodeID == node.id, let bytes: [UInt8] = try? envelope.serializedBytes() else { return false }
                return bytes.withUnsafeBytes { WireOwnEcho.matches($0, nodeID: Array(node.id.utf8)) }
            }
        }
        if ownEcho { return to }
        if node.hostile, envelope.sender.nodeID != node.id {
            node.heard.append((topic, envelope))
            if node.heard.count > 64 { node.heard.removeFirst() }
        }
        let actions = node.followerDo {
            $0.received(envelope, topic: topic, connectionKey: connectionKey, now: instant, date: date(of: to))
        }
        perform(to, actions)
        return to
    }

    /// Whether `event`, a message on the connection `from` → `to`, reaches a node that reads it
    /// now: not when the connection broke since it was sent or the node died (it is lost), nor
    /// while the node is stopped (it waits for it, queued again for when it goes on).
    private func arrives(_ event: Event, from: Int, to: Int, epoch: Int) -> Bool {
        guard links[from][to].epoch == epoch, nodes[to].alive else { return false }
        return readsNow(event, at: to)
    }

    /// Whether node `index` runs now; while it is stopped, `event` waits for it.
    func readsNow(_ event: Event, at index: Int) -> Bool {
        guard let until = nodes[index].stoppedUntil, now < until else { return true }
        schedule(event, at: until)
        return false
    }

    // MARK: Carrying out

    /// A node's process starts: its subscribers subscribe as ``Node`` does (the standing
    /// subscriptions, then what it follows).
    func start(_ index: Int) {
        let node = nodes[index]
        perform(index, Follower.standingSubscriptions.map { .subscribe($0) })
        perform(index, node.followerDo { $0.follow(node.follows) })
    }

    /// Sends what a node's advertiser decided to every peer subscribed to its topic.
    func publish(from index: Int, _ messages: [Advertiser.Message]) {
        let node = nodes[index]
        for message in messages {
            let envelope = node.envelope(message.body, date: date(of: index))
            send(from: index, topic: message.topic, envelope)
        }
    }

    /// Sends one bus message to the peers whose subscriptions match (ZeroMQ's prefix filter), or,
    /// with a broker, to the broker once its subscription has reached this node's publisher.
    func send(from index: Int, topic: [UInt8], _ envelope: WireEnvelope) {
        let topicString = String(decoding: topic, as: UTF8.self)
        if !brokers.isEmpty {
            for b in brokers.indices where connectedToBroker(b, index) {
                guard nodes[index].subscriptionsOfPeer[brokerPeer(b)]?.contains(where: { topicString.hasPrefix($0) }) == true else { continue }
                schedule(.toBroker(broker: b, from: index, epoch: brokerLinks[b][index].up.epoch, topic: topic, envelope: envelope), at: arriveAtBroker(b, from: index))
            }
            return
        }
        for peer in nodes.indices where connected(index, peer) {
            guard let subscribed = nodes[index].subscriptionsOfPeer[peer], subscribed.contains(where: { topicString.hasPrefix($0) }) else { continue }
            let arrival = arrive(from: index, to: peer)
            schedule(.bus(from: index, to: peer, epoch: links[index][peer].epoch, topic: topic, envelope: envelope), at: arrival)
            if links[index][peer].duplicateNext {
                links[index][peer].duplicateNext = false
                schedule(.bus(from: index, to: peer, epoch: links[index][peer].epoch, topic: topic, envelope: envelope), at: arrive(from: index, to: peer))
            }
        }
    }

    func sendSubscription(from: Int, to: Int, _ topic: String, subscribe: Bool) {
        schedule(.subscription(from: from, to: to, epoch: links[from][to].epoch, topic: topic, subscribe: subscribe), at: arrive(from: from, to: to))
    }
}
