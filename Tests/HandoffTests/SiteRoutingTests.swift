import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff

/// The rules of sites (wire.proto, "Sites") on the broker's machine, with no socket and no clock:
/// what a site follows, where each message goes down, what is dropped as a loop, what goes up.
/// (SitesTests run them through real brokers.)
@Suite("Sites: routing between brokers (state, no sockets)")
struct SiteRoutingTests {
    private static let now = ContinuousClock.now

    private static func core(site: String, upstreams: Int = 0) -> BrokerCore {
        BrokerCore(
            cacheEnabled: true,
            cache: LastValueCache(capacity: 100, perOriginQuota: 100, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@\(site)", name: "broker", host: site, publicKey: nil).wire,
            upstreams: upstreams, site: SiteName(site)!)
    }

    private static func subscription(_ action: UInt8, _ topic: String) -> Frame { Frame([action] + Array(topic.utf8)) }

    @Test("a message goes down to each site that follows its topic, except the one it came from")
    func downToFollowersButNotBack() {
        var hub = Self.core(site: "hub")
        for (site, prefix) in [("a", "A:org."), ("b", "A:org.test."), ("c", "A:com."), ("a", "P:")] {
            let taken = hub.siteSubscription(Self.subscription(1, "L:\(site)|\(prefix)"), key: nil, relay: false)
            #expect(taken == .taken)
        }
        let frames = BrokerCoreTests.advertisement("x1", from: "n1")
        let fromA = WireSiteHop(hops: 1, origin: "a", via: SiteName("a")!)
        let fromSite = hub.siteMessage(frames, hop: fromA, now: Self.now)
        guard case .forward(let verdict, let onward) = fromSite else {
            Issue.record("a site's message was not forwarded")
            return
        }
        #expect(verdict == .forward(askToReadvertise: nil))
        #expect(onward.hops == 2 && onward.origin == "a" && onward.via == "hub")
        // Site a follows the type too, but the message came from there; c follows something else.
        let toOthers = hub.siteTopics(for: frames[0], excluding: "a")
        #expect(toOthers == [Array("L:b|A:org.test.type".utf8)])
        // A message of the hub's own publishers goes to both.
        let toAll = hub.siteTopics(for: frames[0], excluding: nil)
        #expect(Set(toAll) == [Array("L:a|A:org.test.type".utf8), Array("L:b|A:org.test.type".utf8)])
        #expect(hub.counters.sitesIn == 1 && hub.counters.sitesOut == 3 && hub.counters.cachedActivities == 1)
        // The last subscription of b gone (libzmq reports it once): b hears nothing more.
        let gone = hub.siteSubscription(Self.subscription(0, "L:b|A:org.test."), key: nil, relay: false)
        let afterwards = hub.siteTopics(for: frames[0], excluding: "a")
        #expect(gone == .taken && afterwards.isEmpty)
        // Not a site topic: left to the other rules.
        let plain = hub.siteSubscription(Self.subscription(1, "A:org."), key: nil, relay: false)
        #expect(plain == .notSite)
    }

    @Test("a site's interest past the bounds (1,000 sites, 10,000 prefixes each) or under no valid name is refused, counted, and logged once per site")
    func siteInterestsBounded() {
        var hub = Self.core(site: "hub")
        var log = BrokerRefusalLog()
        for index in 0..<SiteInterests.maxPrefixesPerSite {
            let taken = hub.siteSubscription(Self.subscription(1, "L:a|A:org.t\(index)."), key: nil, relay: false)
            #expect(taken == .taken)
        }
        // The same prefix again is no new one; another is one too many.
        let again = hub.siteSubscription(Self.subscription(1, "L:a|A:org.t0."), key: nil, relay: false)
        let oneTooMany = hub.siteSubscription(Self.subscription(1, "L:a|A:org.more."), key: nil, relay: false)
        #expect(again == .taken)
        #expect(oneTooMany == .refused(site: "a", .tooManyPrefixes))
        for index in 1..<SiteInterests.maxSites {
            let taken = hub.siteSubscription(Self.subscription(1, "L:s\(index)|A:org."), key: nil, relay: false)
            #expect(taken == .taken)
        }
        let siteTooMany = hub.siteSubscription(Self.subscription(1, "L:late|A:org."), key: nil, relay: false)
        #expect(siteTooMany == .refused(site: "late", .tooManySites))
        let badName = hub.siteSubscription(Self.subscription(1, "L:no site|A:org."), key: nil, relay: false)
        #expect(badName == .refused(site: "no site", .invalidName))
        #expect(hub.counters.siteInterestsRefused == 3)
        // Logged once per site, however often it asks.
        let first = log.siteInterest(site: "late", .tooManySites)
        let second = log.siteInterest(site: "late", .tooManySites)
        #expect(first?.contains("1000 sites follow topics here already") == true, "\(first ?? "")")
        #expect(second == nil)
    }

    @Test("a site's broker asks upstream with a token that names its site, and gets the other sites' activities without its own; a node's snapshot has them all")
    func siteSnapshotWithoutItsOwn() {
        var hub = Self.core(site: "hub")
        for site in ["a", "b"] { _ = hub.siteSubscription(Self.subscription(1, "L:\(site)|A:org."), key: nil, relay: false) }
        _ = hub.siteMessage(BrokerCoreTests.advertisement("from-a", from: "na"), hop: WireSiteHop(hops: 1, origin: "a", via: SiteName("a")!), now: Self.now)
        _ = hub.siteMessage(BrokerCoreTests.advertisement("from-b", from: "nb"), hop: WireSiteHop(hops: 1, origin: "b", via: SiteName("b")!), now: Self.now)
        #expect(hub.publisherMessage(BrokerCoreTests.advertisement("at-hub", from: "nh"), connectionKey: nil, now: Self.now) == .forward(askToReadvertise: nil))
        // The mark is FNV-1a: the same in every process and build (16 of the token's 32 digits).
        #expect(SiteName("a")!.snapshotTokenMark == "af63dc4c8601ec8c")
        let tokenOfA = SiteName("a")!.snapshotToken()
        #expect(tokenOfA.count == Topic.snapshotTokenLength && tokenOfA.hasPrefix("af63dc4c8601ec8c"))
        let askedByA = Array(Topic.snapshot(token: tokenOfA, typePrefix: "org.").utf8)
        #expect(Topic.snapshotTypePrefix(askedByA) == "org.")
        #expect(hub.siteAsking(askedByA) == "a")
        func ids(_ envelopes: [[UInt8]]) -> Set<String> {
            Set(envelopes.compactMap { bytes in
                guard case .advertisement(let advertisement)? = try? WireEnvelope.decode(Data(bytes)).body else { return nil }
                return advertisement.activityID
            })
        }
        #expect(ids(hub.snapshot(typePrefix: "org.", topic: askedByA, now: Self.now)) == ["from-b", "at-hub"])
        let askedByNode = Array(Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.").utf8)
        #expect(hub.siteAsking(askedByNode) == nil)
        #expect(ids(hub.snapshot(typePrefix: "org.", topic: askedByNode, now: Self.now)) == ["from-a", "from-b", "at-hub"])
        // Two levels: what site c (below a) sent up came through a: a's snapshot leaves it out too.
        _ = hub.siteMessage(BrokerCoreTests.advertisement("from-c", from: "nc"), hop: WireSiteHop(hops: 2, origin: "c", via: SiteName("a")!), now: Self.now)
        #expect(ids(hub.snapshot(typePrefix: "org.", topic: askedByA, now: Self.now)) == ["from-b", "at-hub"])
    }

    @Test("a message whose origin is this site, or that crossed 8 links, is dropped as a loop")
    func loopsAndHopLimitDropped() {
        var broker = Self.core(site: "x")
        let frames = BrokerCoreTests.advertisement("x1", from: "n1")
        let cameRound = broker.siteMessage(frames, hop: WireSiteHop(hops: 2, origin: "x", via: SiteName("y")!), now: Self.now)
        let tooFar = broker.siteMessage(frames, hop: WireSiteHop(hops: 8, origin: "w", via: SiteName("y")!), now: Self.now)
        let downRound = broker.hopFromUpstream(WireSiteHop(hops: 1, origin: "x", via: SiteName("y")!))
        let downLast = broker.hopFromUpstream(WireSiteHop(hops: 7, origin: "w", via: SiteName("y")!))
        #expect(cameRound == .loop && tooFar == .loop && downRound == nil)
        #expect(downLast?.hops == 8 && downLast?.via == "x")
        #expect(broker.counters.siteLoops == 3 && broker.counters.cachedActivities == 0)
    }

    @Test("nodes may not publish on a site topic: only brokers send on it")
    func siteTopicForgedFromPublisher() {
        var broker = Self.core(site: "x")
        let frames = BrokerCoreTests.advertisement("x1", from: "n1")
        let onSiteTopic = [Frame(Array("L:x|A:org.test.type".utf8)), frames[1]]
        let verdict = broker.publisherMessage(onSiteTopic, connectionKey: nil, now: Self.now)
        guard case .forged = verdict else {
            Issue.record("a publisher's message on a site topic was not refused")
            return
        }
        #expect(broker.counters.forged == 1 && broker.counters.cachedActivities == 0)
    }

    @Test("interest goes upstream once per prefix, a lower site's as this site's own, and is withdrawn with its last follower")
    func interestUpstreamOncePerPrefix() {
        var broker = Self.core(site: "m", upstreams: 1)
        func up(_ action: UInt8, _ topic: String) -> String? {
            broker.interestUpstream(Self.subscription(action, topic), key: nil, relay: false).send.map { String(decoding: $0.dropFirst(), as: UTF8.self) }
        }
        #expect(up(1, "A:org.") == "L:m|A:org.")
        // A second follower of the prefix (a lower site's): nothing more goes up.
        #expect(up(1, "L:a|A:org.") == nil)
        let firstOfCom = broker.interestUpstream(Self.subscription(1, "A:com."), key: nil, relay: false)
        #expect(firstOfCom.snapshotOf == "com.")
        #expect(up(0, "A:org.") == nil)
        #expect(up(0, "L:a|A:org.") == "L:m|A:org.")
        // Snapshot requests stay here; re-advertising and trace requests are no interest (they go
        // up as requests, ``PublisherRequests``).
        #expect(up(1, "S:0123/org.") == nil)
        #expect(up(1, "R:node-1") == nil)
        #expect(up(0, "A:never-followed.") == nil)
    }

    @Test("with a pair upstream, the second copy of an advertisement is dropped (a newer version passes), and of a presence")
    func pairSecondCopyDropped() {
        var site = Self.core(site: "c", upstreams: 2)
        let first = BrokerCoreTests.advertisement("x1", from: "n1", version: 1)
        let once = site.upstreamMessage(first, now: Self.now)
        let twice = site.upstreamMessage(first, now: Self.now)
        let newer = site.upstreamMessage(BrokerCoreTests.advertisement("x1", from: "n1", version: 2), now: Self.now)
        #expect(once == .forward(askToReadvertise: nil) && twice == .drop && newer == .forward(askToReadvertise: nil))
        #expect(site.counters.upstreamDuplicates == 1 && site.counters.upstreamIn == 3)
        // A presence: the same bytes twice are one; the node's next presence is news.
        let presence = BrokerCoreTests.presence(of: "n1", listing: ["x1"])
        let presenceOnce = site.upstreamMessage(presence, now: Self.now)
        let presenceTwice = site.upstreamMessage(presence, now: Self.now + .milliseconds(1))
        #expect(presenceOnce != .drop && presenceTwice == .drop && site.counters.upstreamDuplicates == 2)
        // Only under a pair: one upstream's repeats are its own to send.
        var single = Self.core(site: "d", upstreams: 1)
        let singleFirst = single.upstreamMessage(presence, now: Self.now)
        let singleSecond = single.upstreamMessage(presence, now: Self.now)
        #expect(singleFirst != .drop && singleSecond != .drop)
    }

    @Test("site names: 1 to 64 letters, digits, '.', '_', '-'; a site topic splits at its first bar")
    func siteNamesAndTopics() {
        #expect(SiteName("lab-1.east_2") != nil)
        #expect(SiteName("") == nil && SiteName("a|b") == nil && SiteName(String(repeating: "a", count: 65)) == nil && SiteName("ü") == nil)
        #expect(SiteName.random().name.hasPrefix("site-"))
        let split = Topic.splitSite(Array("L:lab|A:x|y".utf8))
        #expect(split.map { Array($0.site) } == Array("lab".utf8) && split.map { Array($0.topic) } == Array("A:x|y".utf8))
        #expect(Topic.splitSite(Array("A:x".utf8)) == nil && Topic.splitSite(Array("L:nobar".utf8)) == nil)
        let hop = WireSiteHop(hops: 3, origin: "a", via: SiteName("b")!)
        #expect(WireSiteHop(frame: hop.frame) == hop)
        #expect(WireSiteHop(frame: Frame([0xff, 0xff])) == nil)
    }

    @Test("rule: an upstream's snapshot answer of the version a site's cache holds is no news to the site's subscribers, but renews the copy's lease (the answer to a link that came back repairs a copy that ran down while it was away); an older one renews nothing")
    func upstreamSnapshotRenewsTheVersionHeld() {
        var site = Self.core(site: "a", upstreams: 1)
        let held = BrokerCoreTests.advertisement("x1", from: "n1", version: 2, leaseMs: 6_000)[1]
        let older = BrokerCoreTests.advertisement("x1", from: "n1", version: 1, leaseMs: 6_000)[1]
        let prefix = Array("A:org.".utf8)
        do { let live = site.upstreamSnapshotAdvertisement(held, type: "org.test.type", now: Self.now); #expect(live == Array("A:org.test.type".utf8), "news: passed on") }
        // Five seconds on, the link back: the same version again, and an older one after it.
        do { let live = site.upstreamSnapshotAdvertisement(held, type: "org.test.type", now: Self.now + .seconds(5)); #expect(live == nil, "no news") }
        do { let live = site.upstreamSnapshotAdvertisement(older, type: "org.test.type", now: Self.now + .seconds(5.5)); #expect(live == nil) }
        // Past the first lease, within the renewed one (from 5 s): still answered from the cache.
        _ = site.expire(now: Self.now + .seconds(8))
        #expect(site.cache.live(matching: prefix, now: Self.now + .seconds(8)).count == 1)
        #expect(site.cache.version(of: "x1") == 2)
        // Past the renewed lease (the older copy renewed nothing): gone.
        _ = site.expire(now: Self.now + .seconds(11.5))
        #expect(site.cache.live(matching: prefix, now: Self.now + .seconds(11.5)).isEmpty)
    }
}

