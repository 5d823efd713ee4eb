import Testing
@testable import Handoff

/// A broker's requests that an origin advertise again (ReadvertiseRequests), against a member
/// whose presences list made-up activities under made-up node ids: with no socket, times passed in.
@Suite("Broker: re-advertising requests held back for keys whose origins never answer")
struct ReadvertiseHoldBackTests {
    private static let start = ContinuousClock.now

    @Test("a key whose asked origins never advertise is held back (2 s, doubling to 5 min): a minute of fresh made-up origins ten a second asks about 40 and everyone once, not 480 and six times")
    func liarHeldBack() {
        var requests = ReadvertiseRequests()
        let liar = Array("liar-key".utf8)
        var origins = 0, everyone = 0
        for tick in 0..<600 {
            switch requests.decide("made-up-\(tick)", key: liar, now: Self.start + .milliseconds(tick * 100), everyoneAllowed: true) {
            case .origin: origins += 1
            case .everyone: everyone += 1
            case .none: break
            }
        }
        #expect(origins <= 48 && everyone <= 1, "\(origins) origins asked, everyone \(everyone) times")
        #expect(requests.isHeldBack(liar, now: Self.start + .seconds(60)))
        // Another key's origin is asked as before.
        let honest = requests.decide("n1", key: Array("honest".utf8), now: Self.start + .seconds(60), everyoneAllowed: true)
        #expect(honest == .origin)
    }

    @Test("an origin that advertises after it was asked keeps its key in good standing; one that never does (it died) holds its key back 2 s, and an advertisement of that key's forgives it")
    func answeredOriginsKeepTheirKey() {
        var requests = ReadvertiseRequests()
        let key = Array("fleet-key".utf8)
        for second in 0..<30 {
            let now = Self.start + .seconds(second)
            #expect(requests.decide("n\(second)", key: key, now: now, everyoneAllowed: true) == .origin)
            requests.advertised(by: "n\(second)")
        }
        #expect(!requests.isHeldBack(key, now: Self.start + .seconds(40)))
        // One that never answers: its key waits 2 s after the 5 s it had.
        #expect(requests.decide("dead", key: key, now: Self.start + .seconds(40), everyoneAllowed: true) == .origin)
        #expect(requests.decide("n-other", key: key, now: Self.start + .seconds(45), everyoneAllowed: true) == .none)
        #expect(requests.isHeldBack(key, now: Self.start + .milliseconds(46_900)))
        #expect(requests.decide("n-other", key: key, now: Self.start + .seconds(47), everyoneAllowed: true) == .origin)
        requests.advertised(by: "n-other")
        #expect(!requests.isHeldBack(key, now: Self.start + .seconds(47)))
        // An open broker (no key) holds nothing back.
        var open = ReadvertiseRequests()
        for tick in 0..<100 { _ = open.decide("made-up-\(tick)", now: Self.start + .milliseconds(tick * 100), everyoneAllowed: true) }
        #expect(open.decide("n1", now: Self.start + .seconds(20), everyoneAllowed: true) == .origin)
    }
}
