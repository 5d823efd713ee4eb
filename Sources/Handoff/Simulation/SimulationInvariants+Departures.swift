import Foundation

extension SimulationInvariants {
    /// "withdrawn-on-departure": a node that shuts down withdraws its activities, and every
    /// follower connected to it (directly, or both through the broker) throughout forgets them as
    /// soon as the withdrawal can have reached it (the way to the broker and on, and a millisecond),
    /// not a lease later; a replay of what the node said before must not bring them back.
    static func withdrawnOnDeparture(_ world: SimulatedWorld) -> SimulationFailure? {
        for index in world.departures.indices where !world.departures[index].checked {
            let departure = world.departures[index]
            let way = world.options.maxLatency * (2 + 2 * world.options.siteDepth)
            guard world.now >= departure.at + way + .milliseconds(2) else { continue }
            world.departures[index].checked = true
            for (follower, incarnation) in departure.followers.sorted(by: { $0.key < $1.key }) {
                let node = world.nodes[follower]
                guard node.alive, node.incarnation == incarnation, world.running(follower), node.wentOnAt <= departure.at else { continue }
                // At sites: the departing node's broker took the withdrawal, and the way from there
                // to the follower has been up since before the departure.
                if world.options.hasSites {
                    let origin = world.site(of: departure.node)
                    guard departure.viaBrokers.contains(origin),
                          let since = world.pathUpSince(fromSite: origin, to: follower), since <= departure.at - world.settledConnection else { continue }
                }
                // Through brokers: still connected, since before the departure, to one the withdrawal went through.
                else if !world.brokers.isEmpty, !departure.viaBrokers.contains(where: { b in
                    world.brokerUpSince[b][follower].map { $0 <= departure.at - world.settledConnection } ?? false
                }) { continue }
                let known = node.followerDo { follower in departure.ids.filter { follower.known[$0] != nil } }
                if let id = known.first {
                    return failure(world, "withdrawn-on-departure", "\(node.id) still knows \(id) \(world.now - departure.at) after \(world.nodes[departure.node].id) shut down and withdrew it")
                }
            }
        }
        return nil
    }
}
