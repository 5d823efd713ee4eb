import Foundation
import ZeroMQ

/// The rules a simulated run is held to after every step, each with its name (the name a failure
/// reports, and the tests and docs/testing.md use).
enum SimulationInvariants {
    /// How long after a change, a reconnection, or a process going on, a follower has to know a
    /// live activity: two presences (a presence naming an id it lacks asks for the snapshots), a
    /// resynchronization round (at most one a second), a snapshot's grace for silent answerers,
    /// and the messages' way there and back, with room to spare.
    /// At sites, the way is longer: up and down each link between the two sites (at most twice
    /// the tree's depth).
    static func discoveryBound(_ options: SimulationOptions) -> Duration {
        SimulatedNode.settings.advertiseInterval * 2 + .seconds(2) + options.maxLatency * (4 + 4 * options.siteDepth) + .milliseconds(500)
    }

    /// How long after an activity ended (or, for a follower, after it went on) a follower may
    /// still know it: a lease, a sweep, the way there. With a broker, one lease more: the broker
    /// keeps a dead origin's activity until its lease at the broker ends, and a follower that
    /// learns it from a snapshot in that time gives it a whole lease of its own (a snapshot does
    /// not say how much of the lease is left).
    /// At sites, a lease more per level: a site's broker that asks its upstream for its snapshot
    /// just before the upstream's lease ends caches what it gets for a whole lease too, and so on
    /// down the tree.
    static func forgetBound(_ options: SimulationOptions) -> Duration {
        let follower = SimulatedNode.settings.lease + .milliseconds(250) + options.maxLatency * 2 + .milliseconds(250)
        let broker = SimulatedNode.settings.lease + options.maxLatency * 2 + .milliseconds(50)
        return options.broker ? follower + broker * (1 + options.siteDepth) : follower
    }

    /// How often a node sweeps its leases and expiries (its scheduler's longest sleep).
    static let sweep = Duration.milliseconds(250)

    /// The bounds of a run's options, as the invariants ask them after every step.
    struct Bounds {
        /// ``discoveryBound(_:)``.
        let discovery: Duration
        /// ``forgetBound(_:)``.
        let forget: Duration
        /// How long a follower's subscription may take to reach an origin's publisher
        /// (``untilRefresh(_:_:changedAt:pathUp:)``).
        let subscriptionReach: Duration

        init(_ options: SimulationOptions) {
            discovery = discoveryBound(options)
            forget = forgetBound(options)
            subscriptionReach = options.maxLatency * (4 + options.siteDepth)
        }
    }

    /// Checks the whole world (`touched`: the node whose knowledge just changed, checked for
    /// belief; every node is checked for bounds).
    static func check(_ world: SimulatedWorld, touched: Int?) -> SimulationFailure? {
        if let touched, let failure = believedOnlyFromOrigin(world, node: touched) { return failure }
        return knownWithinBounds(world) ?? continuedAtMostOnce(world) ?? requestsEnd(world) ?? memoryBounded(world)
            ?? didUpdateGenuine(world) ?? heldActivityUpdated(world) ?? streams(world)
            ?? withdrawnOnDeparture(world) ?? nothingReturnsToItsSite(world)
    }

    /// "nothing-returns-to-its-site": at sites, no message comes back down to the site it went up
    /// from (each site's broker counts any that does, by its origin, as upstream-returned), and
    /// none comes round a loop.
    static func nothingReturnsToItsSite(_ world: SimulatedWorld) -> SimulationFailure? {
        guard world.options.hasSites else { return nil }
        for (b, broker) in world.brokers.enumerated() {
            let counters = broker.core.counters
            if counters.upstreamReturned > 0 || counters.siteLoops > 0 {
                return failure(world, "nothing-returns-to-its-site", "\(world.brokerName(b)) got \(counters.upstreamReturned) of its site's own messages back from upstream, and \(counters.siteLoops) round a loop")
            }
        }
        return nil
    }

    /// "did-update-genuine": a did-update tells a node a version newer than the one it held, and
    /// one its origin really made.
    static func didUpdateGenuine(_ world: SimulatedWorld) -> SimulationFailure? {
        for update in world.truth.didUpdates[world.didUpdatesChecked...] {
            let made = world.truth[update.id]?.version ?? 0
            if update.version <= update.held || update.version > made {
                return failure(world, "did-update-genuine", "\(world.nodes[update.node].id) was told \(update.id) at v\(update.version), holding v\(update.held); its origin made v\(made)")
            }
        }
        world.didUpdatesChecked = world.truth.didUpdates.count
        return nil
    }

    /// "held-activity-updated": a node that continued a live activity, holds it, and knows a newer
    /// version of it on the bus gets that version (did-update) within a continue timeout and a
    /// second of its origin being running and connected to it with no fetch under way: nothing
    /// newer is left untold because an earlier fetch failed.
    static func heldActivityUpdated(_ world: SimulatedWorld) -> SimulationFailure? {
        var lagging: [String: Duration] = [:]
        for node in world.nodes where world.running(node.index) {
            for (id, held) in node.client.held.versions {
                // Known no newer than held first: nearly always so, and one lookup.
                // (An activity that ended, or is past its expiration date, is refused by its
                // origin: nothing newer is owed; nor once the holder's clock says it expired.)
                guard let knownVersion = node.followerDo({ $0.known[id]?.activity.version }), knownVersion > held,
                      let truth = world.truth[id], truth.endedAt == nil, !expired(truth, byClockOf: truth.origin, in: world),
                      !expired(truth, byClockOf: node.index, in: world),
                      !node.client.held.isRefreshing(id),
                      let endpoint = node.followerDo({ $0.known[id]?.activity.continueEndpoint }),
                      let origin = world.nodes.firstIndex(where: { $0.continueEndpoint == endpoint }),
                      world.running(origin), world.connected(node.index, origin) else { continue }
                let key = "\(node.id) \(id) v\(knownVersion)"
                let since = world.heldLagging[key] ?? world.now
                lagging[key] = since
                if world.now - since > SimulatedNode.continueTimeout + .seconds(1) {
                    return failure(world, "held-activity-updated", "\(node.id) holds \(id) at v\(held) and has known v\(knownVersion) since \(since), its origin reachable, and fetches nothing")
                }
            }
        }
        world.heldLagging = lagging
        return nil
    }

    /// When node `index`'s clock passes the activity's expiration date (its origin's clock set it;
    /// with skew, the two clocks differ: ``SimulatedClocks``).
    static func expiresAt(_ activity: SimulationTruth.Activity, byClockOf index: Int, in world: SimulatedWorld) -> Duration? {
        activity.expiresAt(byClockOffset: world.clocks.offsets[index])
    }

    /// Whether node `index`'s clock is past the activity's expiration date.
    static func expired(_ activity: SimulationTruth.Activity, byClockOf index: Int, in world: SimulatedWorld) -> Bool {
        expiresAt(activity, byClockOf: index, in: world).map { world.now >= $0 } ?? false
    }

    /// "continued-once-at-most-once": an origin hands a continue-once activity over at most once.
    static func continuedAtMostOnce(_ world: SimulatedWorld) -> SimulationFailure? {
        for (id, count) in world.truth.handedOver where count > 1 {
            if world.truth[id]?.activity.continuationPolicy == .once {
                return failure(world, "continued-once-at-most-once", "\(id) is continue-once and was handed over \(count) times")
            }
        }
        return nil
    }

    /// "pending-request-ends": every continue request of a running node ends (an answer, or a
    /// typed error) by its deadline and a sweep.
    static func requestsEnd(_ world: SimulatedWorld) -> SimulationFailure? {
        for (number, request) in world.truth.waiting where world.running(request.node) {
            if world.now > max(request.deadline, world.nodes[request.node].wentOnAt) + sweep + .milliseconds(50) {
                return failure(world, "pending-request-ends", "request \(number) of \(world.nodes[request.node].id) was due to end at \(request.deadline) and still waits")
            }
        }
        return nil
    }

    /// "believed-only-from-origin": every activity a node knows was made by the node its entry
    /// names as origin, with that node's key.
    static func believedOnlyFromOrigin(_ world: SimulatedWorld, node index: Int) -> SimulationFailure? {
        let node = world.nodes[index]
        for entry in node.followerDo({ $0.known.values }) {
            let known = entry.activity
            guard let truth = world.truth.originAndVersion(of: known.id) else {
                return failure(world, "believed-only-from-origin", "\(node.id) knows \(known.id), which no node made")
            }
            let origin = world.nodes[truth.origin]
            // The key's bytes compared as they are (a `Data` made of them was an allocation per
            // activity known, per step).
            guard known.origin.id == origin.id, let key = known.origin.publicKey, key.bytes == origin.keyBytes else {
                return failure(world, "believed-only-from-origin", "\(node.id) knows \(known.id) as \(known.origin.id)'s, but \(origin.id) made it")
            }
            guard known.version <= truth.version else {
                return failure(world, "believed-only-from-origin", "\(node.id) knows \(known.id) at v\(known.version), which its origin never made (it is at v\(truth.version))")
            }
        }
        return nil
    }

    /// A refresh interval more, where what a follower missed reaches it only with its origin's
    /// next refresh: the origin is a liar (``liar(_:_:)``), or the brokers keep no cache to answer
    /// snapshots from (``SimulationOptions/lastValueCache``) and the change may have gone past the
    /// follower: it came before the path between them was up (`pathUp`) and the follower's
    /// subscription had reached the origin's publisher (a hop to its broker, one per site level up
    /// to the hub and one down from it: at most the tree's depth and two; two more for slack). A change
    /// made on a path that was up gets no more time without the cache than with it, so a
    /// subscription the broker lost (a member's withdrawal of what others follow) fails the run.
    static func untilRefresh(_ world: SimulatedWorld, _ origin: Int, changedAt: Duration, pathUp: Duration) -> Duration {
        let mayHaveGonePast = !world.options.lastValueCache && changedAt < pathUp + world.bounds.subscriptionReach
        return liar(world, origin) || mayHaveGonePast ? SimulatedNode.settings.refreshInterval : .zero
    }

    /// Whether `origin` publishes made-up presences: a follower holds back its key, so that a
    /// presence of its own naming what the follower lost asks for no snapshots either (seed 5029
    /// at four sites); its activities reach such a follower with its next refresh, a refresh
    /// interval later. What it does costs it, not honest nodes.
    static func liar(_ world: SimulatedWorld, _ origin: Int) -> Bool {
        world.options.madeUpPresences && world.nodes[origin].hostile
    }

    /// "memory-bounded": what a node holds for others, and what the broker caches, stays within
    /// the configured bounds.
    static func memoryBounded(_ world: SimulatedWorld) -> SimulationFailure? {
        for broker in world.brokers {
            let cache = broker.core.cache
            if cache.count > SimulatedBroker.capacity || cache.hasOrigin(over: SimulatedBroker.perOriginQuota) {
                return failure(world, "memory-bounded", "the broker caches \(cache.count) activities, over its bounds")
            }
            let lapsed = broker.core.readvertiseRequests.lapsedCopiesCount
            if lapsed > ReadvertiseRequests.lapsedMemory {
                return failure(world, "memory-bounded", "the broker remembers \(lapsed) lapsed copies, over \(ReadvertiseRequests.lapsedMemory)")
            }
        }
        for node in world.nodes where node.alive {
            let (known, unfollowed, lapsed, limit) = node.followerDo {
                ($0.known.count, $0.resynchronization.unfollowedIDs, $0.resynchronization.lapsedIDs, $0.settings.maxKnown)
            }
            if known > limit || unfollowed > limit || lapsed > limit {
                return failure(world, "memory-bounded", "\(node.id) holds \(known) known, \(unfollowed) unfollowed and \(lapsed) lapsed ids, over \(limit)")
            }
        }
        return nil
    }

    static func failure(_ world: SimulatedWorld, _ invariant: String, _ detail: String) -> SimulationFailure {
        SimulationFailure(invariant: invariant, detail: detail, at: world.now, step: world.steps)
    }
}
