import Foundation
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// The bus through a broker, or a pair of them (each node publishes to both and subscribes at
/// both, as `Configuration.Bus.brokers` does): their connections to the nodes, what each does with
/// what arrives (the production ``BrokerCore`` decides), and what goes wrong with them (a crash
/// that loses a cache, a node cut off from one). `b` is a broker's index.
extension SimulatedWorld {
    func connectedToBroker(_ b: Int, _ index: Int) -> Bool {
        brokers[b].alive && nodes[index].alive && brokerPartitions[b][index, default: 0] == 0 && (!options.hasSites || b == site(of: index))
    }

    /// At sites, the site a node is at (its broker's index).
    func site(of index: Int) -> Int { index % options.sites }

    /// Since when two nodes have reached each other over the bus: directly, or each through a
    /// broker (the later of their connections to it; of a pair, the broker that joined them first).
    func reachableSince(_ a: Int, _ b: Int) -> Duration? {
        guard !brokers.isEmpty else { return upSince[pair(a, b)] }
        if options.hasSites {
            guard let up = brokerUpSince[site(of: a)][a] else { return nil }
            return pathUpSince(fromSite: site(of: a), to: b).map { max($0, up) }
        }
        // (A loop, not compactMap and min: the invariants ask after every step.)
        var earliest: Duration?
        for broker in brokers.indices {
            guard let up = brokerUpSince[broker][a], let other = brokerUpSince[broker][b] else { continue }
            let both = max(up, other)
            if earliest.map({ both < $0 }) ?? true { earliest = both }
        }
        return earliest
    }

    /// When a message a node sends now reaches the broker, in order after the last one.
    func arriveAtBroker(_ b: Int, from index: Int) -> Duration {
        arrival(on: &brokerLinks[b][index].up)
    }

    /// When a message the broker sends now reaches a node, in order after the last one.
    func arriveFromBroker(_ b: Int, to index: Int) -> Duration {
        arrival(on: &brokerLinks[b][index].down)
    }

    /// A node's connection to the broker comes up: the broker's XSUB sends the node's publisher
    /// all its subscriptions (everything, with the cache), the node's subscriber sends what it
    /// subscribes to, and (`notify`) its follower hears that the bus came back.
    func connectBroker(_ b: Int, _ index: Int, notify: Bool) {
        guard connectedToBroker(b, index) else { return }
        brokerUpSince[b][index] = now
        for topic in brokers[b].frontendSubscriptions.topics {
            schedule(.brokerAsks(broker: b, to: index, epoch: brokerLinks[b][index].down.epoch, topic: topic, subscribe: true), at: arriveFromBroker(b, to: index))
        }
        for topic in nodes[index].subscriptions.sorted() { subscribeAtBroker(b, from: index, topic, subscribe: true) }
        if notify { perform(index, nodes[index].followerDo { $0.busReconnected(to: "tcp://\(brokerName(b))", now: instant) }) }
    }

    /// "the broker", or of a pair "broker 0" and "broker 1", for the trace.
    func brokerName(_ b: Int) -> String { options.hasSites ? "site-\(b)'s broker" : brokers.count == 1 ? "the broker" : "broker \(b)" }

    /// A node's connection to the broker breaks: what was on its way is lost, and each side
    /// forgets the other's subscriptions. A broker that lives on hears libzmq's own withdrawal
    /// (no key) of each topic the node alone held, as XPUB passes them when a connection goes.
    func disconnectBroker(_ b: Int, _ index: Int, brokerLivesOn: Bool = true) {
        brokerLinks[b][index].up.epoch += 1
        brokerLinks[b][index].down.epoch += 1
        brokerLinks[b][index].up.lastArrival = now
        brokerLinks[b][index].down.lastArrival = now
        nodes[index].subscriptionsOfPeer[brokerPeer(b)] = nil
        let held = brokers[b].subscriptionsOf.removeValue(forKey: index) ?? []
        brokerUpSince[b][index] = nil
        guard brokerLivesOn else { return }
        for topic in held.sorted() where !brokers[b].holds(topic) {
            brokerHears(b, topic, subscribe: false, key: nil, asker: nodes[index].id)
        }
    }

    /// A node's subscriber (un)subscribes at the broker.
    func subscribeAtBroker(_ b: Int, from index: Int, _ topic: String, subscribe: Bool) {
        guard connectedToBroker(b, index) else { return }
        schedule(.brokerSubscription(broker: b, from: index, epoch: brokerLinks[b][index].up.epoch, topic: topic, subscribe: subscribe),
                 at: arriveAtBroker(b, from: index))
    }

    /// A publisher's message at the broker: its core decides; forwarded, it goes to every node
    /// whose subscriber subscribed to a prefix of its topic.
    func brokerReceives(_ b: Int, _ envelope: WireEnvelope, topic: [UInt8], from index: Int) {
        let broker = brokers[b]
        guard let bytes: [UInt8] = try? envelope.serializedBytes() else { return }
        let frames = [Frame(topic), Frame(bytes)]
        if !options.hasSites, !followedAtBroker(b, topic) { unfollowedAtBrokers += 1 }
        let verdict = broker.coreDo { $0.publisherMessage(frames, connectionKey: [UInt8](nodes[index].key), now: instant) }
        carryOut(b, verdict, frames, envelope: envelope, hop: broker.localHop, fromSite: nil, from: nodes[index].id)
    }

    /// Carries out what a broker's core decided of a publisher's message (a node's, or at the
    /// upstream, one a site sent up), as ``BrokerLoop`` does: asks to advertise again, and the
    /// message to the subscribers that follow its topic, to the sites below that follow it (but
    /// the one it came from) and upstream.
    func carryOut(_ b: Int, _ verdict: BrokerCore.PublisherVerdict, _ frames: [Frame], envelope: WireEnvelope, hop: Frame, fromSite: String?, from sender: String) {
        let broker = brokers[b]
        let topic = frames[0].bytes
        switch verdict {
        case .forward(let askToReadvertise, _):
            if askToReadvertise != nil { originsAsked += 1 }
            if let origin = askToReadvertise, let asked = nodes.firstIndex(where: { $0.id == origin }), connectedToBroker(b, asked) {
                log("\(brokerName(b)) asks \(origin) to advertise again what its cache lacks")
                let topic = Topic.readvertisePrefix + origin
                let epoch = brokerLinks[b][asked].down.epoch
                schedule(.brokerAsks(broker: b, to: asked, epoch: epoch, topic: topic, subscribe: true), at: arriveFromBroker(b, to: asked))
                schedule(.brokerAsks(broker: b, to: asked, epoch: epoch, topic: topic, subscribe: false), at: arriveFromBroker(b, to: asked))
            }
            if options.hasSites, let origin = askToReadvertise { askSitesBelowToReadvertise(b, origin) }
            if broker.coreDo({ $0.takeReadvertiseEveryone() }) {
                everyoneAsked += 1
                log("\(brokerName(b)) asks every node to advertise again: too many lack at once")
                for asked in nodes.indices where connectedToBroker(b, asked) {
                    let epoch = brokerLinks[b][asked].down.epoch
                    schedule(.brokerAsks(broker: b, to: asked, epoch: epoch, topic: "", subscribe: true), at: arriveFromBroker(b, to: asked))
                }
                if options.hasSites { passToSitesBelow(b, [1]) }
            }
            sendToSubscribers(b, topic: topic, envelope: envelope)
            if options.hasSites {
                sendToSitesBelow(b, frames, hop: hop, excluding: fromSite)
                if broker.joinsUpstream { sendUp(b, frames + [hop]) }
            }
        case .forged(let reason):
            broker.refused += 1
            log("\(brokerName(b)) drops a message from \(sender): it \(reason)")
        case .overQuota(let activityID, let origin):
            broker.refused += 1
            log("\(brokerName(b)) drops \(activityID): \(origin) is over its quota")
        case .overKeyQuota(let activityID, _):
            broker.refused += 1
            log("\(brokerName(b)) drops \(activityID): its key is over its quota")
        case .pastLengths(let reason):
            broker.refused += 1
            log("\(brokerName(b)) drops a message from \(sender): it \(reason)")
        }
    }

    /// A node's subscriber (un)subscribes at the broker; a snapshot request is answered to it
    /// alone from the cache, then the reply.
    func brokerSubscription(_ b: Int, _ topic: String, subscribe: Bool, from index: Int) {
        let broker = brokers[b]
        if subscribe {
            broker.subscriptionsOf[index, default: []].insert(topic)
        } else if broker.subscriptionsOf[index]?.remove(topic) != nil, broker.holds(topic) {
            // XPUB (not verbose for withdrawals) passes one only when the last holder withdraws.
            return
        }
        // As XPUB hands it over: with the metadata of the connection it came on, the node's key.
        brokerHears(b, topic, subscribe: subscribe, key: [UInt8](nodes[index].key), asker: nodes[index].id)
    }

    /// A (un)subscription XPUB passed to a broker's core (`key`: the connection's; none on one
    /// libzmq made itself), and, at a site, on upstream as the site's interest: in
    /// ``BrokerLoop/fromSubscriber(_:)``'s order, and a request not as interest (it went up as
    /// a request).
    private func brokerHears(_ b: Int, _ topic: String, subscribe: Bool, key: [UInt8]?, asker: String) {
        let broker = brokers[b]
        let frame = Frame([subscribe ? 1 : 0] + Array(topic.utf8))
        let verdict = broker.coreDo { $0.subscriberMessage([frame], key: key, relay: false, now: instant) }
        switch verdict {
        case .answerSnapshot(let snapshotTopic, let typePrefix):
            beginSnapshot(b, topic: snapshotTopic, typePrefix: typePrefix, asker: asker)
        case .forwardToPublishers(let forwarded):
            log("\(brokerName(b)) \(forwarded.first == 1 ? "asks its publishers for" : "withdraws at its publishers") \(String(decoding: forwarded.dropFirst(), as: UTF8.self))")
            frontendSends(b, forwarded)
        case .publishersSendEverything:
            log("\(brokerName(b)) has its publishers send everything: its subscribers follow more prefixes than it forwards")
            frontendSends(b, [1])
        case .passRequest(let topic):
            // (A request, or without the cache a further subscription to everything: no
            // simulated node makes either; carried out as BrokerLoop does all the same.)
            passRequest(b, topic)
            return
        case .keep:
            break
        }
        if broker.joinsUpstream { passInterestUpstream(b, frame, key: key, relay: false) }
    }

    /// Whether some node's subscriber at a broker follows a topic.
    private func followedAtBroker(_ b: Int, _ topic: [UInt8]) -> Bool {
        let topic = String(decoding: topic, as: UTF8.self)
        return nodes.indices.contains { subscriberFollows(b, $0, topic) }
    }

    /// Whether a node's subscriber, connected to a broker, subscribed there to a prefix of `topic`.
    private func subscriberFollows(_ b: Int, _ peer: Int, _ topic: String) -> Bool {
        connectedToBroker(b, peer) && brokers[b].subscriptionsOf[peer]?.contains(where: { topic.hasPrefix($0) }) == true
    }

    /// A snapshot request at a broker, as ``BrokerLoop`` takes it: answered at once (busy), or
    /// queued and answered a slice a round (``brokerSnapshotSlice(_:incarnation:)``).
    func beginSnapshot(_ b: Int, topic: [UInt8], typePrefix: String, asker: String) {
        let broker = brokers[b]
        if let reply = broker.coreDo({ $0.beginSnapshot(topic: topic, typePrefix: typePrefix, now: instant) }) {
            log("\(brokerName(b)) answers \(asker)'s snapshot of \(typePrefix) at once\(broker.cacheEnabled ? ", busy" : ", with no cache")")
            publishOnBackend(b, topic: topic, bytes: reply)
            return
        }
        log("\(brokerName(b)) begins \(asker)'s snapshot of \(typePrefix)")
        if !broker.sliceScheduled {
            broker.sliceScheduled = true
            schedule(.brokerSnapshotSlice(broker: b, incarnation: broker.incarnation), at: now)
        }
    }

    /// A round of a broker's loop with snapshots under way: their next slice, then the next round.
    func brokerSnapshotSlice(_ b: Int, incarnation: Int) {
        let broker = brokers[b]
        guard broker.alive, broker.incarnation == incarnation else { return }
        broker.sliceScheduled = broker.core.snapshotsUnderWay
        guard broker.sliceScheduled else { return }
        broker.coreDo { core in
            core.snapshotSlice(now: instant) { topic, bytes in
                publishOnBackend(b, topic: topic, bytes: bytes)
                return true
            }
        }
        broker.sliceScheduled = broker.core.snapshotsUnderWay
        if broker.sliceScheduled { schedule(.brokerSnapshotSlice(broker: b, incarnation: incarnation), at: now + .microseconds(50)) }
    }

    /// A message of a broker's own on its XPUB: to each node and site below that follows its topic.
    private func publishOnBackend(_ b: Int, topic: [UInt8], bytes: [UInt8]) {
        guard let envelope = try? WireEnvelope.decode(Data(bytes)) else { return }
        if case .snapshotReply(let reply) = envelope.body {
            log("\(brokerName(b)) ends a snapshot of \(reply.typePrefix): \(reply.count) advertisements")
        }
        sendToSubscribers(b, topic: topic, envelope: envelope)
        if options.hasSites { for site in sitesBelow(b) { sendDown(site, [topic, bytes]) } }
    }

    /// A cache's next expiry: what expired taken out (and, at a site, the upstream's housekeeping).
    func brokerTick(_ b: Int, incarnation: Int) {
        let broker = brokers[b]
        guard broker.alive, broker.incarnation == incarnation else { return }
        _ = broker.coreDo { $0.expire(now: instant) }
        if broker.joinsUpstream {
            expireUpstreamSnapshots(b)
            passDueUpstreamSubscriptions(b)
        }
        let next = broker.core.nextExpiry.map { min($0 - origin, now + .seconds(1)) } ?? now + .seconds(1)
        schedule(.brokerTick(broker: b, incarnation: incarnation), at: max(next, now + .milliseconds(1)))
    }

    /// A message to a broker's own subscribers that follow its topic.
    func sendToSubscribers(_ b: Int, topic: [UInt8], envelope: WireEnvelope) {
        let topicString = String(decoding: topic, as: UTF8.self)
        for peer in nodes.indices where subscriberFollows(b, peer, topicString) {
            schedule(.fromBroker(broker: b, to: peer, epoch: brokerLinks[b][peer].down.epoch, topic: topic, envelope: envelope), at: arriveFromBroker(b, to: peer))
        }
    }

    /// The broker's XSUB (un)subscribes at a node's publisher: everything (it connected), a
    /// prefix its subscribers follow (without the cache), or "R:" and the node's id (advertise
    /// again what the cache lacks).
    func brokerAsks(_ b: Int, _ index: Int, topic: String, subscribe: Bool) {
        let node = nodes[index]
        guard subscribe else {
            node.subscriptionsOfPeer[brokerPeer(b)]?.remove(topic)
            return
        }
        node.subscriptionsOfPeer[brokerPeer(b), default: []].insert(topic)
        let readvertiseTopic = Array((Topic.readvertisePrefix + node.id).utf8)
        let (note, messages) = node.advertiserDo {
            $0.subscribed(to: Array(topic.utf8)[...], bus: .brokered(readvertiseTopic: readvertiseTopic), now: instant)
        }
        if let note { log("\(node.id): \(note)") }
        publish(from: index, messages)
    }

    // MARK: Faults

    func crashBroker(_ b: Int) {
        guard brokers[b].alive else { return }
        log("\(brokerName(b)) is killed (-9)")
        for index in nodes.indices where connectedToBroker(b, index) { disconnectBroker(b, index, brokerLivesOn: false) }
        if options.hasSites { for site in sitesJoined(to: b) { disconnectSite(site) } }
        brokers[b].alive = false
    }

    func restartBroker(_ b: Int) {
        guard !brokers[b].alive else { return }
        log("\(brokerName(b)) starts again, its cache empty")
        brokers[b].restart()
        if options.hasSites { for site in sitesJoined(to: b) { connectSite(site) } }
        for index in nodes.indices { connectBroker(b, index, notify: true) }
        schedule(.brokerTick(broker: b, incarnation: brokers[b].incarnation), at: now)
    }

    func partitionBroker(_ b: Int, _ index: Int) {
        if brokerPartitions[b][index, default: 0] == 0, connectedToBroker(b, index) { disconnectBroker(b, index) }
        brokerPartitions[b][index, default: 0] += 1
    }

    func healBroker(_ b: Int, _ index: Int) {
        guard let count = brokerPartitions[b][index], count > 0 else { return }
        brokerPartitions[b][index] = count == 1 ? nil : count - 1
        if count == 1 { connectBroker(b, index, notify: true) }
    }

    /// A node's process ends or starts: its connections to every broker break, or come up.
    func disconnectBrokers(_ index: Int) {
        for b in brokers.indices where connectedToBroker(b, index) { disconnectBroker(b, index) }
    }

    func connectBrokers(_ index: Int, notify: Bool) {
        for b in brokers.indices { connectBroker(b, index, notify: notify) }
    }
}
