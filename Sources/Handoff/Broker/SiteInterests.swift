/// What each site joined below a broker follows (wire.proto, "Sites"): the topic prefixes its
/// broker subscribed to at this one's backend as `L:` + site + `|` + prefix. A message goes down to
/// a site only when one of its prefixes starts its topic.
///
/// Bounded by the backend's own subscriptions: libzmq reports each once subscribed (duplicates
/// too) and once the last subscriber of it is gone, a disconnected site's included, so a site's
/// entry lives exactly as long as its subscriptions do. A site may hold at most
/// ``maxPrefixesPerSite`` prefixes, and at most ``maxSites`` sites are known; beyond that a
/// subscription is not taken (counted by the caller), and that site hears nothing of it.
struct SiteInterests {
    static let maxPrefixesPerSite = 10_000
    static let maxSites = 1_000

    private var prefixes: [[UInt8]: Set<[UInt8]>] = [:]

    var isEmpty: Bool { prefixes.isEmpty }
    /// The sites that follow something.
    var sites: Dictionary<[UInt8], Set<[UInt8]>>.Keys { prefixes.keys }
    var siteCount: Int { prefixes.count }

    /// Why a site's subscription was not taken.
    enum Refusal: Equatable {
        /// ``maxSites`` sites follow something already, and this is another.
        case tooManySites
        /// The site follows ``maxPrefixesPerSite`` prefixes already.
        case tooManyPrefixes
        /// Not a site name (``SiteName``).
        case invalidName

        var reason: String {
            switch self {
            case .tooManySites: "\(SiteInterests.maxSites) sites follow topics here already"
            case .tooManyPrefixes: "it follows \(SiteInterests.maxPrefixesPerSite) topic prefixes here already"
            case .invalidName: "its name is not a site name (1–64 of A–Z a–z 0–9 . _ -)"
            }
        }
    }

    /// A site's subscription to `prefix`; the refusal when it was not taken (past a bound).
    mutating func subscribe(site: [UInt8], prefix: [UInt8]) -> Refusal? {
        if prefixes[site] == nil, prefixes.count >= Self.maxSites { return .tooManySites }
        if let known = prefixes[site], known.count >= Self.maxPrefixesPerSite, !known.contains(prefix) { return .tooManyPrefixes }
        prefixes[site, default: []].insert(prefix)
        return nil
    }

    /// The last of a site's subscriptions to `prefix` is gone.
    mutating func unsubscribe(site: [UInt8], prefix: [UInt8]) {
        guard var known = prefixes[site] else { return }
        known.remove(prefix)
        prefixes[site] = known.isEmpty ? nil : known
    }

    /// Every site, other than `excluded`, that follows a prefix of `topic`.
    func sites(following topic: UnsafeRawBufferPointer, excluding excluded: [UInt8]?) -> [[UInt8]] {
        var found: [[UInt8]] = []
        for (site, sitePrefixes) in prefixes where site != excluded {
            if sitePrefixes.contains(where: { topic.starts(with: $0) }) { found.append(site) }
        }
        return found
    }

    /// The prefixes a site follows (tests, the view).
    func prefixes(of site: [UInt8]) -> Set<[UInt8]> { prefixes[site] ?? [] }
}

/// What a site's broker asks of its upstreams (wire.proto, "Sites"): for each topic prefix some
/// subscriber of its own follows (a node, or a site joined below it), one subscription to
/// `L:` + its name + `|` + prefix, made when the first subscriber comes and withdrawn when the
/// last one goes. Snapshot requests are not interest (answered here); "R:" and "X:" requests go
/// up as they are.
struct UpstreamInterest {
    /// For each prefix followed upstream, the subscriptions here that follow it (a node's
    /// `A:t`, a lower site's `L:s|A:t`).
    private var followers: [[UInt8]: Set<[UInt8]>] = [:]
    let site: SiteName

    init(site: SiteName) { self.site = site }

    /// What to send upstream for a subscriber's (un)subscription frame here (1 or 0, then the
    /// topic): nothing, the frame as it is, or a subscription to a site topic.
    mutating func upstream(for frame: [UInt8]) -> [UInt8]? {
        guard let action = frame.first, action == 0 || action == 1 else { return nil }
        let topic = frame.dropFirst()
        if topic.starts(with: Topic.snapshotPrefixBytes) { return nil }
        if topic.starts(with: Topic.readvertiseAllPrefixBytes) { return nil }  // a broker's own, passed down only
        if topic.starts(with: Topic.readvertisePrefixBytes) || topic.starts(with: Topic.traceRequestPrefixBytes) { return frame }
        // A lower site's interest is the same interest here: this site follows it upstream.
        let prefix = Topic.splitSite(topic).map { Array($0.topic) } ?? Array(topic)
        let source = Array(topic)
        if action == 1 {
            let first = followers[prefix] == nil
            followers[prefix, default: []].insert(source)
            return first ? [1] + Topic.site(site.bytes, prefix) : nil
        }
        guard var sources = followers[prefix], sources.remove(source) != nil else { return nil }
        followers[prefix] = sources.isEmpty ? nil : sources
        return sources.isEmpty ? [0] + Topic.site(site.bytes, prefix) : nil
    }

    /// The type prefixes of activities followed upstream (to ask their snapshots again when a
    /// link comes back).
    var activityTypePrefixes: [String] {
        let activity = Array(Topic.activityPrefix.utf8)
        return followers.keys.filter { $0.starts(with: activity) }.map { String(decoding: $0.dropFirst(activity.count), as: UTF8.self) }
    }
}
