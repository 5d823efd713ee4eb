import Testing

@testable import Handoff

/// When an originator is taken as gone (``OriginRefusals``), without a socket or a probe.
@Suite("An originator taken as gone, without sockets")
struct OriginRefusalsTests {
    @Test("a failed reconnect is probed only while pairs wait for a resume, and one probe at a time")
    func probesOnlyWhenAPairWaits() {
        var refusals = OriginRefusals()
        let probesWithNoPairWaiting = refusals.reconnectFailed(pairsAwaitResume: false)
        #expect(!probesWithNoPairWaiting)
        let probesWhilePairsWait = refusals.reconnectFailed(pairsAwaitResume: true)
        #expect(probesWhilePairsWait)
        let probesTwice = refusals.reconnectFailed(pairsAwaitResume: true)
        #expect(!probesTwice)  // the probe is under way
        #expect(refusals.probing)
    }

    @Test("two refusals in a row mean the process is gone; one could be a restart rebinding its port")
    func twoRefusalsInARow() {
        var refusals = OriginRefusals()
        _ = refusals.reconnectFailed(pairsAwaitResume: true)
        let goneAfterOne = refusals.probed(refused: true)
        #expect(!goneAfterOne)
        #expect(refusals.inARow == 1 && !refusals.probing)
        _ = refusals.reconnectFailed(pairsAwaitResume: true)
        let goneAfterTwo = refusals.probed(refused: true)
        #expect(goneAfterTwo)
        #expect(refusals.inARow == OriginRefusals.meaningGone)
    }

    @Test("an endpoint that answers, or a link that is merely cut, starts the count again; so does no pair waiting")
    func anythingElseStartsAgain() {
        var refusals = OriginRefusals()
        _ = refusals.reconnectFailed(pairsAwaitResume: true)
        _ = refusals.probed(refused: true)
        _ = refusals.reconnectFailed(pairsAwaitResume: true)
        let goneWhenItAnswers = refusals.probed(refused: false)
        #expect(!goneWhenItAnswers)  // it answers, or nothing answers (a cut link)
        #expect(refusals.inARow == 0)
        _ = refusals.reconnectFailed(pairsAwaitResume: true)
        _ = refusals.probed(refused: true)
        let probesWithNoPairLeft = refusals.reconnectFailed(pairsAwaitResume: false)
        #expect(!probesWithNoPairLeft)
        #expect(refusals.inARow == 0)
    }
}
