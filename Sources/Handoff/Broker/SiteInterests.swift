/// What each site joined below a broker follows (wire.proto, "Sites"): the topic prefixes its
/// broker subscribed to at this one's backend as `L:` + site + `|` + prefix. A message goes down to
/// a site only when one of its prefixes starts its topic.
///
/// Bounded by the backend's own subscriptions: libzmq reports each once subscribed (duplicates
/// too) and once the last subscriber of it is gone, a disconnected site's included, so a site's
/// entry lives exactly as long as its subscriptions do. A site may hold at most
/// ``maxPrefixesPerSite`` prefixes of at most ``maxPrefixLength`` bytes, and at most ``maxSites``
/// sites are known; beyond that a subscription is not taken (counted by the caller), and that site
/// hears nothing of it.
///
/// On a secure broker a site's name belongs to the key that first subscribed under it, for as
/// long as it follows anything, and a key that is no relay's speaks for at most
/// ``maxNamesPerKey`` names: a member cannot make the broker send each message once per name it
/// makes up, nor have more sent under a real site's name. A relay's key (`--relay`) takes a name
/// from any other key (a site broker restarted with a new key while its old connection lingers),
/// and what was followed under it before is dropped. An unsubscription that carries a key
/// (libzmq passes one up from a subscriber that never held the topic, too) is taken only from the
/// name's owner; one libzmq makes itself, when a topic's last subscriber goes, carries none.
/// (libzmq still sends a refused subscriber what goes down under the topics it subscribed to:
/// the binding bounds the copies this broker makes, not what a member of the bus may read.)
///
/// A site follows bus topics only: a prefix of a request or snapshot topic (`R:`, `X:`, `S:`) or
/// of a site topic (`L:`) is refused, so that no request reaches the publishers as a site's
/// standing interest.
///
/// Indexed by prefix, and by the lengths the prefixes have: the sites a message goes down to are
/// found with one lookup per distinct length, not a comparison with every prefix of every site.
struct SiteInterests {
    static let maxPrefixesPerSite = 10_000
    static let maxSites = 1_000
    /// The longest bus topic (`A:` + the longest activity type): a longer prefix matches nothing.
    static let maxPrefixLength = Topic.activityPrefix.utf8.count + WireLimits.maxActivityType
    /// Names one key that is no relay's may speak for at once: a site's broker needs one, a few
    /// more while a restarted one's old connection is not yet found dead.
    static let maxNamesPerKey = 8
    /// Topic prefixes nothing is published on to a site.
    static let notPublishedToSites = [Topic.readvertisePrefixBytes, Topic.traceRequestPrefixBytes, Topic.snapshotPrefixBytes, Topic.sitePrefixBytes]

    private var prefixes: [[UInt8]: Set<[UInt8]>] = [:]
    /// For each prefix some site follows, the sites that follow it.
    private var followers: [[UInt8]: Set<[UInt8]>] = [:]
    /// How many followed prefixes have each length, and those lengths in ascending order.
    private var lengthCounts: [Int: Int] = [:]
    private var lengths: [Int] = []
    /// Secure brokers: the key each site's name belongs to, and the names each key speaks for.
    private var owners: [[UInt8]: [UInt8]] = [:]
    private var namesOfKey: [[UInt8]: Set<[UInt8]>] = [:]

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
        /// The prefix is longer than any bus topic (``maxPrefixLength``).
        case prefixTooLong
        /// Another key's subscriber follows topics under this name (secure brokers).
        case nameHeld
        /// The subscriber's key speaks for ``maxNamesPerKey`` names already (secure brokers).
        case tooManyNames
        /// Not a bus topic's prefix: a request's, a snapshot's or a site topic's.
        case notBusTopic

        var reason: String {
            switch self {
            case .tooManySites: "\(SiteInterests.maxSites) sites follow topics here already"
            case .tooManyPrefixes: "it follows \(SiteInterests.maxPrefixesPerSite) topic prefixes here already"
            case .invalidName: "its name is not a site name (1–64 of A–Z a–z 0–9 . _ -)"
            case .prefixTooLong: "a prefix it follows is longer than any topic (\(SiteInterests.maxPrefixLength) bytes)"
            case .nameHeld: "a subscriber with another key follows topics under its name here"
            case .tooManyNames: "the subscriber's key speaks for \(SiteInterests.maxNamesPerKey) site names here already"
            case .notBusTopic: "a prefix it follows is a request's, a snapshot's or a site topic's (R:, X:, S:, L:), never published to sites"
            }
        }
    }

    /// A site's subscription to `prefix`; the refusal when it was not taken (past a bound).
    /// `key`: the subscriber's connection key on a secure broker (`nil` on an open one), and
    /// whether it is a relay's.
    mutating func subscribe(site: [UInt8], prefix: [UInt8], key: [UInt8]?, relay: Bool) -> Refusal? {
        guard prefix.count <= Self.maxPrefixLength else { return .prefixTooLong }
        guard !Self.notPublishedToSites.contains(where: { prefix.starts(with: $0) }) else { return .notBusTopic }
        if let key {
            if let owner = owners[site], owner != key {
                guard relay else { return .nameHeld }
                drop(site: site)
            }
            if owners[site] == nil, !relay, namesOfKey[key, default: []].count >= Self.maxNamesPerKey { return .tooManyNames }
        }
        if prefixes[site] == nil, prefixes.count >= Self.maxSites { return .tooManySites }
        if let known = prefixes[site], known.count >= Self.maxPrefixesPerSite, !known.contains(prefix) { return .tooManyPrefixes }
        if let key, owners[site] == nil {
            owners[site] = key
            namesOfKey[key, default: []].insert(site)
        }
        guard prefixes[site, default: []].insert(prefix).inserted else { return nil }
        if followers[prefix] == nil { countLength(of: prefix, by: 1) }
        followers[prefix, default: []].insert(site)
        return nil
    }

    /// The last of a site's subscriptions to `prefix` is gone. `key`: the key the unsubscription
    /// carried (`nil` when libzmq made it, or on an open broker): another than the name's owner's
    /// is ignored, as is one of a prefix the site does not hold (false).
    @discardableResult
    mutating func unsubscribe(site: [UInt8], prefix: [UInt8], key: [UInt8]?) -> Bool {
        if let key, let owner = owners[site], owner != key { return false }
        // (Not held: nothing to withdraw, here or at the publishers.)
        guard var known = prefixes[site], known.remove(prefix) != nil else { return false }
        if known.isEmpty { release(site) } else { prefixes[site] = known }
        unfollow(prefix, by: site)
        return true
    }

    /// Everything followed under `site`, dropped (a relay takes its name).
    private mutating func drop(site: [UInt8]) {
        for prefix in prefixes[site] ?? [] { unfollow(prefix, by: site) }
        release(site)
    }

    /// `site` follows nothing any more: its name is free.
    private mutating func release(_ site: [UInt8]) {
        prefixes[site] = nil
        guard let owner = owners.removeValue(forKey: site) else { return }
        namesOfKey[owner]?.remove(site)
        if namesOfKey[owner]?.isEmpty == true { namesOfKey[owner] = nil }
    }

    private mutating func unfollow(_ prefix: [UInt8], by site: [UInt8]) {
        guard var sites = followers[prefix] else { return }
        sites.remove(site)
        followers[prefix] = sites.isEmpty ? nil : sites
        if sites.isEmpty { countLength(of: prefix, by: -1) }
    }

    private mutating func countLength(of prefix: [UInt8], by change: Int) {
        let count = lengthCounts[prefix.count, default: 0] + change
        lengthCounts[prefix.count] = count > 0 ? count : nil
        if count == 0 || (change > 0 && count == 1) { lengths = lengthCounts.keys.sorted() }
    }

    /// Every site, other than `excluded`, that follows a prefix of `topic`.
    func sites(following topic: UnsafeRawBufferPointer, excluding excluded: [UInt8]?) -> [[UInt8]] {
        var found: Set<[UInt8]> = []
        for length in lengths {
            guard length <= topic.count else { break }
            guard let sites = followers[Array(topic.prefix(length))] else { continue }
            found.formUnion(sites)
        }
        if let excluded { found.remove(excluded) }
        return Array(found)
    }

    /// The prefixes a site follows (tests, the view).
    func prefixes(of site: [UInt8]) -> Set<[UInt8]> { prefixes[site] ?? [] }
}
