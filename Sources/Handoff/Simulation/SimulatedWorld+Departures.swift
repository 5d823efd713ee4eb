import Foundation

// Graceful departures: a node shuts down as `Node.shutDown` does (its activities withdrawn on the
// bus, its stream peers told), exits once what it sent has left, and later comes back.
extension SimulatedWorld {
    /// A node's shutdown, and who should hear of it: the followers connected to it (directly, or
    /// through the broker) since long enough for their subscriptions to be in place.
    struct Departure {
        let node: Int
        let incarnation: Int
        let at: Duration
        /// The activities it withdrew.
        let ids: [String]
        /// Followers that must forget them once the withdrawal reached them, by incarnation.
        var followers: [Int: Int]
        /// With brokers: those the node stayed connected to until it exited (the withdrawals
        /// went through them).
        var viaBrokers: [Int] = []
        var checked = false
    }

    /// How long before a departure a follower's connection must have been up for the withdrawal
    /// to reach it: its subscription, and a broker's subscription at the leaving node, in place.
    var settledConnection: Duration { options.maxLatency * 2 }

    func leave(_ index: Int) {
        log("\(nodes[index].id) shuts down")
        let (withdrawn, withdrawals) = nodes[index].advertiserDo { $0.removeAll() }
        for activity in withdrawn { truth.ended(activity.id, at: now) }
        var followers: [Int: Int] = [:]
        for follower in nodes.indices where follower != index && running(follower) {
            guard let since = reachableSince(follower, index), since <= now - settledConnection else { continue }
            followers[follower] = nodes[follower].incarnation
        }
        departures.append(Departure(node: index, incarnation: nodes[index].incarnation, at: now, ids: withdrawn.map(\.id), followers: followers))
        publish(from: index, withdrawals)
        streamsShutDown(at: index)
        // The process exits once what it sent has left (ZeroMQ's linger).
        schedule(.exit(node: index, incarnation: nodes[index].incarnation), at: now + options.maxLatency + .milliseconds(1))
    }

    /// A node killed while it shut down, before it exited: what it sent last may not have left
    /// (ZeroMQ's queue dies with the process), so its departure promises nothing; followers forget
    /// its activities at their lease, as after any crash.
    func killedWhileLeaving(_ index: Int) {
        guard let last = departures.lastIndex(where: { $0.node == index && $0.incarnation == nodes[index].incarnation }),
              !departures[last].checked else { return }
        departures[last].checked = true
    }

    /// The node that shut down exits. A follower whose connection to it broke in the meantime may
    /// have lost the withdrawal (it forgets the activity at its lease instead).
    func exit(_ index: Int, incarnation: Int) {
        guard nodes[index].alive, nodes[index].incarnation == incarnation else { return }
        log("\(nodes[index].id) exits")
        if let last = departures.lastIndex(where: { $0.node == index && $0.incarnation == incarnation }) {
            let at = departures[last].at
            departures[last].followers = departures[last].followers.filter { follower, _ in
                reachableSince(follower, index).map { $0 <= at - settledConnection } ?? false
            }
            departures[last].viaBrokers = brokers.indices.filter { brokerUpSince[$0][index].map { $0 <= at - settledConnection } ?? false }
        }
        processEnds(index)
    }
}
