import Testing
@testable import Handoff

/// A broker's requests that an origin advertise again (ReadvertiseRequests), against a member
/// whose presences list made-up activities under made-up node ids: with no socket, times passed in.
@Suite("Broker: re-advertising requests held back for keys whose origins never answer")
struct ReadvertiseHoldBackTests {
    private static let start = ContinuousClock.now

    /// A minute of presences of fresh made-up origins under `key`, ten a second; each origin
    /// asked is `answering` (its next presence lacks nothing) or never heard of again. Returns
    /// the origins asked and the times everyone was.
    private static func aMinuteOfMadeUpOrigins(_ requests: inout ReadvertiseRequests, key: [UInt8], answering: Bool) -> (origins: Int, everyone: Int) {
        var origins = 0, everyone = 0
        for tick in 0..<600 {
            let origin = "made-up-\(tick)"
            switch requests.decide(origin, key: key, now: start + .milliseconds(tick * 100), everyoneAllowed: true) {
            case .origin:
                origins += 1
                if answering { requests.satisfied(origin) }
            case .everyone: everyone += 1
            case .none: break
            }
        }
        return (origins, everyone)
    }

    @Test("a key whose asked origins never answer is held back (2 s, doubling to 5 min, a step a second at most): a minute of fresh made-up origins ten a second asks 20 (four at a time) and never everyone, not 480 and six times")
    func liarHeldBack() {
        var requests = ReadvertiseRequests()
        let liar = Array("liar-key".utf8)
        let (origins, everyone) = Self.aMinuteOfMadeUpOrigins(&requests, key: liar, answering: false)
        #expect(origins <= 24 && everyone == 0, "\(origins) origins asked, everyone \(everyone) times")
        #expect(requests.isHeldBack(liar, now: Self.start + .seconds(60)))
        // Another key's origin is asked as before.
        let honest = requests.decide("n1", key: Array("honest".utf8), now: Self.start + .seconds(60), everyoneAllowed: true)
        #expect(honest == .origin)
    }

    @Test("a key with four origins asked and awaited asks for no more until one answers or is judged: five seconds of fresh made-up origins ten a second ask four, not forty; another key is asked as before")
    func awaitedOriginsPerKeyBounded() {
        var requests = ReadvertiseRequests()
        let liar = Array("liar-key".utf8)
        var asked: [String] = []
        for tick in 0..<50 {
            let origin = "made-up-\(tick)"
            if requests.decide(origin, key: liar, now: Self.start + .milliseconds(tick * 100), everyoneAllowed: true) == .origin { asked.append(origin) }
        }
        #expect(asked.count == ReadvertiseRequests.maxAwaitedPerKey, "\(asked)")
        // One of them answers (its presence lacks nothing): the key may have one more asked.
        requests.satisfied(asked[0])
        #expect(requests.decide("made-up-50", key: liar, now: Self.start + .milliseconds(4_950), everyoneAllowed: true) == .origin)
        #expect(requests.decide("made-up-51", key: liar, now: Self.start + .milliseconds(4_960), everyoneAllowed: true) == .none)
        #expect(requests.decide("n1", key: Array("honest".utf8), now: Self.start + .milliseconds(4_970), everyoneAllowed: true) == .origin)
    }

    @Test("a key forgiven each time (a member that advertises a real activity under each made-up origin and lists it alone next) has four origins asked at once, then one a second: a minute of it ten a second asks about 64, not 480, and never everyone (six times before); an honest key is asked meanwhile")
    func forgivenLiarRated() {
        var requests = ReadvertiseRequests()
        let liar = Array("liar-key".utf8)
        let (origins, everyone) = Self.aMinuteOfMadeUpOrigins(&requests, key: liar, answering: true)
        #expect(origins <= 66 && everyone == 0, "\(origins) origins asked, everyone \(everyone) times")
        #expect(!requests.isHeldBack(liar, now: Self.start + .seconds(60)), "forgiven each time")
        #expect(requests.decide("n1", key: Array("honest".utf8), now: Self.start + .seconds(60), everyoneAllowed: true) == .origin)
    }

    @Test("an origin whose presence lacks nothing after it was asked keeps its key in good standing; one that never sends one (it died) holds its key back 2 s, once however many such there were at once; an asked origin's presence lacking nothing forgives it; a hold wears off")
    func answeredOriginsKeepTheirKey() {
        var requests = ReadvertiseRequests()
        let key = Array("fleet-key".utf8)
        for second in 0..<30 {
            let now = Self.start + .seconds(second)
            #expect(requests.decide("n\(second)", key: key, now: now, everyoneAllowed: true) == .origin)
            requests.satisfied("n\(second)")
        }
        #expect(!requests.isHeldBack(key, now: Self.start + .seconds(40)))
        // Three that never answer, asked at once: its key waits 2 s after the 5 s they had.
        for dead in ["dead-1", "dead-2", "dead-3"] {
            #expect(requests.decide(dead, key: key, now: Self.start + .seconds(40), everyoneAllowed: true) == .origin)
        }
        #expect(requests.decide("n-other", key: key, now: Self.start + .seconds(45), everyoneAllowed: true) == .none)
        #expect(requests.isHeldBack(key, now: Self.start + .milliseconds(46_900)))
        #expect(!requests.isHeldBack(key, now: Self.start + .seconds(47)), "one step for the three, not three")
        #expect(requests.decide("n-other", key: key, now: Self.start + .seconds(47), everyoneAllowed: true) == .origin)
        // n-other's presence lacks nothing: the key is forgiven, and the next one that never
        // answers (dead-4) holds it back 2 s again, not 4.
        #expect(requests.decide("dead-4", key: key, now: Self.start + .seconds(47), everyoneAllowed: true) == .origin)
        requests.satisfied("n-other")
        #expect(requests.decide("n-late", key: key, now: Self.start + .seconds(53), everyoneAllowed: true) == .none)
        #expect(requests.isHeldBack(key, now: Self.start + .milliseconds(54_900)) && !requests.isHeldBack(key, now: Self.start + .milliseconds(55_100)))
        // A key held long ago starts again from 2 s.
        var worn = ReadvertiseRequests()
        for round in 0..<8 {
            let at = Self.start + .seconds(round * 400)
            _ = worn.decide("gone-\(round)", key: key, now: at, everyoneAllowed: true)
            _ = worn.decide("probe-\(round)", key: key, now: at + .seconds(5), everyoneAllowed: true)
            #expect(worn.isHeldBack(key, now: at + .seconds(6)) && !worn.isHeldBack(key, now: at + .seconds(7) + .milliseconds(1)), "round \(round)")
        }
        // An open broker (no key) holds nothing back.
        var open = ReadvertiseRequests()
        for tick in 0..<100 { _ = open.decide("made-up-\(tick)", now: Self.start + .milliseconds(tick * 100), everyoneAllowed: true) }
        #expect(open.decide("n1", now: Self.start + .seconds(20), everyoneAllowed: true) == .origin)
    }

    @Test("a copy the cache let lapse, listed again by its origin, asks whatever its key's hold, once per lapse (a site that never takes some of an origin's types holds its key back for good)")
    func lapsedCopyAsksDespiteHold() {
        var requests = ReadvertiseRequests()
        let key = Array("site-1 node".utf8)
        // Each ask lacks for good (types this site does not follow): the key is held back.
        #expect(requests.decide("n1", key: key, now: Self.start, everyoneAllowed: false) == .origin)
        let judged = Self.start + ReadvertiseRequests.answerWait
        #expect(requests.decide("n1", key: key, now: judged, everyoneAllowed: false) == .none)
        #expect(requests.isHeldBack(key, now: judged + .seconds(1)))
        // A copy of a type it follows lapses (the site's link was down).
        requests.lapsed("a17-n1", origin: "n1", now: judged + .milliseconds(500))
        #expect(requests.lapsedCopies(of: "n1") == ["a17-n1"])
        #expect(requests.decide("n1", key: key, now: judged + .seconds(1), everyoneAllowed: false, relapsed: true) == .origin)
        // Asked once: spent; the hold stands for the rest.
        #expect(requests.lapsedCopies(of: "n1") == nil && requests.lapsedCopiesCount == 0)
        #expect(requests.isHeldBack(key, now: judged + .seconds(1)))
        // A presence lacking nothing forgets what lapsed (it came back, or ended).
        requests.lapsed("a18-n1", origin: "n1", now: judged + .seconds(4))
        requests.nothingLacking("n1", listedAny: true)
        #expect(requests.lapsedCopiesCount == 0)
    }
}
