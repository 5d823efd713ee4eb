/// The activities this node continued and still knows on the bus, for did-update: when the
/// originator advertises a newer version, the node fetches it once and tells its delegate.
///
/// At most one fetch per activity runs at a time; a version seen while one runs is fetched after it.
/// A fetch that failed on the way (the originator unreachable, a timeout, the connection lost) is
/// tried again a second later while a newer version is still known (one the originator refused
/// waits for a newer version): a did-update is never lost because the originator could not be
/// reached when its newer version was heard (the simulator found this, "held-activity-updated").
/// An activity leaves when it leaves the bus.
struct HeldActivities {
    private struct Entry {
        var version: UInt64
        var refreshing = false
        /// After a failed fetch: not before then.
        var retryAt: ContinuousClock.Instant?
    }

    /// How long after a failed fetch the next one may start.
    static let retryDelay = Duration.seconds(1)

    /// Whether a fetch that ended with this error is worth trying again: the way failed, not the
    /// originator's answer (which would say the same again).
    static func worthRetrying(_ code: HandoffError.Code) -> Bool {
        [.connectionUnavailable, .remoteApplicationTimedOut, .peerLost].contains(code)
    }

    private var entries: [String: Entry] = [:]

    var count: Int { entries.count }

    /// The version a continuation restored; an older one than already held changes nothing.
    mutating func hold(_ id: String, version: UInt64) {
        if let held = entries[id], held.version >= version { return }
        entries[id] = Entry(version: version, refreshing: entries[id]?.refreshing ?? false)
    }

    /// A continue restored `version` of an activity whose newest version on the bus is `known`
    /// (`nil`: it left the bus meanwhile, and is not held). Whether to fetch `known` at once: a
    /// version advertised while the request was under way started no fetch, the activity not
    /// being held yet, and would otherwise wait for an even newer one (a lost did-update).
    mutating func continued(_ id: String, version: UInt64, known: UInt64?, now: ContinuousClock.Instant) -> Bool {
        guard let known else { return false }
        hold(id, version: version)
        return beginRefresh(id, advertised: known, now: now)
    }

    /// A fetch is over (see ``endRefresh(_:failed:)``), and `known` is the newest version on the
    /// bus: whether to fetch it now, advertised while the last fetch ran or was told.
    mutating func refreshEnded(_ id: String, known: UInt64?, now: ContinuousClock.Instant) -> Bool {
        endRefresh(id)
        guard let known else { return false }
        return beginRefresh(id, advertised: known, now: now)
    }

    /// The version held, if the activity is.
    func version(of id: String) -> UInt64? { entries[id]?.version }

    /// Every activity held, with its version (the simulator's did-update invariant reads them).
    var versions: [String: UInt64] { entries.mapValues(\.version) }

    /// Whether a fetch of the activity runs.
    func isRefreshing(_ id: String) -> Bool { entries[id]?.refreshing ?? false }

    /// Whether to fetch the activity now that `advertised` is on the bus: it is held, newer than
    /// what was restored, and no fetch runs. Marks the fetch as running when it says yes.
    mutating func beginRefresh(_ id: String, advertised: UInt64, now: ContinuousClock.Instant) -> Bool {
        guard var entry = entries[id], advertised > entry.version, !entry.refreshing, entry.retryAt.map({ now >= $0 }) ?? true else {
            return false
        }
        entry.refreshing = true
        entry.retryAt = nil
        entries[id] = entry
        return true
    }

    /// A fetch brought `fetched`: whether that version is news to tell the delegate (newer than
    /// the one held, which it becomes). The fetch still counts as running until ``endRefresh(_:)``.
    mutating func accept(_ id: String, fetched: UInt64) -> Bool {
        guard var entry = entries[id], fetched > entry.version else { return false }
        entry.version = fetched
        entries[id] = entry
        return true
    }

    /// The fetch is over (told, or refused by the originator): the next newer version may start
    /// another. A fetch that failed on the way (`failed`, at `now`) is tried again after
    /// ``retryDelay`` (``dueRetries(now:knownVersion:)``).
    mutating func endRefresh(_ id: String, failed now: ContinuousClock.Instant? = nil) {
        entries[id]?.refreshing = false
        entries[id]?.retryAt = now.map { $0 + Self.retryDelay }
    }

    /// The fetch failed with `code`: over, and tried again after ``retryDelay`` when the failure
    /// was on the way (``worthRetrying(_:)``), not the originator's answer. Returns whether it will be.
    @discardableResult
    mutating func refreshFailed(_ id: String, with code: HandoffError.Code, now: ContinuousClock.Instant) -> Bool {
        let retry = Self.worthRetrying(code)
        endRefresh(id, failed: retry ? now : nil)
        return retry
    }

    /// The held activities whose failed fetch is due again: a newer version than the one held is
    /// still known (`knownVersion`), no fetch runs, and the retry delay has passed.
    func dueRetries(now: ContinuousClock.Instant, knownVersion: (String) -> UInt64?) -> [String] {
        entries.compactMap { id, entry in
            guard let retryAt = entry.retryAt, now >= retryAt, !entry.refreshing, let known = knownVersion(id), known > entry.version else { return nil }
            return id
        }.sorted()
    }

    /// The activity left the bus.
    mutating func release(_ id: String) {
        entries[id] = nil
    }
}
