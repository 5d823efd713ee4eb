import Foundation

extension SimulationInvariants {
    /// A pair that broke the invariant: the activity's place in the run's history, and the
    /// follower's place among those of its type (the order the invariant reports the first in).
    private struct Breach {
        let activity: Int
        let follower: Int
        let failure: SimulationFailure

        func before(_ other: Breach?) -> Bool {
            guard let other else { return true }
            return (activity, follower) < (other.activity, other.follower)
        }
    }

    /// "live-activity-known", "ended-activity-forgotten" and "expired-activity-dropped": every live
    /// activity of a reachable origin is known, at its version, to every running follower of its
    /// type within ``discoveryBound(_:)`` of the last change that could hide it (a refresh interval
    /// more for an origin that publishes made-up presences, or for what went past a follower of
    /// brokers that keep no cache, ``untilRefresh(_:_:changedAt:pathUp:)``); nothing ended stays
    /// known past ``forgetBound(_:)``, nor anything expired past a sweep after its expiration date (by
    /// the follower's clock: ``SimulatedClocks``).
    ///
    /// Checked after every step, so what does not change within a step is worked out once (which
    /// nodes run, paths; which nodes follow a type, once a run), and a follower's knowledge is
    /// looked up only where a bound has passed, or, for an ended activity, to tell whether any
    /// follower still knows it: this was over half of a debug run's time. Ended activities no
    /// follower knows any more are set aside (``ForgottenActivities``) and looked at again only for
    /// a follower whose table took in something new: the failure reported is the one the whole
    /// history, in order, would report first.
    static func knownWithinBounds(_ world: SimulatedWorld) -> SimulationFailure? {
        let running = world.nodes.map { world.running($0.index) }
        // One reference to the run's activities, each read in place (no copy, no lookup by id).
        let activities = world.truth.inOrder
        world.forgottenActivities.takeIn(upTo: activities.count)
        let again = knownAgain(world, activities, running)
        let watched = watchedWithinBounds(world, activities, running)
        if let again, again.before(watched) { return again.failure }
        return watched?.failure
    }

    /// The set-aside activities that came back into a follower's table: the first that breaks
    /// the invariant, if one does; the others are watched again.
    private static func knownAgain(_ world: SimulatedWorld, _ activities: [SimulationTruth.Activity], _ running: [Bool]) -> Breach? {
        let nodes = world.nodes
        let moved = world.forgottenActivities.tablesMoved(nodes.map(\.knownArrivals))
        guard !moved.isEmpty else { return nil }
        var didMove = [Bool](repeating: false, count: nodes.count)
        for node in moved { didMove[node] = true }
        var first: Breach?
        var knownAgain = Set<Int>()
        for at in world.forgottenActivities.setAside {
            let origin = activities[at].origin
            for (position, index) in activities[at].followers.enumerated() where index != origin && didMove[index] {
                guard nodes[index].knownVersion(activities[at].id) != nil else { continue }
                if running[index], let failure = endedStillKnown(world, activities[at], by: nodes[index]) {
                    let breach = Breach(activity: at, follower: position, failure: failure)
                    if breach.before(first) { first = breach }
                } else {
                    knownAgain.insert(at)
                }
            }
        }
        world.forgottenActivities.watchAgain(knownAgain)
        return first
    }

    /// The watched activities, in order: the first pair that breaks the invariant, if one does;
    /// the ended ones no follower knows any more are set aside.
    private static func watchedWithinBounds(_ world: SimulatedWorld, _ activities: [SimulationTruth.Activity], _ running: [Bool]) -> Breach? {
        let now = world.now, discovery = world.bounds.discovery
        let nodes = world.nodes
        // Since when each (origin, follower) pair is reachable, worked out where asked: `.none`
        // not yet, `.some(nil)` not reachable.
        var reachable = [Duration??](repeating: .none, count: nodes.count * nodes.count)
        var forgotten: [Int] = []
        defer { world.forgottenActivities.setAside(forgotten) }
        for at in world.forgottenActivities.watched {
            let origin = activities[at].origin
            if let end = earlier(activities[at].endedAt, activities[at].expiresAt) {
                for (position, index) in activities[at].followers.enumerated() where index != origin && running[index] {
                    let follower = nodes[index]
                    guard pastEnd(world, activities[at], follower), follower.knownVersion(activities[at].id) != nil,
                          let failure = endedStillKnown(world, activities[at], by: follower) else { continue }
                    return Breach(activity: at, follower: position, failure: failure)
                }
                // (A dead process's table does not count: the node's next process has a table of
                // its own, which the set-aside activities are looked at for.)
                if now > end, activities[at].followers.allSatisfy({ $0 == origin || !nodes[$0].alive || nodes[$0].knownVersion(activities[at].id) == nil }) {
                    forgotten.append(at)
                }
                continue
            }
            guard running[origin] else { continue }
            for (position, index) in activities[at].followers.enumerated() where index != origin && running[index] {
                let follower = nodes[index]
                let pair = origin * nodes.count + index
                let linkUp: Duration?
                if let worked = reachable[pair] {
                    linkUp = worked
                } else {
                    linkUp = world.reachableSince(origin, index)
                    reachable[pair] = .some(linkUp)
                }
                guard let linkUp else { continue }
                let pathUp = max(linkUp, nodes[origin].wentOnAt, follower.wentOnAt)
                let changedAt = activities[at].changedAt
                let since = max(changedAt, pathUp)
                guard now - since > discovery + untilRefresh(world, origin, changedAt: changedAt, pathUp: pathUp) else { continue }
                let id = activities[at].id
                guard let known = follower.knownVersion(id) else {
                    return Breach(activity: at, follower: position, failure: failure(
                        world, "live-activity-known",
                        "\(follower.id) does not know \(id.id) of \(nodes[origin].id), current since \(changedAt) and reachable since \(since)"))
                }
                if known < activities[at].version {
                    return Breach(activity: at, follower: position, failure: failure(
                        world, "live-activity-known",
                        "\(follower.id) knows \(id.id) at v\(known), but it has been at v\(activities[at].version) since \(changedAt)"))
                }
            }
        }
        return nil
    }

    /// Whether an ended (or expiring) activity is past the bound within which `follower` must have
    /// let it go: its expiration date and a sweep, or its end and ``forgetBound(_:)`` (each from
    /// when the follower last went on, at the latest).
    private static func pastEnd(_ world: SimulatedWorld, _ activity: SimulationTruth.Activity, _ follower: SimulatedNode) -> Bool {
        guard let end = earlier(activity.endedAt, expiresAt(activity, byClockOf: follower.index, in: world)) else { return false }
        return pastExpiry(world, activity, follower) || world.now > max(end, follower.wentOnAt) + world.bounds.forget
    }

    /// Its expiration date is in every advertisement: a follower drops it on its next sweep,
    /// whatever it hears or does not hear.
    private static func pastExpiry(_ world: SimulatedWorld, _ activity: SimulationTruth.Activity, _ follower: SimulatedNode) -> Bool {
        expiresAt(activity, byClockOf: follower.index, in: world).map { world.now > max($0, follower.wentOnAt) + sweep + .milliseconds(50) } ?? false
    }

    /// The failure of a follower that knows an ended (or expiring) activity, if it is past its
    /// bound (``pastEnd(_:_:_:)``).
    private static func endedStillKnown(_ world: SimulatedWorld, _ activity: SimulationTruth.Activity, by follower: SimulatedNode) -> SimulationFailure? {
        guard let end = earlier(activity.endedAt, expiresAt(activity, byClockOf: follower.index, in: world)), pastEnd(world, activity, follower) else { return nil }
        if pastExpiry(world, activity, follower) {
            return failure(world, "expired-activity-dropped", "\(follower.id) still knows \(activity.id.id), which expired at \(end) by its clock")
        }
        return failure(world, "ended-activity-forgotten", "\(follower.id) still knows \(activity.id.id), which ended at \(end)")
    }

    /// The earlier of two instants, either of which may not be.
    private static func earlier(_ a: Duration?, _ b: Duration?) -> Duration? {
        guard let a else { return b }
        guard let b else { return a }
        return min(a, b)
    }
}
