/// Type prefixes waiting their turn to be asked for a snapshot, in the order they came, each once:
/// an asker keeps only so many requests under way (a node's follower, ``Follower``; a site's
/// broker, ``UpstreamSnapshots``), since an answerer answers 64 at once and replies to the rest
/// with its count alone (``SnapshotAnswers``), which the asker finds short and asks again, up to
/// five times, before it gives up on them.
///
/// A prefix taken off (nothing follows it any more) leaves its entry behind, skipped when its turn
/// comes and let go before such entries outnumber those waiting: following and leaving a prefix
/// over and over does not grow the queue.
struct SnapshotTurns {
    /// The entries from ``head`` on are waiting (those no longer in ``waiting`` were taken off).
    private var queue: [String] = []
    private var head = 0
    private var waiting: Set<String> = []

    /// Prefixes waiting.
    var count: Int { waiting.count }
    var isEmpty: Bool { waiting.isEmpty }
    /// The entries the queue holds for them (tests: the bound).
    var entries: Int { queue.count - head }

    func contains(_ typePrefix: String) -> Bool { waiting.contains(typePrefix) }

    /// Puts `typePrefix` at the back, unless it is waiting already.
    mutating func append(_ typePrefix: String) {
        guard waiting.insert(typePrefix).inserted else { return }
        if queue.count - head > 2 * waiting.count + 64 { compact() }
        queue.append(typePrefix)
    }

    /// Takes `typePrefix` off; whether it was waiting.
    @discardableResult
    mutating func remove(_ typePrefix: String) -> Bool {
        waiting.remove(typePrefix) != nil
    }

    /// The prefix whose turn came, taken off; `nil` when none waits.
    mutating func next() -> String? {
        while head < queue.count {
            let typePrefix = queue[head]
            head += 1
            if waiting.remove(typePrefix) != nil {
                trimFront()
                return typePrefix
            }
        }
        trimFront()
        return nil
    }

    /// What was taken from the front, let go once it is most of the array.
    private mutating func trimFront() {
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1_024, head * 2 > queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }

    /// The queue without what was taken from its front or off, each prefix once (at its first place).
    private mutating func compact() {
        var seen: Set<String> = []
        queue = queue[head...].filter { waiting.contains($0) && seen.insert($0).inserted }
        head = 0
    }
}
