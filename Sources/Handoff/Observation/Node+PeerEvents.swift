import HandoffWire
import Logging

extension Node {
    /// Sends `event`, about something `peer` did (its CURVE key when secure, else its node id), on
    /// the bus within the peer's budget (``PeerEventBudget``); one held back is counted, and logged
    /// at most once a minute per peer. Returns whether it went. The event is made only when it goes.
    @discardableResult
    func publishPeerEvent(about peer: String, _ event: @autoclosure () -> WireNodeEvent) -> Bool {
        let now = ContinuousClock.now
        guard observability.eventBudget.admit(peer, now: now) else {
            observability.metrics.heldBackEvent()
            if let unlogged = observability.eventPeerLog.admit(peer, now: now) {
                let more = unlogged == 0 ? "" : "; \(unlogged) more held back since the last line"
                own.logger.notice("holding back node events about \(peer)'s continues and stream pairs: more than \(Int(PeerEventBudget.perSecond)) a second (counted in handoff_node_events_held_back_total\(more); logged at most once a minute per peer)")
            }
            return false
        }
        let event = event()
        sendOnBus(topic: Topic.event(event.activityType), .nodeEvent(event))
        return true
    }
}
