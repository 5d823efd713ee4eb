import Foundation
import Logging

// The follower's settings and what it says back: its actions, an advertisement heard, what it
// ignored.
extension Follower {
    struct Settings {
        /// This node's id: its own news, come back through a broker, is not news.
        var nodeID: String
        /// Whether this node's own activities count as discovered (tests, monitors).
        var includeOwnActivities = false
        /// The lease of a presence that names none.
        var defaultLease: Duration
        var maxKnownPerNode: Int
        var maxKnown: Int
        var replayWindow: Duration
        var secure: Bool
        /// How many answerers each snapshot request has (brokers, or direct peers).
        var snapshotAnswerers: Int
        /// The most memory the activities it keeps take (``KnownActivities/maxBytes``).
        var maxKnownBytes = Int.max
        /// Snapshots asked at once (``Follower/maxSnapshotsUnderWay``; the simulator's are fewer,
        /// so that its nodes, which follow two prefixes at most, take turns under its faults).
        var snapshotsAtOnce = Follower.maxSnapshotsUnderWay
    }

    enum Action {
        /// For the discover streams whose filter matches.
        case emit(ActivityEvent)
        case subscribe(String)
        case unsubscribe(String)
        /// An activity appeared or changed: the continuation client refreshes it if it holds it.
        case changed(DiscoveredActivity)
        /// An activity is forgotten: the continuation client lets it go.
        case forgotten(String)
        /// Something this node refused to believe or keep, for the node to count and log.
        case ignored(Ignored)
        case log(Logger.Level, String)
        /// This node's own presence came back through the bus: it is on the bus.
        case ownPresenceHeard
        /// A round of snapshots asked again (``Resynchronization``), for the node to count.
        case snapshotRound(Resynchronization.Reason)
    }

    /// What hearing an advertisement came to: its commonest outcomes (known now, first or newer)
    /// without an array of actions made for each advertisement heard.
    enum Heard {
        /// ``Action/emit(_:)`` an ``ActivityEvent/appeared(_:)``, then ``Action/changed(_:)``.
        case appeared(DiscoveredActivity)
        /// ``Action/emit(_:)`` an ``ActivityEvent/updated(_:)``, then ``Action/changed(_:)``.
        case updated(DiscoveredActivity)
        case actions([Action])

        /// The same, as actions.
        var actions: [Action] {
            switch self {
            case .appeared(let activity): [.emit(.appeared(activity)), .changed(activity)]
            case .updated(let activity): [.emit(.updated(activity)), .changed(activity)]
            case .actions(let actions): actions
            }
        }
    }

    enum Ignored: Equatable {
        /// From a node that may not speak for it; why, in words.
        case foreign(String)
        /// Sent (by the sender's clock) `age` seconds before this node's clock says now (negative:
        /// ahead), outside the replay window, or with no time (infinite).
        case stale(subject: String, sender: String, age: TimeInterval)
        case replayed
        /// A new activity past the quota of its origin or of all.
        case overQuota
        /// Names an activity, type or node past the contract's lengths (``WireLimits/fitsBus``).
        case malformed(String)
    }
}

extension Follower.Settings {
    /// Four nodes' worth of one key (an agent, and commands run beside it under its key): one
    /// member naming itself as many nodes cannot fill the table.
    var maxKnownPerKey: Int { Self.times(maxKnownPerNode, 4) }

    /// Ten nodes' quotas of subjects one sender may have spoken of within the replay window
    /// (activities made and withdrawn again count until the window passes them).
    var maxReplaySubjectsPerSender: Int { Self.times(maxKnownPerNode, 10) }

    /// Ten times the known table, in all.
    var maxReplaySubjects: Int { Self.times(maxKnown, 10) }

    private static func times(_ count: Int, _ factor: Int) -> Int {
        let (product, overflow) = count.multipliedReportingOverflow(by: factor)
        return overflow ? .max : product
    }
}
