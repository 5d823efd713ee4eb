import Foundation

/// What a node's follower decides, carried out on the simulated network.
extension SimulatedWorld {
    /// Carries out what a node's follower decided: subscriptions go to every connected peer.
    func perform(_ index: Int, _ actions: [Follower.Action]) {
        let node = nodes[index]
        // A round asks for the snapshot of every prefix the node follows at once.
        if actions.contains(where: { if case .subscribe(let topic) = $0 { topic.hasPrefix(Topic.snapshotPrefix) } else { false } }) {
            snapshotRounds += 1
        }
        for action in actions {
            switch action {
            case .subscribe(let topic), .unsubscribe(let topic):
                let subscribe = if case .subscribe = action { true } else { false }
                if subscribe { node.subscribed(topic) } else { node.unsubscribed(topic) }
                if !brokers.isEmpty {
                    for b in brokers.indices { subscribeAtBroker(b, from: index, topic, subscribe: subscribe) }
                    continue
                }
                for peer in nodes.indices where connected(index, peer) { sendSubscription(from: index, to: peer, topic, subscribe: subscribe) }
            case .emit(let event):
                log("\(node.id): \(event)")
            case .ignored(let why):
                node.refused += 1
                log("\(node.id) ignored: \(why)")
            case .log(_, let message):
                log("\(node.id): \(message)")
            case .changed(let activity):
                refreshIfHeld(activity, at: index)
            case .forgotten(let id):
                node.client.held.release(id)
            case .ownPresenceHeard:
                break
            case .snapshotRound(let reason):
                log("\(node.id): a round of snapshots (\(reason.rawValue))")
            }
        }
    }
}
