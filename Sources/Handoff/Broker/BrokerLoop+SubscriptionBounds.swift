import Logging
import ZeroMQ

/// Carries out ``SubscriptionLedger``: each subscription frame from the backend counted against
/// the connection it came in on, and the connection that goes past a bound cut off.
extension BrokerLoop {
    /// Counts a subscriber's (un)subscription frame; false when the broker must do nothing more
    /// with it (its connection went past a bound with it, and is cut, or was cut before).
    func withinSubscriptionBounds(_ frame: Frame) -> Bool {
        withinBounds(frame, of: &subscriptionLedger)
    }

    /// A capture subscriber's (un)subscription: counted, and nothing more (the capture's XPUB
    /// filters what it sends by them); anything else from it is dropped.
    func fromCaptureSubscriber(_ frames: [Frame]) {
        guard frames.count == 1 else { return }
        _ = withinBounds(frames[0], of: &captureLedger)
    }

    private func withinBounds(_ frame: Frame, of ledger: inout SubscriptionLedger<[UInt8]>) -> Bool {
        let key = secure ? connectionKey(of: frame) : nil
        // Site brokers pass up the interests of a whole site.
        if let key, relayKeys.contains(key) { return true }
        let admission = ledger.admit(frame, key: key)
        if let (address, bound) = admission.cut {
            core.counted.subscribersCut += 1
            if let line = refusals.subscriberCut(key: key, address: address, past: bound) { logger.warning("\(line)") }
            publishCounters()
        }
        return admission.goesOn
    }
}
