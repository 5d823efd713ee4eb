import Foundation
import HandoffWire

/// The planned operations: what applications do (the workload) and what goes wrong (the faults).
extension SimulatedWorld {
    /// Applies one; returns the node whose knowledge it may have changed.
    func apply(_ operation: SimulationSchedule.Operation) -> Int? {
        switch operation {
        case .create(let index, let type, let expiresIn, let once, let saves):
            guard running(index), let activity = newActivity(at: index, type: type) else { return nil }
            let id = activity.id
            if once { activity.continuationPolicy = .once }
            if saves { activity.needsSave = true }
            if let expiresIn { activity.expirationDate = date(of: index).addingTimeInterval(expiresIn.seconds) }
            truth.made(activity, origin: index, followers: followers(ofType: type), at: now, expires: expiresIn.map { now + $0 },
                       clockOffset: clocks.offsets[index])
            log("\(nodes[index].id) makes \(id) (\(type)\(once ? ", continue-once" : "")\(saves ? ", will-save" : "")) current\(expiresIn.map { ", expiring in \($0)" } ?? "")")
            publish(from: index, [nodes[index].advertiserDo { $0.add(activity) }])
        case .createBatch(let index, let type, let count):
            guard running(index) else { return nil }
            var batch: [UserActivity] = []
            for _ in 0..<count {
                guard let activity = newActivity(at: index, type: type) else { continue }
                truth.made(activity, origin: index, followers: followers(ofType: type), at: now, expires: nil, clockOffset: clocks.offsets[index])
                batch.append(activity)
            }
            log("\(nodes[index].id) makes \(batch.count) (\(type)) current at once: \(batch.map(\.id).joined(separator: ", "))")
            publish(from: index, nodes[index].advertiserDo { $0.addAll(batch, now: instant) })
        case .update(let index, let pick):
            guard running(index), let activity = current(of: index, pick) else { return nil }
            activity.title = "\(activity.id) changed at \(now)"
            truth.changed(activity, at: now)
            log("\(nodes[index].id) changes \(activity.id) to v\(activity.version)")
            publish(from: index, nodes[index].advertiserDo { $0.changed([activity.id]) })
        case .resign(let index, let pick), .invalidate(let index, let pick):
            guard running(index), let activity = current(of: index, pick) else { return nil }
            let reason: RemovalReason = if case .resign = operation { .resigned } else { .invalidated }
            truth.ended(activity.id, at: now)
            log("\(nodes[index].id) ends \(activity.id) (\(reason))")
            publish(from: index, nodes[index].advertiserDo { $0.remove(activity, reason: reason) })
        case .continueActivity(let index, let pick):
            guard running(index) else { return nil }
            continueActivity(at: index, pick: pick)
        case .crash(let index):
            guard nodes[index].alive else { return nil }
            log("\(nodes[index].id) is killed (-9)")
            killedWhileLeaving(index)
            processEnds(index)
        case .leave(let index):
            guard running(index) else { return nil }
            leave(index)
        case .restart(let index):
            guard !nodes[index].alive else { return nil }
            log("\(nodes[index].id) starts again")
            let node = nodes[index]
            node.restart(peers: snapshotAnswerers, now: instant, date: date(of: index))
            giveRandomness(to: node)
            node.alive = true
            node.resumedAt = now
            for peer in nodes.indices where connected(index, peer) {
                // Every peer's subscriber connects to it again (its own subscribes as it starts, below).
                reconnect(index, peer, notify: true)
            }
            connectBrokers(index, notify: false)
            start(index)
            schedule(.tick(node: index), at: now)
            return index
        case .stop(let index, let duration):
            guard running(index) else { return nil }
            log("\(nodes[index].id) is stopped (SIGSTOP) for \(duration)")
            nodes[index].stoppedUntil = now + duration
            schedule(.resume(node: index), at: now + duration)
        case .partition(let a, let b):
            log("partition between \(nodes[a].id) and \(nodes[b].id)")
            partition(a, b)
        case .heal(let a, let b):
            log("partition between \(nodes[a].id) and \(nodes[b].id) heals")
            heal(a, b)
        case .duplicate(let from, let to):
            linkFlag(from: from, to: to)
        case .lie(let index, let pick):
            guard running(index) else { return nil }
            lie(index, pick: pick)
        case .madeUpPresence(let index, let serial, let activities):
            guard running(index) else { return nil }
            madeUpPresence(index, serial: serial, activities: activities)
        case .forgedWithdrawal(let index, let pick):
            guard running(index) else { return nil }
            forgedWithdrawal(index, pick: pick)
        case .crashBroker(let b):
            crashBroker(b)
        case .restartBroker(let b):
            restartBroker(b)
        case .partitionBroker(let b, let index):
            log("partition between \(nodes[index].id) and \(brokerName(b))")
            partitionBroker(b, index)
        case .healBroker(let b, let index):
            log("partition between \(nodes[index].id) and \(brokerName(b)) heals")
            healBroker(b, index)
        case .cutSite(let site):
            log("site-\(site)'s link to its upstream is cut")
            cutSite(site)
        case .healSite(let site):
            log("site-\(site)'s link to its upstream heals")
            healSite(site)
        case .openStream(let index, let pick, let bytes, let direction, let reader, let floods):
            guard running(index) else { return nil }
            openStream(at: index, pick: pick, bytes: bytes, direction: direction, reader: reader, floods: floods)
        }
        return nil
    }

    func running(_ index: Int) -> Bool { nodes[index].isRunning(at: now) }

    /// A new activity of `type` for node `index`, under the next id of the run's truth. Every
    /// simulated activity takes continuation streams (the world writes and reads the originator's
    /// ends), so its delegate is there to receive them; only some need saving.
    private func newActivity(at index: Int, type: String) -> UserActivity? {
        let id = truth.newID(origin: index)
        guard let activity = try? UserActivity(activityType: type, id: id) else { return nil }
        activity.title = "\(id) made"
        activity.supportsContinuationStreams = true
        activity.delegate = saver
        return activity
    }

    /// The nodes that follow activities of `type`, by index: worked out once per type.
    func followers(ofType type: String) -> [Int] {
        if let found = followersOfType[type] { return found }
        let found = nodes.filter { node in node.follows.contains { type.hasPrefix($0) } }.map(\.index)
        followersOfType[type] = found
        return found
    }

    /// Node `index`'s process ends (killed, or exiting after a shutdown): its connections break,
    /// what it waited for is forgotten, and its activities end with it.
    func processEnds(_ index: Int) {
        truth.forgetRequests(of: index)
        for peer in nodes.indices where connected(index, peer) { disconnect(index, peer) }
        disconnectBrokers(index)
        nodes[index].alive = false
        nodes[index].stoppedUntil = nil
        for activity in nodes[index].advertiserDo({ $0.current.activities }) { truth.ended(activity.id, at: now) }
    }

    /// The `pick`-th current activity of a node, in the order of their ids.
    func current(of index: Int, _ pick: Int) -> UserActivity? {
        let activities = nodes[index].advertiserDo { $0.current.activities }.sorted { $0.id < $1.id }
        return activities.isEmpty ? nil : activities[pick % activities.count]
    }

    /// A hostile member's presence of a node that does not exist, under the member's own key (so
    /// that every check of sender and key passes), listing activities no one made.
    private func madeUpPresence(_ index: Int, serial: Int, activities: Int) {
        var node = WireNodeRef()
        node.nodeID = "made-up-\(serial)"
        node.name = node.nodeID
        node.host = "sim"
        node.publicKey = nodes[index].key
        var presence = WireNodePresence()
        presence.node = node
        presence.activityIds = (0..<activities).map { "\(node.nodeID)-activity-\($0)" }
        presence.leaseMs = UInt32(SimulatedNode.settings.lease.milliseconds)
        madeUpPresences += 1
        log("\(nodes[index].id) publishes a presence of \(node.nodeID), listing \(activities) made-up activities")
        // In an envelope of its own, its sequence next after its last: the replay guard keeps a
        // sequence per key and node id, so each made-up node takes an entry of the key's share
        // (`maxReplaySubjectsPerSender`), and the liar's own presences still pass.
        var envelope = nodes[index].envelope(.nodePresence(presence), date: date(of: index))
        envelope.sender = node
        send(from: index, topic: Array((Topic.presencePrefix + node.nodeID).utf8), envelope)
    }

    /// A hostile member's subscriber withdraws at its brokers a topic that other running nodes
    /// follow and it does not: it may not stop what others are sent (``ForwardedInterest``,
    /// ``SiteInterests``). (Not a snapshot answer's topic: each carries a random token a member
    /// cannot know.)
    private func forgedWithdrawal(_ index: Int, pick: Int) {
        let own = nodes[index].subscriptions
        let followed = nodes.indices.filter { $0 != index && running($0) }.flatMap { nodes[$0].subscriptions }
        let others = Set(followed.filter { !$0.hasPrefix(Topic.snapshotPrefix) }).subtracting(own).sorted()
        guard !others.isEmpty else { return }
        let topic = others[pick % others.count]
        log("\(nodes[index].id) withdraws \(topic) at its brokers, which it never followed")
        for b in brokers.indices { subscribeAtBroker(b, from: index, topic, subscribe: false) }
    }

    /// A hostile member's lies: a withdrawal of another node's activity in its own envelope (the
    /// origin says the other node) and in one that claims to be the other node's, and a replay of an envelope it heard from another node, sent
    /// as it was (the sender, its key and its sequence say the other node).
    private func lie(_ index: Int, pick: Int) {
        let liar = nodes[index]
        let victims = nodes.indices.filter { $0 != index && nodes[$0].alive }
        if !victims.isEmpty, let target = current(of: victims[pick % victims.count], pick) {
            var withdrawal = WireWithdrawal()
            withdrawal.activityID = target.id
            withdrawal.activityType = target.activityType
            withdrawal.origin = nodes[victims[pick % victims.count]].advertiserDo { $0.settings.origin }
            withdrawal.reason = RemovalReason.invalidated.wire
            log("\(liar.id) forges a withdrawal of \(target.id)")
            send(from: index, topic: Topic.activity(target.activityType), liar.envelope(.withdrawal(withdrawal), date: date(of: index)))
            // The same lie in an envelope that names the victim as its sender, its key and a
            // sequence past any it sent: only the connection's own key can tell it from the truth.
            log("\(liar.id) forges a withdrawal of \(target.id) in \(withdrawal.origin.nodeID)'s name")
            send(from: index, topic: Topic.activity(target.activityType),
                 WireEnvelope(body: .withdrawal(withdrawal), sender: withdrawal.origin, sequence: UInt64.max - UInt64(pick), sentAt: date(of: index)))
        }
        if !liar.heard.isEmpty {
            let replay = liar.heard[pick % liar.heard.count]
            log("\(liar.id) replays a message of \(replay.envelope.sender.nodeID)")
            send(from: index, topic: replay.topic, replay.envelope)
        }
    }
}
