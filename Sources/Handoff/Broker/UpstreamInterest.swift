/// What a site's broker asks of its upstreams (wire.proto, "Sites"): for each topic prefix some
/// subscriber of its own follows (a node, or a site joined below it), one subscription to
/// `L:` + its name + `|` + prefix, made when the first subscriber comes and withdrawn when the
/// last one goes. Snapshot requests are not interest (answered here); "R:" and "X:" requests go
/// up as requests, subscribed and withdrawn at once (``PublisherRequests``).
///
/// Bounded as the upstream bounds a site (``SiteInterests``): at most ``maxPrefixes`` prefixes of
/// at most ``SiteInterests/maxPrefixLength`` bytes. On a secure broker, each prefix followed
/// upstream is counted to the key whose subscriber brought it, and one key (a relay's aside: it
/// speaks for a whole site below) brings at most ``maxPrefixesPerKey``: a member subscribing to
/// made-up topics cannot use up what the upstream lets this site follow. Past a bound a
/// subscription is followed here but not upstream (counted by the caller).
struct UpstreamInterest {
    static let maxPrefixes = SiteInterests.maxPrefixesPerSite
    /// Far more than a node follows (a prefix per activity type it handles, and presences).
    static let maxPrefixesPerKey = 256

    /// For each prefix followed upstream, the subscriptions here that follow it (a node's
    /// `A:t`, a lower site's `L:s|A:t`).
    private var followers: [[UInt8]: Set<[UInt8]>] = [:]
    /// Secure brokers: the key that brought each prefix (relays' not counted), and how many each brought.
    private var broughtBy: [[UInt8]: [UInt8]] = [:]
    private var prefixesOfKey: [[UInt8]: Int] = [:]
    let site: SiteName

    init(site: SiteName) { self.site = site }

    /// What a subscriber's (un)subscription here means upstream.
    enum Upstream: Equatable {
        /// Nothing goes up.
        case nothing
        /// This frame goes up: the frame as it is, or a subscription to a site topic.
        case send([UInt8])
        /// A first subscription to a prefix past a bound: followed here only.
        case refused
    }

    /// What to send upstream for a subscriber's (un)subscription frame here (1 or 0, then the
    /// topic). `key`: the subscriber's connection key on a secure broker, and whether it is a relay's.
    mutating func upstream(for frame: [UInt8], key: [UInt8]?, relay: Bool) -> Upstream {
        guard let action = frame.first, action == 0 || action == 1 else { return .nothing }
        let topic = frame.dropFirst()
        if topic.starts(with: Topic.snapshotPrefixBytes) { return .nothing }
        if topic.starts(with: Topic.readvertiseAllPrefixBytes) { return .nothing }  // a broker's own, passed down only
        // Requests for the publishers go up as requests (``PublisherRequests``), not interest.
        if topic.starts(with: Topic.readvertisePrefixBytes) || topic.starts(with: Topic.traceRequestPrefixBytes) { return .nothing }
        // A lower site's interest is the same interest here: this site follows it upstream.
        let prefix = Topic.splitSite(topic).map { Array($0.topic) } ?? Array(topic)
        let source = Array(topic)
        if action == 1 {
            if followers[prefix] == nil {
                guard prefix.count <= SiteInterests.maxPrefixLength, followers.count < Self.maxPrefixes else { return .refused }
                if let key, !relay {
                    guard prefixesOfKey[key, default: 0] < Self.maxPrefixesPerKey else { return .refused }
                    prefixesOfKey[key, default: 0] += 1
                    broughtBy[prefix] = key
                }
            }
            let first = followers[prefix] == nil
            followers[prefix, default: []].insert(source)
            return first ? .send([1] + Topic.site(site.bytes, prefix)) : .nothing
        }
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
        return .send([0] + Topic.site(site.bytes, prefix))
    }

    /// How many prefixes are followed upstream.
    var prefixCount: Int { followers.count }

    /// The type prefixes of activities followed upstream (to ask their snapshots again when a
    /// link comes back).
    var activityTypePrefixes: [String] {
        let activity = Array(Topic.activityPrefix.utf8)
        return followers.keys.filter { $0.starts(with: activity) }.map { String(decoding: $0.dropFirst(activity.count), as: UTF8.self) }
    }
}
