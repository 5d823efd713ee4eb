import Logging
import ZeroMQ

/// Carries out ``SubscriptionLedger``: each subscription frame from the backend counted against
/// the connection it came in on, and the connection that goes past a bound cut off.
extension BrokerLoop {
    /// How often the ledger asks the kernel which of its connections have gone.
    static let ledgerPruneInterval = Duration.seconds(10)

    /// Counts a subscriber's (un)subscription frame; false when the broker must do nothing more
    /// with it (its connection went past a bound with it, and is cut, or was cut before).
    func withinSubscriptionBounds(_ frame: Frame) -> Bool {
        // libzmq's own withdrawals (a topic's last subscriber went) come in on no connection.
        guard let descriptor = frame.sourceDescriptor else { return true }
        guard let connection = SourceConnection(descriptor: descriptor) else {
            // Its connection has gone since (or is going, cut): libzmq lets go of what it
            // subscribed, so a subscription asks nothing of anyone; a withdrawal is as it was.
            return frame.withUnsafeBytes { $0.first } != 1
        }
        let key = secure ? connectionKey(of: frame) : nil
        // Site brokers pass up the interests of a whole site.
        if let key, relayKeys.contains(key) { return true }
        let verdict = frame.withUnsafeBytes { bytes -> SubscriptionLedger<[UInt8]>.Verdict in
            let topic = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
            switch bytes.first {
            case 1: return subscriptionLedger.subscribed(topic, descriptor: connection.descriptor, peer: connection.peer, key: key)
            case 0: subscriptionLedger.unsubscribed(topic, descriptor: connection.descriptor, peer: connection.peer)
            default: break
            }
            return .within
        }
        switch verdict {
        case .within:
            return true
        case .refused:
            return false
        case .cut(let held, let overKey):
            let address = connection.peerAddress  // (asked first: a socket shut down has no peer)
            connection.cut()
            core.counted.subscribersCut += 1
            let bounds = subscriptionLedger.bounds
            let bound = overKey
                ? "its key's bound of \(bounds.perKey) subscriptions and \(bounds.bytesPerKey) bytes of topic over all its connections"
                : "the bound of \(bounds.perConnection) subscriptions and \(bounds.bytesPerConnection) bytes of topic a connection (\(held.subscriptions), \(held.bytes) bytes)"
            if let line = refusals.subscriberCut(key: key, address: address, past: bound) { logger.warning("\(line)") }
            publishCounters()
            return false
        }
    }

    /// Lets the ledger go of the connections that have gone (libzmq let go of their subscriptions).
    func pruneSubscriptionLedger(now: ContinuousClock.Instant) {
        nextLedgerPrune = now + Self.ledgerPruneInterval
        subscriptionLedger.forget { descriptor, peer in SourceConnection(descriptor: descriptor)?.peer != peer }
    }
}
