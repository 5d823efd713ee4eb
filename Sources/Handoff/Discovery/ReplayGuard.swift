import Foundation

/// Replay protection for bus messages, without sockets: a message about an activity is believed
/// when it was sent within the replay window (by its `sentAt`, either way) and carries a higher
/// sequence than anything believed before from the same sender, for the same origin node, about the
/// same activity — also after the activity was withdrawn, for as long as the window lasts. Entries
/// older than the window are pruned: a replay of what they covered is stale by its own timestamp by
/// then.
///
/// By origin node as well as by sender: secure, the sender is a key, which a node keeps across
/// restarts, while its node id is new for each process (unless configured). A process's sequence
/// starts from its clock (``EnvelopeBuilder``), so a process started after its host's clock went
/// back (NTP stepping a clock that ran ahead) sends lower sequences than its predecessor did: keyed
/// by the key alone, its presence was refused as a replay of the old process's until the window
/// passed, and its activities were lost everywhere meanwhile (found by the simulator with clocks
/// stepped across restarts, docs/testing.md). Each process's messages are still checked against
/// that process's own.
///
/// Bounded: at most ``maxPerSender`` subjects of one sender, and ``maxEntries`` in all, within the
/// window. A message about a new subject past either is not believed (``Verdict/full``): forgetting
/// an entry instead would let a replay of its subject through, and a sender naming fresh subjects
/// as fast as it can would otherwise grow the table by its rate times the window.
struct ReplayGuard {
    /// What became of a message.
    enum Verdict: Equatable {
        case fresh
        /// Sent outside the window (or with no send time): `age` seconds ago (negative: ahead).
        case stale(age: TimeInterval)
        /// Not newer than what was believed before.
        case replayed
        /// About a new subject, with the sender's share of the table (or the whole table) in use.
        case full
    }

    let window: Duration
    let maxPerSender: Int
    let maxEntries: Int
    /// Entries per sender.
    private var perSender = HashedTable<HashedID, Int>()
    /// A sender, the origin node it speaks for and what it spoke about, together: joining them
    /// into one string cost an allocation per message heard, and a sender whose name holds the
    /// separator could be taken for another. Each hashed once, by the caller (``HashedID``), and
    /// the key's hash mixed from theirs: the table holds an entry per activity heard of within the
    /// window, and grows with the bus (``HashedTable``).
    private struct Key: HashedKey {
        var sender: HashedID
        var origin: HashedID
        var subject: HashedID
        /// One sender speaks of many subjects: the subject's hash decides most, and the sender's
        /// and the origin's, each multiplied by an odd constant, keep two senders' (or two
        /// processes') entries of a subject apart.
        var hashWord: Int {
            subject.hash ^ (sender.hash &* Int(bitPattern: 0x9E37_79B9_7F4A_7C15)) ^ (origin.hash &* Int(bitPattern: 0xC2B2_AE3D_27D4_EB4F))
        }
    }
    private var lastSequences = HashedTable<Key, (sequence: UInt64, seen: ContinuousClock.Instant)>()

    init(window: Duration, maxPerSender: Int = .max, maxEntries: Int = .max) {
        self.window = window
        self.maxPerSender = maxPerSender
        self.maxEntries = maxEntries
    }

    /// Entries kept (one per sender and activity heard of within the window).
    var count: Int { lastSequences.count }

    /// Checks a message and, when fresh, remembers its sequence.
    ///
    /// - Parameters:
    ///   - sender: Who speaks, as this node tells senders apart: the key when secure, else the node id.
    ///   - origin: The node (process) the sender speaks for; the sender itself when `nil`.
    ///   - subject: What the message is about (an activity id; presence uses a name no id can have).
    ///   - allowingRepeat: Whether the last message believed may come again (a snapshot answer: a
    ///     broker answers with the envelope its cache kept, which may be the very one heard live).
    mutating func check(
        sender: String, origin: String? = nil, subject: String, sequence: UInt64, sentAt: Date?, now: Date = Date(),
        clock: ContinuousClock.Instant = .now, allowingRepeat: Bool = false
    ) -> Verdict {
        let sender = HashedID(sender)
        return check(sender: sender, origin: origin.map { HashedID($0) } ?? sender, subject: HashedID(subject), sequence: sequence, sentAt: sentAt,
                     now: now, clock: clock, allowingRepeat: allowingRepeat)
    }

    /// The same, with the sender and the subject as the caller hashed them already.
    mutating func check(
        sender: HashedID, origin: HashedID, subject: HashedID, sequence: UInt64, sentAt: Date?, now: Date = Date(),
        clock: ContinuousClock.Instant = .now, allowingRepeat: Bool = false
    ) -> Verdict {
        guard let sentAt else { return .stale(age: .infinity) }
        let age = now.timeIntervalSince(sentAt)
        guard abs(age) <= window.seconds else { return .stale(age: age) }
        // One lookup for the check and the update: the entry is found once and written there.
        let key = Key(sender: sender, origin: origin, subject: subject)
        guard let position = lastSequences.position(of: key) else {
            guard lastSequences.count < maxEntries else { return .full }
            if let held = perSender.position(of: sender) {
                guard perSender[at: held] < maxPerSender else { return .full }
                perSender[at: held] += 1
            } else {
                perSender.insertNew(sender, 1)
            }
            lastSequences.insertNew(key, (sequence, clock))
            return .fresh
        }
        let last = lastSequences[at: position].sequence
        if sequence < last || (sequence == last && !allowingRepeat) { return .replayed }
        lastSequences[at: position] = (sequence, clock)
        return .fresh
    }

    /// Forgets entries last renewed before the window.
    mutating func prune(now: ContinuousClock.Instant) {
        let horizon = now - window
        var gone: [HashedID] = []
        lastSequences.removeAll { key, last in
            guard last.seen <= horizon else { return false }
            gone.append(key.sender)
            return true
        }
        for sender in gone {
            guard let position = perSender.position(of: sender) else { continue }
            if perSender[at: position] > 1 { perSender[at: position] -= 1 } else { _ = perSender.remove(at: position) }
        }
    }

    /// Entries of one sender (for tests).
    func entries(of sender: String) -> Int { perSender[HashedID(sender)] ?? 0 }
}
