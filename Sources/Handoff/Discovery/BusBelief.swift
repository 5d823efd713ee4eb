import Foundation

/// Whether a follower believes a bus message about an activity (or a node's presence), decided with
/// no I/O: who may speak for an activity, and replay protection (wire.proto, "Senders"). The
/// follower turns the verdict into what the node counts and logs (`Follower.believe`).
///
/// - The message must come from the activity's origin: the envelope's sender is the origin node.
/// - Secure, the sender is its key: the envelope's sender key must be the origin's, and the key the
///   activity is known under here, if it is known; so no member can speak for another, nor take
///   over an activity it did not start.
/// - It must be fresh for ``ReplayGuard``, kept per key and origin node id when secure (per node id
///   otherwise): a node's new process, with a new node id, is checked against its own messages.
struct BusBelief {
    enum Verdict: Equatable {
        case believed
        /// Sent by someone who may not speak for the subject; why, in words.
        case foreign(String)
        case stale(age: TimeInterval)
        case replayed
        /// About a new subject while replay protection holds its most for the sender (or in all).
        case full
    }

    let secure: Bool
    var replayGuard: ReplayGuard
    /// Secure: the replay guard's name for each sender key, made once per key.
    private var senderNames = SenderNames()

    init(secure: Bool, replayGuard: ReplayGuard) {
        self.secure = secure
        self.replayGuard = replayGuard
    }

    /// Judges what a message claims, as the envelope and its body say, its parts borrowed where
    /// they are (a value gathering them, made for each message, copied three strings into it):
    /// the sender's id and key, the origin's id (hashed once for every table it keys, as the
    /// subject) and key, the subject (the activity, or ``Follower/presenceSubject`` for a
    /// presence), the sequence and when it was sent. `knownKey` is the key the subject's activity
    /// is known under here (empty for an origin without one), `nil` when it is not known: its bytes
    /// as the key holds them (a `Data` of them was an allocation for every message heard). A
    /// believed message is remembered. `allowingRepeat`: the last message believed of the subject
    /// may come again (a snapshot answer).
    mutating func judge(
        senderNodeID: String, senderKey: Data, originNodeID: HashedID, originKey: Data, subject: HashedID, sequence: UInt64, sentAt: Date?,
        knownKey: [UInt8]?, now: Date, clock: ContinuousClock.Instant, allowingRepeat: Bool
    ) -> Verdict {
        guard senderNodeID == originNodeID.id else {
            return .foreign("news of \(subject) of node \(originNodeID) sent by another node, \(senderNodeID)")
        }
        if secure {
            guard senderKey == originKey, knownKey.map({ $0.elementsEqual(senderKey) }) ?? true else {
                return .foreign("news of \(subject) sent with a key that is not its origin's")
            }
        }
        let sender = secure ? senderNames.name(of: senderKey) : originNodeID
        switch replayGuard.check(
            sender: sender, origin: originNodeID, subject: subject, sequence: sequence, sentAt: sentAt, now: now, clock: clock, allowingRepeat: allowingRepeat
        ) {
        case .fresh: return .believed
        case .stale(let age): return .stale(age: age)
        case .replayed: return .replayed
        case .full: return .full
        }
    }
}

/// A sender key's name in the replay guard (its base64, hashed once), kept for the keys heard last:
/// made anew for every message, it was a string allocated and hashed per message on a secure bus.
/// Bounded: a fixed number of slots, each holding the last key that fell into it.
struct SenderNames {
    private static let slotCount = 16
    private var slots = [(key: Data, name: HashedID)?](repeating: nil, count: slotCount)

    mutating func name(of key: Data) -> HashedID {
        // Keys are random (CURVE public keys): their first byte is as good a slot as any.
        let slot = Int(key.first ?? 0) % Self.slotCount
        if let kept = slots[slot], kept.key == key { return kept.name }
        let name = HashedID(key.base64EncodedString())
        slots[slot] = (key, name)
        return name
    }
}
