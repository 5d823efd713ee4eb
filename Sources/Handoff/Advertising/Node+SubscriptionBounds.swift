import Logging
import ZeroMQ

/// Carries out ``SubscriptionLedger`` for the node's publisher: in direct mode peers connect to
/// it and subscribe, and libzmq keeps each distinct subscription of theirs as a broker's backend
/// keeps its subscribers' (docs/operations.md, "What a subscriber's subscriptions cost").
extension Node {
    /// Counts an (un)subscription the publisher read; false when the node must do nothing more
    /// with it (its connection went past a bound with it, and is cut, or was cut before).
    func withinSubscriptionBounds(_ frame: Frame, ledger: inout SubscriptionLedger<[UInt8]>) -> Bool {
        let key = access.security == nil ? nil : frame.property("User-Id").flatMap { try? CurveKey(z85: $0).bytes }
        let admission = ledger.admit(frame, key: key)
        if let (address, bound) = admission.cut {
            observability.securityCounters.subscribersCut += 1
            let who = key.flatMap { try? CurveKey(bytes: $0).z85 }.map { "key \($0)" } ?? "address \(address ?? "unknown")"
            logRateLimited("cut off a connection to this node's publisher (\(who)): its subscriptions went past \(bound); counted in subscribersCut")
        }
        return admission.goesOn
    }
}
