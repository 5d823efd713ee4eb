import HandoffWire
import ZeroMQ

/// Sites joined below this broker (their brokers name it upstream; wire.proto, "Sites"): what they
/// follow, what they send up, and which of them each message goes down to. A message goes down to
/// each site that follows its topic except the one it came from, so it crosses each link between
/// sites at most once; one that came round a loop of links, or crossed too many, is dropped.
extension BrokerCore {
    /// What to do with a message a site's broker sent up.
    enum SiteVerdict: Equatable {
        /// Pass it on as a publisher's message would be (``PublisherVerdict``), with `hop` on the
        /// links it goes on from here.
        case forward(PublisherVerdict, hop: WireSiteHop)
        /// It came round a loop, or crossed too many links: dropped.
        case loop
    }

    /// A bus message (topic, envelope) a site below sent up with `hop`. The site's broker held it
    /// to its node's key; the connection it came on is a relay's.
    mutating func siteMessage(_ frames: [Frame], hop: WireSiteHop, now: ContinuousClock.Instant) -> SiteVerdict {
        guard !cameRound(hop) else {
            counted.messagesIn += 1
            counted.siteLoops += 1
            return .loop
        }
        let verdict = publisherMessage(frames, connectionKey: nil, fromSite: hop.via, now: now)
        if case .forward = verdict { counted.sitesIn += 1 }
        return .forward(verdict, hop: hop.onward(by: site))
    }

    /// A message from upstream, addressed to this site: `nil` when it came round a loop or crossed
    /// too many links (counted), else the hop to send it on to this broker's own sites with.
    mutating func hopFromUpstream(_ hop: WireSiteHop) -> WireSiteHop? {
        guard !cameRound(hop) else {
            counted.upstreamIn += 1
            counted.siteLoops += 1
            return nil
        }
        return hop.onward(by: site)
    }

    /// Whether a message came round a loop of links (its origin is this site) or crossed
    /// ``SiteName/maxHops`` of them.
    private func cameRound(_ hop: WireSiteHop) -> Bool {
        hop.origin == site.name || hop.hops >= SiteName.maxHops
    }

    /// The site topics (`L:` + site + `|` + topic) to send a message of `topic` down on: one for
    /// each site that follows it, other than `excluded` (the one it came from); counted.
    mutating func siteTopics(for topic: UnsafeRawBufferPointer, excluding excluded: String?) -> [[UInt8]] {
        guard !siteInterests.isEmpty else { return [] }
        let sites = siteInterests.sites(following: topic, excluding: excluded.map { Array($0.utf8) })
        counted.sitesOut += sites.count
        return sites.map { Topic.site($0, topic) }
    }

    /// The same, for a topic in a frame of its own.
    mutating func siteTopics(for topic: Frame, excluding excluded: String?) -> [[UInt8]] {
        topic.withUnsafeBytes { siteTopics(for: $0, excluding: excluded) }
    }

    /// What became of a subscriber's subscription to a site topic.
    enum SiteSubscription: Equatable {
        /// Not a site topic: the other rules take it.
        case notSite
        /// Taken (or withdrawn).
        case taken
        /// An unsubscription from another key than the name's owner's, or of a prefix the site
        /// does not hold: ignored (nothing goes on to the publishers or upstream).
        case ignored
        /// Not taken, past a bound or malformed: the site named, and why.
        case refused(site: String, SiteInterests.Refusal)
    }

    /// A subscriber's (un)subscription to a site topic (`L:` + site + `|` + prefix), the interest
    /// of a site joined below. `key`: the key the (un)subscription carried on a secure broker
    /// (none on an unsubscription libzmq made itself), and whether it is a relay's
    /// (``SiteInterests`` binds names to keys).
    mutating func siteSubscription(_ frame: Frame, key: [UInt8]?, relay: Bool) -> SiteSubscription {
        frame.withUnsafeBytes { bytes in
            guard let action = bytes.first, action == 0 || action == 1,
                  let (site, prefix) = Topic.splitSite(bytes.dropFirst()) else { return .notSite }
            guard action == 1 else {
                counted.unsubscriptions += 1
                return siteInterests.unsubscribe(site: Array(site), prefix: Array(prefix), key: key) ? .taken : .ignored
            }
            counted.subscriptions += 1
            let name = String(decoding: site, as: UTF8.self)
            let refusal = SiteName(name) == nil ? .invalidName : siteInterests.subscribe(site: Array(site), prefix: Array(prefix), key: key, relay: relay)
            guard let refusal else { return .taken }
            counted.siteInterestsRefused += 1
            return .refused(site: name, refusal)
        }
    }
}

extension BrokerCore {
    /// The site below whose broker asked on a snapshot topic (its token begins with the site's
    /// mark), or `nil`: a node's, or no site that follows anything here.
    func siteAsking(_ topic: [UInt8]) -> String? {
        let length = SiteName.snapshotTokenMarkLength
        guard !siteInterests.isEmpty, topic.count >= Topic.snapshotPrefixBytes.count + length else { return nil }
        let mark = String(decoding: topic.dropFirst(Topic.snapshotPrefixBytes.count).prefix(length), as: UTF8.self)
        return siteInterests.sites.first { SiteName.snapshotTokenMark(of: $0) == mark }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// A site's message on a connection that is no relay's (secure brokers): dropped as forged.
    mutating func siteMessageRefused() {
        counted.messagesIn += 1
        counted.forged += 1
    }
}
