import Logging
import ZeroMQ

/// Carries out ``SubscriptionLedger`` for the node's publisher: in direct mode peers connect to
/// it and subscribe, and libzmq keeps each distinct subscription of theirs as a broker's backend
/// keeps its subscribers' (docs/operations.md, "What a subscriber's subscriptions cost").
extension Node {
    /// How many of one peer's (un)subscriptions libzmq reads off its connection to the publisher
    /// ahead of the node (the publisher's receive high-water mark). libzmq adds each to its trie as
    /// it takes it, before the node reads it, and a node reads each through its actor, slower than
    /// a broker's loop: a peer flooding 100,000 distinct subscriptions of 1 KiB, cut by the node at
    /// its 1,049th (the 1 MiB bound), took a debug node from 36 MiB to 0.6 and 3.1 GiB at libzmq's
    /// default of 1,000, to 164–192 MiB at a broker's 10 (``Broker/SubscriptionBounds/receiveQueue``),
    /// and to 70–132 MiB at 2 (docs/operations.md). Not 1: libzmq 4.3.4 counts the credential
    /// message a CURVE connection's session writes into the queue, and never counts it read, so
    /// over CURVE a queue of 1 is full before the first subscription (a pyzmq XPUB at 1 with CURVE
    /// receives nothing; at 2 it receives all) and a secure node never heard its peers. An honest
    /// peer's subscriptions take a little longer to read: 5,000 in 85–130 ms (57 ms at 10).
    static let publisherSubscriptionQueue: Int32 = 2

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
