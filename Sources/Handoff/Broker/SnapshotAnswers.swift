/// The snapshot answers a broker has under way, decided with no I/O (time passed in): which to go
/// on with, how far each got, and what a request gets while too many are under way.
///
/// A snapshot is asked for by a subscription, which any subscriber may send as often as it likes,
/// and a whole answer is a message per matching cached activity (100,000 of them, tens of
/// milliseconds of the one thread that also forwards the bus). So answers go out in slices of
/// ``sliceSize`` messages, one slice per round of the broker's loop, between its bursts of bus
/// traffic: a fleet joining at once, or a member asking without end, slows the bus's messages by a
/// slice each round, never stops them. Answers are taken in the order asked (each asker waits on
/// its own, and the first to ask gets its whole answer first).
///
/// At most ``maxUnderWay`` answers are under way. A request past them is answered at once with a
/// `SnapshotReply` alone whose count is at least what matches, as a busy direct peer answers
/// (wire.proto, "Snapshots"): its asker finds it short and asks again after its backoff. A joiner
/// that asks once is answered in full whenever fewer than that many are under way; one that asks
/// without end holds one answer's state per request at most, and the bytes it is sent are held to
/// its own queue's high-water mark by the socket. An answer whose asker unsubscribed from its
/// topic (it went away, or gave up) is dropped.
struct SnapshotAnswers {
    /// One request being answered.
    struct Answer {
        /// The asker's snapshot topic: every message of the answer goes under it.
        let topic: [UInt8]
        let typePrefix: String
        /// The live topic prefix its activities are cached under ("A:" + type prefix).
        let activityTopicPrefix: [UInt8]
        /// A site's broker asking: its site's own activities are left out.
        let excludingSite: String?
        /// The cache slot to go on from.
        var cursor = 0
        /// Advertisements handed to the socket so far, and their bytes with the topic.
        var sent = 0
        var sentBytes = 0
    }

    /// Answers under way at most (the same as a direct peer's, ``Advertiser/maxSnapshotAnswers``).
    static let maxUnderWay = 64
    /// Messages of the answers per round of the broker's loop (the simulator's are smaller, so
    /// that its answers interleave with the bus as a large cache's do).
    let sliceSize: Int
    /// Cache slots looked at per round at most, matching or not: a slice of a narrow prefix in a
    /// large cache ends here rather than walking the whole cache at once.
    var slotsPerSlice: Int { 16 * sliceSize }

    /// In the order asked.
    private(set) var underWay: [Answer] = []
    /// Busy replies' counts: kept 100 ms per prefix, as a direct peer keeps them, and the cache
    /// walked at most once per 10 ms, so that a member asking for ever new prefixes costs one walk
    /// in that time, not one a request.
    private var busyCounts = BusyReplyCounts(capacity: maxUnderWay, spacing: .milliseconds(10))

    init(sliceSize: Int = 256) {
        precondition(sliceSize > 0, "a slice holds at least one message")
        self.sliceSize = sliceSize
    }

    var isEmpty: Bool { underWay.isEmpty }

    /// Takes a request; false when ``maxUnderWay`` are under way (answer it busy). A topic already
    /// under way (the same request again) is taken without a second answer.
    mutating func begin(topic: [UInt8], typePrefix: String, excludingSite: String?) -> Bool {
        if underWay.contains(where: { $0.topic == topic }) { return true }
        guard underWay.count < Self.maxUnderWay else { return false }
        underWay.append(Answer(
            topic: topic, typePrefix: typePrefix, activityTopicPrefix: Array((Topic.activityPrefix + typePrefix).utf8),
            excludingSite: excludingSite))
        return true
    }

    /// The asker unsubscribed from `topic`: its answer, if under way, is dropped and returned (what
    /// it sent is still counted).
    mutating func cancel(topic: some Collection<UInt8>) -> Answer? {
        guard let index = underWay.firstIndex(where: { $0.topic.elementsEqual(topic) }) else { return nil }
        return underWay.remove(at: index)
    }

    /// The first answer's state, to go on with in place (``finishFirst()`` once it is whole).
    var first: Answer {
        get { underWay[0] }
        set { underWay[0] = newValue }
    }

    /// The first answer is whole: taken out and returned (its reply is due).
    mutating func finishFirst() -> Answer { underWay.removeFirst() }

    /// The count for a busy reply to `typePrefix` (``BusyReplyCounts``).
    mutating func busyCount(of typePrefix: String, now: ContinuousClock.Instant, everything: Int, count: () -> Int) -> Int {
        busyCounts.count(of: typePrefix, now: now, everything: everything, walk: count)
    }
}
