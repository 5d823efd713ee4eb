import ZeroMQ

/// Which of a broker's refusals are logged, and the lines: a forged message once per key, an
/// origin over its quota once per origin (each set bounded), a failed handshake at most once a
/// minute per peer address and reason (``RefusalLog``). Every refusal is counted all the same.
struct BrokerRefusalLog {
    /// The most keys, and origins, remembered as logged: past it, no more lines of that kind.
    static let capacity = 10_000
    private var loggedForgers: Set<String> = []
    private var loggedPastLengths: Set<String> = []
    private var loggedOverQuota: Set<String> = []
    private var loggedOverKeyQuota: Set<[UInt8]> = []
    private var loggedSites: Set<String> = []
    private var loggedCutSubscribers: Set<String> = []
    private var loggedUnfinished: Set<String> = []
    private var handshakes = RefusalLog()

    /// The line for a message dropped because its sender is not who it says, or it publishes
    /// where only the broker may; `nil` when its key was logged already.
    mutating func forged(_ reason: String, key: [UInt8]?) -> String? {
        let name = key.flatMap { try? CurveKey(bytes: $0).z85 } ?? "(no CURVE)"
        guard loggedForgers.count < Self.capacity, loggedForgers.insert(name).inserted else { return nil }
        return "dropping a bus message from key \(name): it \(reason) (counted in forged; logged once per key)"
    }

    /// The line for a message dropped because it names an activity or node past the contract's
    /// lengths; `nil` when its key was logged already.
    mutating func pastLengths(_ reason: String, key: [UInt8]?) -> String? {
        let name = key.flatMap { try? CurveKey(bytes: $0).z85 } ?? "(no CURVE)"
        guard loggedPastLengths.count < Self.capacity, loggedPastLengths.insert(name).inserted else { return nil }
        return "dropping a bus message from key \(name): it \(reason) (counted in malformed; logged once per key)"
    }

    /// The line for a new activity dropped for its origin's quota; `nil` when the origin was
    /// logged already.
    mutating func overQuota(origin: String, activityID: String, quota: Int) -> String? {
        guard loggedOverQuota.count < Self.capacity, loggedOverQuota.insert(origin).inserted else { return nil }
        return "node \(origin) advertises more than \(quota) activities: dropping its new ones (activity \(activityID) first), counted in overQuota"
    }

    /// The line for a new activity dropped for its key's quota; `nil` when the key was logged already.
    mutating func overKeyQuota(key: [UInt8], activityID: String, quota: Int) -> String? {
        guard loggedOverKeyQuota.count < Self.capacity, loggedOverKeyQuota.insert(key).inserted else { return nil }
        let name = (try? CurveKey(bytes: key).z85) ?? "(\(key.count) bytes)"
        return "key \(name) has \(quota) activities cached over all the nodes that name it: dropping its new ones (activity \(activityID) first), counted in overQuota"
    }

    /// The line for a site's subscription not taken; `nil` when the site was logged already.
    mutating func siteInterest(site: String, _ refusal: SiteInterests.Refusal) -> String? {
        let name = site.count <= 64 ? site : String(site.prefix(64)) + "…"
        guard loggedSites.count < Self.capacity, loggedSites.insert(name).inserted else { return nil }
        return "not following topics for site \"\(name)\" below: \(refusal.reason) (counted in siteInterestsRefused; logged once per site)"
    }

    /// The line for a subscriber's connection cut for what its subscriptions hold
    /// (``SubscriptionLedger``); `nil` when its key (without CURVE, its address) was logged already.
    mutating func subscriberCut(key: [UInt8]?, address: String?, past bound: String) -> String? {
        let name = key.flatMap { try? CurveKey(bytes: $0).z85 }.map { "key \($0)" } ?? "address \(address ?? "unknown")"
        guard loggedCutSubscribers.count < Self.capacity, loggedCutSubscribers.insert(name).inserted else { return nil }
        return "cut off a subscriber's connection (\(name)): its subscriptions went past \(bound) (counted in subscribersCut; logged once per key or address)"
    }

    /// The line for a connection cut for a message it did not finish (``UnfinishedMessageBound``);
    /// `nil` when its address was logged already.
    mutating func unfinishedMessageCut(address: String?, bytes: Int, bound: Int) -> String? {
        let name = address ?? "unknown"
        guard loggedUnfinished.count < Self.capacity, loggedUnfinished.insert(name).inserted else { return nil }
        return "cut off a connection with \(name): it handed the broker \(bytes) bytes without finishing a message (the bound: \(bound)); counted in unfinishedMessagesCut; logged once per address"
    }

    /// The line for a handshake that failed before the account was asked, if one is due.
    mutating func handshake(_ reason: HandshakeRefusals.Reason, from address: String?, at place: String, now: ContinuousClock.Instant) -> String? {
        handshakes.line(reason, from: address, at: place, now: now)
    }
}
