import Testing
import ZeroMQ
@testable import Handoff

/// What a site's broker follows upstream (UpstreamInterest) and its bounds, with no socket.
@Suite("Sites: what a site follows upstream (state, no sockets)")
struct UpstreamInterestTests {
    private static func frame(_ action: UInt8, _ topic: String) -> [UInt8] { [action] + Array(topic.utf8) }

    @Test("on a secure site broker one key brings at most 256 prefixes upstream (a relay's any number); a prefix already followed is another's to share; a withdrawn one frees its place; longer than any topic is never followed")
    func boundedPerKey() {
        var interest = UpstreamInterest(site: SiteName("m")!)
        let (member, other, relay) = (Array("member".utf8), Array("other".utf8), Array("relay".utf8))
        for index in 0..<UpstreamInterest.maxPrefixesPerKey {
            #expect(interest.upstream(for: Self.frame(1, "A:junk.\(index)"), key: member, relay: false) == .send(Self.frame(1, "L:m|A:junk.\(index)")))
        }
        #expect(interest.upstream(for: Self.frame(1, "A:junk.more"), key: member, relay: false) == .refused)
        // Following what is followed already takes no place.
        #expect(interest.upstream(for: Self.frame(1, "L:below|A:junk.0"), key: member, relay: false) == .nothing)
        // Another key, and a relay, are not held to the member's count.
        #expect(interest.upstream(for: Self.frame(1, "A:org.real."), key: other, relay: false) == .send(Self.frame(1, "L:m|A:org.real.")))
        for index in 0..<(UpstreamInterest.maxPrefixesPerKey + 10) {
            #expect(interest.upstream(for: Self.frame(1, "L:below|A:site.\(index)"), key: relay, relay: true) != .refused)
        }
        // The member's withdrawal (libzmq's, with no key) frees a place: once its last follower goes.
        #expect(interest.upstream(for: Self.frame(0, "A:junk.0"), key: nil, relay: false) == .nothing)
        #expect(interest.upstream(for: Self.frame(0, "L:below|A:junk.0"), key: nil, relay: false) == .send(Self.frame(0, "L:m|A:junk.0")))
        #expect(interest.upstream(for: Self.frame(1, "A:junk.more"), key: member, relay: false) == .send(Self.frame(1, "L:m|A:junk.more")))
        // A withdrawal carrying a key that never subscribed to it (libzmq passes those up) is
        // ignored.
        #expect(interest.upstream(for: Self.frame(0, "A:org.real."), key: member, relay: false) == .nothing)
        // A member that subscribed too, and withdrew twice (libzmq passes the second up), withdraws
        // only itself; the last key that subscribed withdraws it.
        #expect(interest.upstream(for: Self.frame(1, "A:org.real."), key: member, relay: false) == .nothing)
        #expect(interest.upstream(for: Self.frame(0, "A:org.real."), key: member, relay: false) == .nothing)
        #expect(interest.upstream(for: Self.frame(0, "A:org.real."), key: member, relay: false) == .nothing)
        #expect(interest.upstream(for: Self.frame(0, "A:org.real."), key: other, relay: false) == .send(Self.frame(0, "L:m|A:org.real.")))
        // Requests and snapshot topics, also under a lower site's name, are no interest.
        for topic in ["L:below|R:*token", "L:below|R:node-1", "L:below|S:x", "L:below|X:n/t/a", "R:*token", "S:x"] {
            #expect(interest.upstream(for: Self.frame(1, topic), key: nil, relay: false) == .nothing, "\(topic)")
        }
        let long = "A:" + String(repeating: "x", count: SiteInterests.maxPrefixLength)
        #expect(interest.upstream(for: Self.frame(1, long), key: nil, relay: false) == .refused)
        #expect(interest.prefixCount == UpstreamInterest.maxPrefixesPerKey + UpstreamInterest.maxPrefixesPerKey + 10)
    }

    @Test("a site's broker follows at most 10,000 prefixes upstream, what its upstream lets a site follow; past that it counts the refusal, and withdrawing the last follower of a prefix drops its snapshot request")
    func boundedPerSite() {
        var core = BrokerCore(
            cacheEnabled: true, cache: LastValueCache(capacity: 100, perOriginQuota: 100, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@m", name: "broker", host: "m", publicKey: nil).wire, upstreams: 1, site: SiteName("m")!)
        for index in 0..<UpstreamInterest.maxPrefixes {
            _ = core.interestUpstream(Frame(Self.frame(1, "A:t\(index).")), key: nil, relay: false)
        }
        let past = core.interestUpstream(Frame(Self.frame(1, "A:one.more.")), key: nil, relay: false)
        #expect(past == BrokerCore.InterestUpstream() && core.counters.upstreamInterestsRefused == 1)
        let withdrawn = core.interestUpstream(Frame(Self.frame(0, "A:t7.")), key: nil, relay: false)
        #expect(withdrawn.send == Self.frame(0, "L:m|A:t7.") && withdrawn.snapshotNoLongerOf == "t7.")
        let room = core.interestUpstream(Frame(Self.frame(1, "A:one.more.")), key: nil, relay: false)
        #expect(room.snapshotOf == "one.more.")
    }
}
