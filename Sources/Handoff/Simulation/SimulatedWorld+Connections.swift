import Foundation

// The connections between simulated nodes: broken by partitions and crashes (what was on its way
// is lost), made again when they heal; and when what is sent on one arrives.
extension SimulatedWorld {
    /// A connection between `a` and `b` breaks: what was on its way is lost, and each side's
    /// publisher forgets the other's subscriptions.
    func disconnect(_ a: Int, _ b: Int) {
        links[a][b].epoch += 1
        links[b][a].epoch += 1
        links[a][b].lastArrival = now
        links[b][a].lastArrival = now
        nodes[a].subscriptionsOfPeer[b] = nil
        nodes[b].subscriptionsOfPeer[a] = nil
        upSince[pair(a, b)] = nil
        // Each side's DEALER to the other dropped: its requests fail now (Client's monitor).
        endRequests(nodes[a].client.disconnected(from: nodes[b].continueEndpoint), of: a)
        endRequests(nodes[b].client.disconnected(from: nodes[a].continueEndpoint), of: b)
        streamsDisconnected(a, b)
    }

    /// A connection between `a` and `b` comes back: each side's subscriber subscribes again, and
    /// its follower hears that it reconnected.
    func reconnect(_ a: Int, _ b: Int, notify: Bool) {
        guard connected(a, b) else { return }
        upSince[pair(a, b)] = now
        // A continuing side's DEALER is connected again: its interrupted pairs resume at once.
        streamsReconnected(a, b)
        // With a broker, nodes connect to each other only to continue.
        guard brokers.isEmpty else { return }
        for (subscriber, publisher) in [(a, b), (b, a)] {
            for topic in nodes[subscriber].subscriptions.sorted() { sendSubscription(from: subscriber, to: publisher, topic, subscribe: true) }
            if notify { perform(subscriber, nodes[subscriber].followerDo { $0.busReconnected(to: "tcp://\(nodes[publisher].id)", now: instant) }) }
        }
    }

    func partition(_ a: Int, _ b: Int) {
        if partitions[pair(a, b), default: 0] == 0, nodes[a].alive, nodes[b].alive { disconnect(a, b) }
        partitions[pair(a, b), default: 0] += 1
    }

    func heal(_ a: Int, _ b: Int) {
        guard let count = partitions[pair(a, b)], count > 0 else { return }
        partitions[pair(a, b)] = count == 1 ? nil : count - 1
        if count == 1 { reconnect(a, b, notify: true) }
    }

    func linkFlag(from: Int, to: Int) { links[from][to].duplicateNext = true }

    /// The connection `from` → `to` as it is now (it changes when the connection breaks).
    func epoch(from: Int, to: Int) -> Int { links[from][to].epoch }

    /// When a message sent now on a connection arrives: after its delay, and never before the
    /// one sent before it on the same connection.
    func arrive(from: Int, to: Int) -> Duration {
        arrival(on: &links[from][to])
    }

    /// When a message sent now on `link` arrives: after its delay, never before the one sent
    /// before it (node to node, and each way between a node and the broker).
    func arrival(on link: inout Link) -> Duration {
        let arrival = max(now + network.duration(.microseconds(100)...options.maxLatency), link.lastArrival)
        link.lastArrival = arrival
        return arrival
    }

    /// When a message sent now from `from` to `to` arrives (in order after the last one), and the
    /// connection's epoch it travels under.
    func route(from: Int, to: Int) -> (at: Duration, epoch: Int) {
        (arrive(from: from, to: to), links[from][to].epoch)
    }
}
