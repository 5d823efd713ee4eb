import Synchronization

/// Which refused handshakes are logged: the first of each reason from each peer address, then at
/// most one line a minute per address and reason, saying how many went unlogged in between.
///
/// Every refusal is counted (``HandshakeRefusals``); the log only has to name who knocks and why.
/// A refused libzmq client reconnects ten times a second, so one misconfigured peer would otherwise
/// write ten lines a second. Limiting per address rather than per process keeps a second peer's
/// refusal from hiding behind the first's, and per reason keeps a peer's second kind of refusal (a
/// stolen public key after a plain connection) from hiding behind its first.
///
/// ``admit(_:now:)`` is the rule alone, under any key: a plugin's stream failures use it per kind
/// of failure (``PluginHostContext``).
struct RefusalLog {
    /// The least time between two lines about one address and reason.
    static let interval = Duration.seconds(60)
    /// The most addresses (and reasons) remembered; beyond it, those not heard of within
    /// ``interval`` are forgotten, and if none is, the newcomers share one entry (so a flood of
    /// addresses costs at most this much memory and one line a minute).
    static let capacity = 4_096
    /// The shared entry's name.
    static let otherAddresses = "(other addresses)"

    private var entries: [String: (lastLine: ContinuousClock.Instant, unlogged: Int)] = [:]

    /// The line to log for a refusal at `place` (e.g. "the broker"), from `address` (`nil` when
    /// unknown), or `nil` when this refusal is not to be logged.
    mutating func line(
        _ reason: HandshakeRefusals.Reason, from address: String?, at place: String, detail: String = "",
        now: ContinuousClock.Instant
    ) -> String? {
        guard let unlogged = admit("\(address ?? "?") \(reason.rawValue)", now: now) else { return nil }
        let from = address.map { "from \($0)" } ?? "from an unknown address"
        let since = unlogged == 0 ? "" : "; \(unlogged) more such from this address since the last line"
        return "refused a handshake \(from) at \(place): \(reason.explanation)\(detail) (counted as \(reason.label)\(since); logged at most once a minute per address and reason)"
    }

    /// Whether to log a refusal under `key` (an address and a reason) now: `nil` if not, else how
    /// many refusals under it went unlogged since its last line. A key already remembered costs one
    /// hash of it (a peer's held-back events ask this once per continue).
    mutating func admit(_ key: String, now: ContinuousClock.Instant) -> Int? {
        if let index = entries.index(forKey: key) { return Self.admit(&entries.values[index], now: now) }
        var key = key
        if entries.count >= Self.capacity {
            entries = entries.filter { now - $0.value.lastLine < Self.interval }
            if entries.count >= Self.capacity { key = Self.otherAddresses }
        }
        if let index = entries.index(forKey: key) { return Self.admit(&entries.values[index], now: now) }
        entries[key] = (now, 0)
        return 0
    }

    private static func admit(_ entry: inout (lastLine: ContinuousClock.Instant, unlogged: Int), now: ContinuousClock.Instant) -> Int? {
        guard now - entry.lastLine >= interval else {
            entry.unlogged += 1
            return nil
        }
        let unlogged = entry.unlogged
        entry = (now, 0)
        return unlogged
    }
}

/// A ``RefusalLog`` for refusals decided on another thread (a ZAP policy runs on the ZAP handler's).
final class SharedRefusalLog: Sendable {
    private let log = Mutex(RefusalLog())

    /// ``RefusalLog/line(_:from:at:detail:now:)``, under the lock.
    func line(_ reason: HandshakeRefusals.Reason, from address: String?, at place: String, detail: String = "") -> String? {
        log.withLock { $0.line(reason, from: address, at: place, detail: detail, now: .now) }
    }
}
