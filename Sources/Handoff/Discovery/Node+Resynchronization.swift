import Foundation
import Logging

// Recovering what the bus lost while originators lived: followers ask for their snapshots again
// (``Resynchronization``), and an originator advertises everything again when a broker asks.
extension Node {
    // MARK: Following side

    /// A presence renewed what it lists; those of its ids this node does not hold may be lost
    /// activities of a type it follows.
    func resynchronize(afterPresenceOf origin: String, listing listed: Set<String>) {
        guard !watchers.topics.isEmpty else { return }
        var unheld: Set<String> = []
        for id in listed where known[id] == nil { unheld.insert(id) }
        if resynchronization.presence(origin: origin, listed: listed, unheld: unheld, now: .now) {
            logger.debug("a presence of \(origin) names \(unheld.count) activities not known here; asking for the snapshots again")
            askForSnapshotsAgain()
        }
    }

    /// A bus subscriber connected again (a broker restarted, the network came back): what was
    /// advertised meanwhile went past this node.
    func busReconnected(to endpoint: String) {
        guard !watchers.topics.isEmpty else { return }
        if resynchronization.reconnected(now: .now) {
            logger.info("connected to \(endpoint) again; asking for the snapshots of what this node follows")
            askForSnapshotsAgain()
        }
    }

    /// On every tick: a round put off by the interval starts, and a round whose snapshots all
    /// arrived settles.
    func resynchronizeIfDue(now: ContinuousClock.Instant) {
        if resynchronization.due(now: now) { askForSnapshotsAgain() }
        if resynchronization.inRound, snapshots.isEmpty {
            resynchronization.settled { known[$0] != nil }
        }
    }

    /// Asks for a snapshot of every followed type prefix that has none under way. The answers
    /// count as news only where they are (replay protection and versions decide, as for any).
    func askForSnapshotsAgain() {
        for topic in watchers.topics where topic.hasPrefix(Topic.activityPrefix) {
            let typePrefix = String(topic.dropFirst(Topic.activityPrefix.count))
            if !snapshots.isPending(typePrefix: typePrefix) { requestSnapshot(typePrefix: typePrefix) }
        }
    }

    // MARK: Originating side

    /// The topic of a broker's request that this node advertise again (wire.proto, "R:").
    var readvertiseTopic: [UInt8] { Array((Topic.readvertisePrefix + id).utf8) }

    /// Advertises every current activity again: a broker connected (its subscribe-all), or asked
    /// because its cache lacks some that this node's presence lists. Its requests are honoured at
    /// most once a second, so that a broker cannot make a node flood the bus.
    func readvertise(askedByBroker: Bool) {
        let now = ContinuousClock.now
        if askedByBroker {
            if let last = lastReadvertised, now - last < .seconds(1) { return }
            logger.info("a broker lost some of this node's activities; advertising all \(current.count) again")
        }
        lastReadvertised = now
        for activity in current.activities { publish(activity) }
    }
}
