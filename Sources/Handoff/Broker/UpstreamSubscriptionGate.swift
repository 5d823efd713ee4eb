import ZeroMQ

/// Which of an upstream's subscriptions (its subscribe-all when a link comes up, a request that a
/// node advertise again) a site's broker passes to its publishers, and when. (A subscribe-all
/// passed down from further above comes as a token, which ``UpstreamCascades`` decides on alone;
/// a subscribe-all this gate passes goes on as a fresh token.)
///
/// Each subscription passed makes every node of the site (and every site below) advertise again,
/// so two things must hold at once:
///
/// - **A loop ends.** Links misconfigured into a loop (each broker the other's upstream) would
///   pass a subscribe-all round for ever. So a subscription is passed at most once a ``window``:
///   a repeat within it is held back, not passed at once.
/// - **A cascade arrives.** Links that heal one after another within a second (a site's own link,
///   then its upstream's to the one above) each need this site to advertise again: what it
///   re-advertised for the first was lost on the second, still cut. So a repeat held back is
///   passed once when the window ends (a *trailing* pass); a repeat within a trailing pass's own
///   window is the loop's echo of it and is dropped, which is what ends a loop.
///
/// A repeat held back is also passed at once when one of this broker's own links connects within
/// the window (``linkConnected(now:)``): it was that new connection's.
///
/// No I/O: the broker loop and the simulator pass the time in and carry out what it returns.
struct UpstreamSubscriptionGate {
    static let window = Duration.seconds(1)
    /// Distinct subscriptions remembered at most; past it, those whose window ended are forgotten,
    /// and if none has, all but the held ones (at worst a repeat passes once more); if all are
    /// held, a newcomer passes unremembered.
    static let capacity = 10_000

    private struct Passed {
        var at: ContinuousClock.Instant
        /// Whether it was a trailing pass (whose window drops repeats: a loop's echo).
        var trailing: Bool
        /// When a repeat within the window was first held back.
        var repeatedAt: ContinuousClock.Instant?
    }

    private var passed: [[UInt8]: Passed] = [:]
    /// When the next trailing pass is due, if one is (at worst early: ``due(now:)`` then finds
    /// none and looks again); kept so that the broker's poll asks it for nothing.
    private(set) var nextDue: ContinuousClock.Instant?

    /// Whether `subscription`, from an upstream now, is passed to this site's publishers now.
    mutating func offer(_ subscription: [UInt8], now: ContinuousClock.Instant) -> Bool {
        if var last = passed[subscription] {
            if now - last.at < Self.window {
                if !last.trailing, last.repeatedAt == nil {
                    last.repeatedAt = now
                    passed[subscription] = last
                    nextDue = min(nextDue ?? last.at + Self.window, last.at + Self.window)
                }
                return false
            }
            if last.repeatedAt != nil {
                // Its trailing pass is due (the loop has not run it yet): this is that pass.
                passed[subscription] = Passed(at: now, trailing: true)
                return true
            }
        }
        // Remembered when there is room; a table full of held repeats (each waiting for its
        // trailing pass) leaves a newcomer passed unremembered: at worst its repeat passes too.
        if makeRoom(now: now) { passed[subscription] = Passed(at: now, trailing: false) }
        return true
    }

    /// The trailing passes due by `now`: the subscriptions repeated within their window, once each.
    mutating func due(now: ContinuousClock.Instant) -> [[UInt8]] {
        guard nextDue.map({ $0 <= now }) ?? false else { return [] }
        var passing: [[UInt8]] = []
        for (subscription, last) in passed where last.repeatedAt != nil && now - last.at >= Self.window {
            passing.append(subscription)
        }
        passing.sort { $0.lexicographicallyPrecedes($1) }
        for subscription in passing { passed[subscription] = Passed(at: now, trailing: true) }
        nextDue = passed.values.lazy.filter { $0.repeatedAt != nil }.map { $0.at + Self.window }.min()
        return passing
    }

    /// One of this broker's upstream links connected (libzmq's `connected`, before its
    /// handshake): the repeats held back within the last window pass now, as that connection's
    /// own; from now on, the next of each passes.
    mutating func linkConnected(now: ContinuousClock.Instant) -> [[UInt8]] {
        defer {
            passed.removeAll(keepingCapacity: true)
            nextDue = nil
        }
        return passed.compactMap { subscription, last in
            guard let repeatedAt = last.repeatedAt, now - repeatedAt < Self.window else { return nil }
            return subscription
        }.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// Whether there is room for one more, after forgetting what may be forgotten.
    private mutating func makeRoom(now: ContinuousClock.Instant) -> Bool {
        guard passed.count >= Self.capacity else { return true }
        passed = passed.filter { now - $0.value.at < Self.window }
        if passed.count >= Self.capacity { passed = passed.filter { $0.value.repeatedAt != nil } }
        return passed.count < Self.capacity
    }

    /// Subscriptions remembered (for tests: the bound).
    var remembered: Int { passed.count }
}
