/// What a broker forwards of its subscribers' interest: for each topic prefix some subscriber of
/// its own follows (a node, or a site joined below it), one subscription, made when the first
/// subscriber comes and withdrawn when the last one goes. Two destinations:
///
/// - ``Destination/upstream(_:)``: a site's broker asks its upstreams (wire.proto, "Sites") to
///   send it what its site follows, as `L:` + its name + `|` + prefix.
/// - ``Destination/publishers``: a broker without its cache (whose frontend does not subscribe to
///   everything) asks its publishers, whose XPUB filters by the prefix as it is. Its XSUB counts
///   every subscription the verbose backend passes, but libzmq passes only the last subscriber's
///   withdrawal: forwarded as they came, a prefix two subscribers had followed stood at the
///   publishers after both left.
///
/// Snapshot requests are not interest (answered here); "R:" and "X:" requests go on as
/// requests, subscribed and withdrawn at once (``PublisherRequests``).
///
/// Bounded as the upstream bounds a site (``SiteInterests``): at most ``maxPrefixes`` prefixes of
/// at most ``SiteInterests/maxPrefixLength`` bytes. On a secure broker, each prefix forwarded is
/// counted to the key whose subscriber brought it, and one key (a relay's aside: it speaks for a
/// whole site below) brings at most ``maxPrefixesPerKey``: a member subscribing to made-up topics
/// cannot use up what the upstream lets this site follow, nor grow this table. Past a bound a
/// subscription is not forwarded (``Forward/refused``; the caller decides what then).
struct ForwardedInterest {
    static let maxPrefixes = SiteInterests.maxPrefixesPerSite
    /// Far more than a node follows (a prefix per activity type it handles, and presences).
    static let maxPrefixesPerKey = 256

    /// For each prefix forwarded, the subscriptions here that follow it (a node's
    /// `A:t`, a lower site's `L:s|A:t`).
    private var followers: [[UInt8]: Set<[UInt8]>] = [:]
    /// Secure brokers: the key that brought each prefix (relays' not counted), and how many each brought.
    private var broughtBy: [[UInt8]: [UInt8]] = [:]
    private var prefixesOfKey: [[UInt8]: Int] = [:]
    /// Secure brokers: the keys whose subscribers subscribed to each source (the one of them
    /// whose withdrawal libzmq passes up withdraws it).
    private var subscribedKeys: [[UInt8]: Set<[UInt8]>] = [:]
    /// Keys remembered a source at most (past it, another's withdrawal is ignored: the interest
    /// stays until libzmq's own withdrawal, when the last of them goes). A source followed by more
    /// keys (`P:` in a fleet of thousands) could be withdrawn by the last remembered key's
    /// withdrawal of it while unremembered keys follow it: that takes a member withdrawing what
    /// it never held, after every remembered key withdrew.
    static let maxKeysPerSource = 1_024
    /// Where the interest goes.
    enum Destination: Equatable {
        /// Up to the upstreams, as this site's.
        case upstream(SiteName)
        /// To this broker's own publishers, as it is.
        case publishers
    }

    let destination: Destination

    init(_ destination: Destination) { self.destination = destination }

    /// What a subscriber's (un)subscription here means at the destination.
    enum Forward: Equatable {
        /// Nothing goes on.
        case nothing
        /// This frame goes on: a (un)subscription to a site topic, or to the prefix as it is.
        case send([UInt8])
        /// A first subscription to a prefix past a bound (upstream, also one longer than any
        /// topic): not forwarded.
        case refused
    }

    /// The frame that (un)subscribes (`action`: 1 or 0) to `prefix` at the destination.
    private func frame(_ action: UInt8, _ prefix: [UInt8]) -> [UInt8] {
        switch destination {
        case .upstream(let site): [action] + Topic.site(site.bytes, prefix)
        case .publishers: [action] + prefix
        }
    }

    /// What to forward for a subscriber's (un)subscription frame here (1 or 0, then the topic).
    /// `key`: the key it carried on a secure broker (none on an unsubscription libzmq made
    /// itself, when a topic's last subscriber went), and whether it is a relay's.
    ///
    /// libzmq also passes up an unsubscription from a subscriber that never held the topic: one
    /// carrying a key takes only that key off the source, which goes once no key that subscribed
    /// to it is left, so that no member withdraws what others follow. (A key whose subscriber left
    /// quietly, while others held the topic, stays counted: the interest may outlast its last
    /// follower until libzmq's own withdrawal, within the bound on prefixes.)
    mutating func forward(_ frame: [UInt8], key: [UInt8]?, relay: Bool) -> Forward {
        guard let action = frame.first, action == 0 || action == 1 else { return .nothing }
        let topic = frame.dropFirst()
        // A lower site's interest is the same interest here: this site follows it (upstream, or
        // at its publishers).
        let prefix = Topic.splitSite(topic).map { Array($0.topic) } ?? Array(topic)
        // Snapshot requests are answered here; requests for the publishers go up as requests
        // (``PublisherRequests``); `R:*` is a broker's own, passed down only: none is interest.
        // (The topic may be a lower site's, `L:` + its name + `|` + prefix: its prefix is checked.)
        guard !SiteInterests.notPublishedToSites.contains(where: { prefix.starts(with: $0) }) else { return .nothing }
        let source = Array(topic)
        if action == 1 {
            if followers[prefix] == nil {
                // Longer than any topic, it matches nothing: the publishers are not asked for it;
                // upstream it is a refusal the site's operator is told of.
                guard prefix.count <= SiteInterests.maxPrefixLength else { return destination == .publishers ? .nothing : .refused }
                guard followers.count < Self.maxPrefixes else { return .refused }
                if let key, !relay {
                    guard prefixesOfKey[key, default: 0] < Self.maxPrefixesPerKey else { return .refused }
                    prefixesOfKey[key, default: 0] += 1
                    broughtBy[prefix] = key
                }
            }
            let first = followers[prefix] == nil
            followers[prefix, default: []].insert(source)
            if let key, subscribedKeys[source, default: []].count < Self.maxKeysPerSource { subscribedKeys[source, default: []].insert(key) }
            return first ? .send(self.frame(1, prefix)) : .nothing
        }
        if let key {
            // A key's withdrawal takes only that key off: the source goes once no key that
            // subscribed to it is left (or with libzmq's own withdrawal, which carries none). A
            // member that subscribed, withdrew (held by others: not passed up) and withdrew again
            // (not held: passed up) so withdraws only itself.
            guard subscribedKeys[source]?.remove(key) != nil else { return .nothing }
            guard subscribedKeys[source]?.isEmpty != false else { return .nothing }
        }
        subscribedKeys[source] = nil
        guard var sources = followers[prefix], sources.remove(source) != nil else { return .nothing }
        guard sources.isEmpty else {
            followers[prefix] = sources
            return .nothing
        }
        followers[prefix] = nil
        if let key = broughtBy.removeValue(forKey: prefix) {
            let count = prefixesOfKey[key, default: 1] - 1
            prefixesOfKey[key] = count > 0 ? count : nil
        }
        return .send(self.frame(0, prefix))
    }

    /// How many prefixes are forwarded.
    var prefixCount: Int { followers.count }

    /// The type prefixes of activities forwarded (upstream: to ask their snapshots again when a
    /// link comes back).
    var activityTypePrefixes: [String] {
        let activity = Array(Topic.activityPrefix.utf8)
        return followers.keys.filter { $0.starts(with: activity) }.map { String(decoding: $0.dropFirst(activity.count), as: UTF8.self) }
    }
}
