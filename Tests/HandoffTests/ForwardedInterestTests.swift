import Testing
import ZeroMQ
@testable import Handoff

/// What a broker forwards of its subscribers' interest (ForwardedInterest): what a site's broker
/// follows upstream, and what a broker without its cache asks its publishers for; its bounds,
/// with no socket.
@Suite("What a broker forwards of its subscribers' interest, upstream and to its publishers (state, no sockets)")
struct ForwardedInterestTests {
    private static func frame(_ action: UInt8, _ topic: String) -> [UInt8] { [action] + Array(topic.utf8) }

    @Test("on a secure site broker one key brings at most 256 prefixes upstream (a relay's any number); a prefix already followed is another's to share; a withdrawn one frees its place; longer than any topic is never followed")
    func boundedPerKey() {
        var interest = ForwardedInterest(.upstream(SiteName("m")!))
        let (member, other, relay) = (Array("member".utf8), Array("other".utf8), Array("relay".utf8))
        for index in 0..<ForwardedInterest.maxPrefixesPerKey {
            #expect(interest.forward(Self.frame(1, "A:junk.\(index)"), key: member, relay: false) == .send(Self.frame(1, "L:m|A:junk.\(index)")))
        }
        #expect(interest.forward(Self.frame(1, "A:junk.more"), key: member, relay: false) == .refused)
        // Following what is followed already takes no place.
        #expect(interest.forward(Self.frame(1, "L:below|A:junk.0"), key: member, relay: false) == .nothing)
        // Another key, and a relay, are not held to the member's count.
        #expect(interest.forward(Self.frame(1, "A:org.real."), key: other, relay: false) == .send(Self.frame(1, "L:m|A:org.real.")))
        for index in 0..<(ForwardedInterest.maxPrefixesPerKey + 10) {
            #expect(interest.forward(Self.frame(1, "L:below|A:site.\(index)"), key: relay, relay: true) != .refused)
        }
        // The member's withdrawal (libzmq's, with no key) frees a place: once its last follower goes.
        #expect(interest.forward(Self.frame(0, "A:junk.0"), key: nil, relay: false) == .nothing)
        #expect(interest.forward(Self.frame(0, "L:below|A:junk.0"), key: nil, relay: false) == .send(Self.frame(0, "L:m|A:junk.0")))
        #expect(interest.forward(Self.frame(1, "A:junk.more"), key: member, relay: false) == .send(Self.frame(1, "L:m|A:junk.more")))
        // A withdrawal carrying a key that never subscribed to it (libzmq passes those up) is
        // ignored.
        #expect(interest.forward(Self.frame(0, "A:org.real."), key: member, relay: false) == .nothing)
        // A member that subscribed too, and withdrew twice (libzmq passes the second up), withdraws
        // only itself; the last key that subscribed withdraws it.
        #expect(interest.forward(Self.frame(1, "A:org.real."), key: member, relay: false) == .nothing)
        #expect(interest.forward(Self.frame(0, "A:org.real."), key: member, relay: false) == .nothing)
        #expect(interest.forward(Self.frame(0, "A:org.real."), key: member, relay: false) == .nothing)
        #expect(interest.forward(Self.frame(0, "A:org.real."), key: other, relay: false) == .send(Self.frame(0, "L:m|A:org.real.")))
        // Requests and snapshot topics, also under a lower site's name, are no interest.
        for topic in ["L:below|R:*token", "L:below|R:node-1", "L:below|S:x", "L:below|X:n/t/a", "R:*token", "S:x"] {
            #expect(interest.forward(Self.frame(1, topic), key: nil, relay: false) == .nothing, "\(topic)")
        }
        let long = "A:" + String(repeating: "x", count: SiteInterests.maxPrefixLength)
        #expect(interest.forward(Self.frame(1, long), key: nil, relay: false) == .refused)
        #expect(interest.prefixCount == ForwardedInterest.maxPrefixesPerKey + ForwardedInterest.maxPrefixesPerKey + 10)
    }

    @Test("a site's broker follows at most 10,000 prefixes upstream, what its upstream lets a site follow; past that it counts the refusal, and withdrawing the last follower of a prefix drops its snapshot request")
    func boundedPerSite() {
        var core = BrokerCore(
            cacheEnabled: true, cache: LastValueCache(capacity: 100, perOriginQuota: 100, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@m", name: "broker", host: "m", publicKey: nil).wire, upstreams: 1, site: SiteName("m")!)
        for index in 0..<ForwardedInterest.maxPrefixes {
            _ = core.interestUpstream(Frame(Self.frame(1, "A:t\(index).")), key: nil, relay: false)
        }
        let past = core.interestUpstream(Frame(Self.frame(1, "A:one.more.")), key: nil, relay: false)
        #expect(past == BrokerCore.InterestUpstream() && core.counters.upstreamInterestsRefused == 1)
        let withdrawn = core.interestUpstream(Frame(Self.frame(0, "A:t7.")), key: nil, relay: false)
        #expect(withdrawn.send == Self.frame(0, "L:m|A:t7.") && withdrawn.snapshotNoLongerOf == "t7.")
        let room = core.interestUpstream(Frame(Self.frame(1, "A:one.more.")), key: nil, relay: false)
        #expect(room.snapshotOf == "one.more.")
    }

    @Test("without the cache the publishers are asked once per prefix, whoever follows it, and told when libzmq passes the withdrawal of its only follower or its own (no key) as the last goes; a member's withdrawal of what others follow goes nowhere; a further subscriber to everything has the nodes advertise again at most every 10 s; past the bounds they are asked for everything, once")
    func publishersWithoutTheCache() {
        var core = BrokerCore(
            cacheEnabled: false, cache: LastValueCache(capacity: 10, perOriginQuota: 10, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker", name: "broker", host: "h", publicKey: nil).wire)
        let (alice, bob, carol, member) = (Array("alice".utf8), Array("bob".utf8), Array("carol".utf8), Array("member".utf8))
        let start = ContinuousClock.now
        func subscriber(_ action: UInt8, _ topic: String, _ key: [UInt8]?, at second: Int = 0) -> BrokerCore.SubscriberVerdict {
            core.subscriberMessage([Frame(Self.frame(action, topic))], key: key, relay: false, now: start + .seconds(second))
        }
        // Two followers of a prefix (XPUB, verbose, passes both): one subscription at the publishers.
        #expect(subscriber(1, "A:org.real.", alice) == .forwardToPublishers(Self.frame(1, "A:org.real.")))
        #expect(subscriber(1, "A:org.real.", bob) == .keep)
        // libzmq passes up a withdrawal from a member that never held the topic: it goes nowhere,
        // and the publishers go on sending what Alice and Bob follow.
        #expect(subscriber(0, "A:org.real.", member) == .keep)
        // Alice withdraws (libzmq passes nothing: Bob holds it), then Bob, the last (passed, with his
        // key): Alice's key is still counted, so the prefix stands at the publishers (the price of
        // the rule above) until libzmq's own withdrawal, as a later follower's connection goes.
        #expect(subscriber(0, "A:org.real.", bob) == .keep)
        #expect(subscriber(1, "A:org.real.", carol) == .keep)
        #expect(subscriber(0, "A:org.real.", nil) == .forwardToPublishers(Self.frame(0, "A:org.real.")))
        // A prefix with one follower goes with its withdrawal.
        #expect(subscriber(1, "A:org.one.", alice) == .forwardToPublishers(Self.frame(1, "A:org.one.")))
        #expect(subscriber(0, "A:org.one.", alice) == .forwardToPublishers(Self.frame(0, "A:org.one.")))
        // Everything: the first subscriber's goes on; a second's has the nodes advertise again, as a
        // request, once in 10 s.
        #expect(subscriber(1, "", alice) == .forwardToPublishers([1]))
        #expect(subscriber(1, "", bob, at: 5) == .keep)
        #expect(subscriber(1, "", carol, at: 10) == .passRequest(topic: []))
        #expect(subscriber(1, "", member, at: 11) == .keep)
        // Anything else a subscriber sends, and a prefix longer than any topic, go nowhere.
        #expect(core.subscriberMessage([Frame(Self.frame(1, "A:x")), Frame([1])], key: alice, relay: false, now: start) == .keep)
        #expect(subscriber(1, "A:" + String(repeating: "x", count: SiteInterests.maxPrefixLength), member) == .keep)
        // A site's longest prefix is forwarded: its length is the prefix's, not its site topic's.
        let longest = "A:" + String(repeating: "y", count: SiteInterests.maxPrefixLength - 2)
        #expect(core.forwardToPublishers(Self.frame(1, "L:site-b|" + longest), key: nil, relay: true, now: start) == .forwardToPublishers(Self.frame(1, longest)))
        // A member past its 256 prefixes: the publishers are asked for everything, once, and
        // nothing more is forwarded (all of it reaches the broker, as with the cache).
        for index in 0..<ForwardedInterest.maxPrefixesPerKey {
            #expect(subscriber(1, "A:junk.\(index)", member) == .forwardToPublishers(Self.frame(1, "A:junk.\(index)")))
        }
        #expect(subscriber(1, "A:junk.more", member) == .publishersSendEverything)
        #expect(core.publishersSendEverything)
        #expect(subscriber(1, "A:org.new.", alice) == .keep)
        #expect(subscriber(0, "A:junk.0", member) == .keep)
    }
}
