import Foundation
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// The bus through a broker: its connections to the nodes, what it does with what arrives (the
/// production ``BrokerCore`` decides), and what goes wrong with it (a crash that loses its cache,
/// a node cut off from it).
extension SimulatedWorld {
    func connectedToBroker(_ index: Int) -> Bool {
        guard let broker else { return false }
        return broker.alive && nodes[index].alive && brokerPartitions[index, default: 0] == 0
    }

    /// Since when two nodes have reached each other over the bus: directly, or each through the
    /// broker (the later of their connections to it).
    func reachableSince(_ a: Int, _ b: Int) -> Duration? {
        guard broker != nil else { return upSince[pair(a, b)] }
        guard let up = brokerUpSince[a], let other = brokerUpSince[b] else { return nil }
        return max(up, other)
    }

    /// When a message a node sends now reaches the broker, in order after the last one.
    func arriveAtBroker(from index: Int) -> Duration {
        arrival(on: &brokerLinks[index].up)
    }

    /// When a message the broker sends now reaches a node, in order after the last one.
    func arriveFromBroker(to index: Int) -> Duration {
        arrival(on: &brokerLinks[index].down)
    }

    /// A node's connection to the broker comes up: the broker's XSUB subscribes to everything at
    /// the node's publisher, the node's subscriber sends what it subscribes to, and (`notify`) its
    /// follower hears that the bus came back.
    func connectBroker(_ index: Int, notify: Bool) {
        guard connectedToBroker(index) else { return }
        brokerUpSince[index] = now
        schedule(.brokerAsks(to: index, epoch: brokerLinks[index].down.epoch, topic: "", subscribe: true), at: arriveFromBroker(to: index))
        for topic in nodes[index].subscriptions.sorted() { subscribeAtBroker(from: index, topic, subscribe: true) }
        if notify { perform(index, nodes[index].followerDo { $0.busReconnected(to: "tcp://broker", now: instant) }) }
    }

    /// A node's connection to the broker breaks: what was on its way is lost, and each side
    /// forgets the other's subscriptions.
    func disconnectBroker(_ index: Int) {
        brokerLinks[index].up.epoch += 1
        brokerLinks[index].down.epoch += 1
        brokerLinks[index].up.lastArrival = now
        brokerLinks[index].down.lastArrival = now
        nodes[index].subscriptionsOfPeer[brokerPeer] = nil
        broker?.subscriptionsOf[index] = nil
        brokerUpSince[index] = nil
    }

    /// A node's subscriber (un)subscribes at the broker.
    func subscribeAtBroker(from index: Int, _ topic: String, subscribe: Bool) {
        guard connectedToBroker(index) else { return }
        schedule(.brokerSubscription(from: index, epoch: brokerLinks[index].up.epoch, topic: topic, subscribe: subscribe),
                 at: arriveAtBroker(from: index))
    }

    /// A publisher's message at the broker: its core decides; forwarded, it goes to every node
    /// whose subscriber subscribed to a prefix of its topic.
    func brokerReceives(_ envelope: WireEnvelope, topic: [UInt8], from index: Int) {
        guard let broker, let bytes: [UInt8] = try? envelope.serializedBytes() else { return }
        let verdict = broker.coreDo {
            $0.publisherMessage([Frame(topic), Frame(bytes)], connectionKey: [UInt8](nodes[index].key), now: instant)
        }
        switch verdict {
        case .forward(let askToReadvertise, _):
            if let origin = askToReadvertise, let asked = nodes.firstIndex(where: { $0.id == origin }), connectedToBroker(asked) {
                log("broker asks \(origin) to advertise again what its cache lacks")
                let topic = Topic.readvertisePrefix + origin
                let epoch = brokerLinks[asked].down.epoch
                schedule(.brokerAsks(to: asked, epoch: epoch, topic: topic, subscribe: true), at: arriveFromBroker(to: asked))
                schedule(.brokerAsks(to: asked, epoch: epoch, topic: topic, subscribe: false), at: arriveFromBroker(to: asked))
            }
            let topicString = String(decoding: topic, as: UTF8.self)
            for peer in nodes.indices where connectedToBroker(peer) {
                guard broker.subscriptionsOf[peer]?.contains(where: { topicString.hasPrefix($0) }) == true else { continue }
                schedule(.fromBroker(to: peer, epoch: brokerLinks[peer].down.epoch, topic: topic, envelope: envelope), at: arriveFromBroker(to: peer))
            }
        case .forged(let reason):
            broker.refused += 1
            log("broker drops a message from \(nodes[index].id): it \(reason)")
        case .overQuota(let activityID, let origin):
            broker.refused += 1
            log("broker drops \(activityID): \(origin) is over its quota")
        }
    }

    /// A node's subscriber (un)subscribes at the broker; a snapshot request is answered to it
    /// alone from the cache, then the reply.
    func brokerSubscription(_ topic: String, subscribe: Bool, from index: Int) {
        guard let broker else { return }
        if subscribe { broker.subscriptionsOf[index, default: []].insert(topic) } else { broker.subscriptionsOf[index]?.remove(topic) }
        let verdict = broker.coreDo { $0.subscriberMessage([Frame([subscribe ? 1 : 0] + Array(topic.utf8))]) }
        guard case .answerSnapshot(let snapshotTopic, let typePrefix) = verdict else { return }
        var sent = 0, sentBytes = 0
        let epoch = brokerLinks[index].down.epoch
        for bytes in broker.core.snapshot(typePrefix: typePrefix, now: instant) {
            guard let envelope = try? WireEnvelope.decode(Data(bytes)) else { continue }
            schedule(.fromBroker(to: index, epoch: epoch, topic: snapshotTopic, envelope: envelope), at: arriveFromBroker(to: index))
            sent += 1
            sentBytes += snapshotTopic.count + bytes.count
        }
        let reply = broker.coreDo { $0.snapshotReply(typePrefix: typePrefix, topicSize: snapshotTopic.count, sent: sent, sentBytes: sentBytes) }
        guard let envelope = try? WireEnvelope.decode(Data(reply)) else { return }
        log("broker answers \(nodes[index].id)'s snapshot of \(typePrefix): \(sent) advertisements")
        schedule(.fromBroker(to: index, epoch: epoch, topic: snapshotTopic, envelope: envelope), at: arriveFromBroker(to: index))
    }

    /// The broker's XSUB (un)subscribes at a node's publisher: everything (it connected), or "R:"
    /// and the node's id (advertise again what the cache lacks).
    func brokerAsks(_ index: Int, topic: String, subscribe: Bool) {
        let node = nodes[index]
        guard subscribe else {
            node.subscriptionsOfPeer[brokerPeer]?.remove(topic)
            return
        }
        node.subscriptionsOfPeer[brokerPeer, default: []].insert(topic)
        let readvertiseTopic = Array((Topic.readvertisePrefix + node.id).utf8)
        let (note, messages) = node.advertiserDo {
            $0.subscribed(to: Array(topic.utf8)[...], bus: .brokered(readvertiseTopic: readvertiseTopic), now: instant)
        }
        if let note { log("\(node.id): \(note)") }
        publish(from: index, messages)
    }

    // MARK: Faults

    func crashBroker() {
        guard let broker, broker.alive else { return }
        log("the broker is killed (-9)")
        for index in nodes.indices where connectedToBroker(index) { disconnectBroker(index) }
        broker.alive = false
    }

    func restartBroker() {
        guard let broker, !broker.alive else { return }
        log("the broker starts again, its cache empty")
        broker.restart()
        for index in nodes.indices { connectBroker(index, notify: true) }
        schedule(.brokerTick(incarnation: broker.incarnation), at: now)
    }

    func partitionBroker(_ index: Int) {
        if brokerPartitions[index, default: 0] == 0, connectedToBroker(index) { disconnectBroker(index) }
        brokerPartitions[index, default: 0] += 1
    }

    func healBroker(_ index: Int) {
        guard let count = brokerPartitions[index], count > 0 else { return }
        brokerPartitions[index] = count == 1 ? nil : count - 1
        if count == 1 { connectBroker(index, notify: true) }
    }
}
