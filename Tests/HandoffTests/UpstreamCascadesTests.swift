import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff

/// How a subscribe-all from above crosses sites (``UpstreamCascades``, wire.proto "R:*"), on the
/// brokers' machines with no socket and no clock: each link that comes up above a site reaches its
/// nodes, however close together links heal, and none goes round a loop.
@Suite("Sites: subscribe-alls passed down as tokens (state, no sockets)")
struct UpstreamCascadesTests {
    private static let start = ContinuousClock.now
    private static func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    private static func core(site: String) -> BrokerCore {
        BrokerCore(
            cacheEnabled: true,
            cache: LastValueCache(capacity: 100, perOriginQuota: 100, defaultLease: .seconds(30)),
            sender: NodeInfo(id: "broker@\(site)", name: "broker", host: site, publicKey: nil).wire,
            upstreams: 1, site: SiteName(site)!)
    }

    /// Tokens t1, t2… in order.
    private final class Tokens {
        var made = 0
        func next() -> String {
            made += 1
            return "t\(made)"
        }
    }

    private static func token(_ name: String) -> [UInt8] { Array((Topic.readvertiseAllPrefix + name).utf8) }

    @Test("an upstream's subscribe-all goes on as a fresh token, subscribed and withdrawn at once; its withdrawal (the link dropped) goes nowhere")
    func subscribeAllBecomesToken() {
        var cascades = UpstreamCascades()
        let tokens = Tokens()
        #expect(cascades.publishing([1], now: Self.at(0), token: tokens.next) == [[1] + Self.token("t1"), [0] + Self.token("t1")])
        #expect(cascades.publishing([0], now: Self.at(10), token: tokens.next).isEmpty,
                "passed on, it would take the broker's own subscribe-all from its publishers")
        #expect(cascades.publishing([1], now: Self.at(20), token: tokens.next) == [[1] + Self.token("t2"), [0] + Self.token("t2")])
        let request = Array("R:node-7".utf8)
        #expect(cascades.publishing([1] + request, now: Self.at(30), token: tokens.next) == [[1] + request, [0] + request],
                "anything else goes as it is, subscribed and withdrawn")
        #expect(cascades.publishing([0] + request, now: Self.at(31), token: tokens.next).isEmpty)
    }

    @Test("a request from above held back by the gate and passed when its second ends leaves nothing subscribed at the site's publishers (its withdrawal had passed before it)")
    func heldRequestLeavesNothingSubscribed() {
        var core = Self.core(site: "site")
        let tokens = Tokens()
        // The site broker's XSUB: its own subscribe-all, then each frame passed to its publishers.
        var frontend = XSUBSubscriptions([""])
        let request = Array("R:node-7".utf8)
        func upstreamAsks(at time: Int) {
            for frame in [[1] + request, [0] + request] {
                for passed in core.upstreamSubscription(Frame(frame), now: Self.at(time), token: tokens.next) { _ = frontend.passes(passed) }
            }
        }
        upstreamAsks(at: 0)
        upstreamAsks(at: 400)
        let trailing = core.dueUpstreamSubscriptions(now: Self.at(1_000), token: tokens.next)
        #expect(trailing.first == [1] + request, "the repeat passes once its second ends")
        for passed in trailing { _ = frontend.passes(passed) }
        #expect(frontend.topics == [""], "left subscribed, every publisher that connects later would be asked again")
        // The link drops: the upstream's XPUB withdraws its subscribe-all, which must not take the broker's own.
        for passed in core.upstreamSubscription(Frame([1]), now: Self.at(2_000), token: tokens.next) { _ = frontend.passes(passed) }
        for passed in core.upstreamSubscription(Frame([0]), now: Self.at(2_100), token: tokens.next) { _ = frontend.passes(passed) }
        #expect(frontend.topics == [""])
    }

    @Test("a token from above passes once, subscribed and withdrawn; heard again (round a loop) it ends; its withdrawal goes nowhere; one too long is no broker's")
    func tokenPassesOnce() {
        var cascades = UpstreamCascades()
        let tokens = Tokens()
        let heard = [1] + Self.token("abc")
        #expect(cascades.publishing(heard, now: Self.at(0), token: tokens.next) == [heard, [0] + Self.token("abc")])
        #expect(cascades.publishing([0] + Self.token("abc"), now: Self.at(1), token: tokens.next).isEmpty)
        #expect(cascades.publishing(heard, now: Self.at(500), token: tokens.next).isEmpty)
        #expect(cascades.publishing(heard, now: Self.at(50_000), token: tokens.next).isEmpty, "remembered a minute")
        let long = [1] + Self.token(String(repeating: "f", count: UpstreamCascades.maxTokenLength + 1))
        #expect(cascades.publishing(long, now: Self.at(0), token: tokens.next).isEmpty)
        #expect(tokens.made == 0, "no token of its own made for one passed on")
    }

    @Test("links that heal one after another above a site, three within two seconds, each reach the site's publishers (a plain subscribe-all passed on lost the third as a loop's echo)")
    func chainedHealsEachReachTheSite() {
        // top ← middle ← low. The low site's link heals, then the middle's twice, 0.4 s and 1.1 s later.
        var middle = Self.core(site: "middle"), low = Self.core(site: "low")
        let tokens = Tokens()
        var reachedLow: [[UInt8]] = []
        func lowHears(_ frame: [UInt8], at time: Int) {
            reachedLow += low.upstreamSubscription(Frame(frame), now: Self.at(time), token: tokens.next).filter(UpstreamCascades.isSubscribeAll)
        }
        func middleLinkHeals(at time: Int) {
            var passed = middle.upstreamLinkConnected(now: Self.at(time), token: tokens.next)
            passed += middle.upstreamSubscription(Frame([1]), now: Self.at(time + 5), token: tokens.next)
            for frame in passed { lowHears(frame, at: time + 10) }
        }
        _ = low.upstreamLinkConnected(now: Self.at(0), token: tokens.next)
        lowHears([1], at: 5)
        middleLinkHeals(at: 400)
        middleLinkHeals(at: 1_100)
        #expect(reachedLow.count == 3, "\(reachedLow.map { String(decoding: $0.dropFirst(), as: UTF8.self) })")
        #expect(Set(reachedLow).count == 3)
    }

    @Test("links misconfigured into a loop of two or three brokers: a subscribe-all goes round once and ends")
    func loopEnds() {
        for count in [2, 3] {
            var brokers = (0..<count).map { Self.core(site: "s\($0)") }
            let tokens = Tokens()
            // Broker i's upstream is broker i+1: what i passes to its publishers reaches i-1's up socket.
            var inFlight: [(to: Int, frame: [UInt8])] = []
            var passes = 0
            _ = brokers[0].upstreamLinkConnected(now: Self.at(0), token: tokens.next)
            inFlight.append((0, [1]))
            var time = 1
            while let (to, frame) = inFlight.first, passes < 100 {
                inFlight.removeFirst()
                time += 7
                for passed in brokers[to].upstreamSubscription(Frame(frame), now: Self.at(time), token: tokens.next) {
                    passes += 1
                    inFlight.append(((to + count - 1) % count, passed))
                }
            }
            #expect(passes == 2 * count, "a ring of \(count): \(passes) frames passed")
            #expect(tokens.made == 1)
        }
    }

    @Test("a node advertises every current activity again on a token, each time, as on a subscribe-all (a broker's request for it alone, at most once a second)")
    func nodeReadvertisesOnToken() throws {
        var origin = WireNodeRef()
        origin.nodeID = "origin-1"
        var advertiser = Advertiser(
            Advertiser.Settings(origin: origin, continueEndpoint: "tcp://10.0.0.1:7000", lease: .seconds(6), teamID: nil,
                                advertiseInterval: .seconds(2), refreshInterval: .seconds(25)), now: Self.start)
        let activity = try UserActivity(activityType: "org.handoff.test.edit")
        activity.title = "a title"
        _ = advertiser.add(activity)
        let bus = Advertiser.Bus.brokered(readvertiseTopic: Array("R:origin-1".utf8))
        func advertised(_ topic: [UInt8], at time: Int) -> Int {
            advertiser.subscribed(to: topic[...], bus: bus, now: Self.at(time)).messages.count { if case .advertisement = $0.body { true } else { false } }
        }
        #expect(advertised(Self.token("t1"), at: 100) == 1)
        #expect(advertised(Self.token("t2"), at: 200) == 1, "a second heal above the site, 0.1 s later")
        #expect(advertised(Array("R:origin-1".utf8), at: 300) == 0, "a broker's request, within a second of advertising all")
        #expect(advertised(Array("R:origin-1".utf8), at: 1_300) == 1)
        #expect(advertised(Array("R:origin-1".utf8), at: 1_400) == 0, "and within a second of its last")
    }

    @Test("a subscriber cannot send a token: a caching broker keeps it from its publishers, and no site passes it up")
    func subscribersCannotSendTokens() {
        var core = Self.core(site: "site")
        #expect(core.subscriberMessage([Frame([1] + Self.token("forged"))], key: nil, relay: false, now: .now) == .keep)
        #expect(core.subscriberMessage([Frame([1] + Array("R:node-1".utf8))], key: nil, relay: false, now: .now) == .passRequest(topic: Array("R:node-1".utf8)))
        #expect(core.interestUpstream(Frame([1] + Self.token("forged")), key: nil, relay: false).send == nil)
        // A request is no interest: it goes up as a request (passed and withdrawn at once).
        #expect(core.interestUpstream(Frame([1] + Array("R:node-1".utf8)), key: nil, relay: false).send == nil)
    }
}
