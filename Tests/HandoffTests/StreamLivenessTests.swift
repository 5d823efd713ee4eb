import Foundation
import Testing

@testable import Handoff

/// stream.proto's liveness and resume rules (steps 4 and 5), each on the decision alone: no socket,
/// no node, no real clock.
@Suite("Stream liveness rules, without sockets")
struct StreamLivenessTests {
    let start = ContinuousClock.now
    let idle = Duration.seconds(5)
    let window = Duration.seconds(30)

    func state(heard: Duration = .zero, sent: Duration = .zero, peersTurn: Duration = .zero, interrupted: Duration? = nil,
               resumed: Duration? = nil, continuer: Bool = true, keepsAlive: Bool = true, waitsOnPeer: Bool = true) -> StreamLiveness.State {
        StreamLiveness.State(
            silentSince: start + heard, lastSent: start + sent, peersTurnSince: start + peersTurn,
            interruptedSince: interrupted.map { start + $0 }, lastResumeSent: resumed.map { start + $0 },
            isContinuer: continuer, sendsKeepAlives: keepsAlive, waitsOnPeer: waitsOnPeer)
    }

    func decide(_ state: StreamLiveness.State, at offset: Duration, stallTimeout: Duration? = nil) -> StreamLiveness.Decision {
        StreamLiveness.decide(state, now: start + offset, limits: .init(idleTimeout: idle, resumeWindow: window, stallTimeout: stallTimeout))
    }

    @Test("rule 4: a side that sent nothing for a second sends a keep-alive; one that sent within the second does not")
    func keepAliveAfterASecondOfQuiet() {
        #expect(decide(state(heard: .milliseconds(900), sent: .zero), at: .milliseconds(1_001)).action == .keepAlive)
        #expect(decide(state(heard: .milliseconds(900), sent: .milliseconds(500)), at: .milliseconds(1_001)).action == .nothing)
    }

    @Test("rule 4: a side with no direction open for it (a one-way writer past its end) sends no keep-alive")
    func noKeepAliveOnAnExcludedDirection() {
        #expect(decide(state(heard: .seconds(2), sent: .zero, keepsAlive: false), at: .seconds(3)).action == .nothing)
    }

    @Test("rule 4: silence past the idle timeout interrupts the pair, not fails it; the continuing side sends a resume at once")
    func silenceInterrupts() {
        let continuer = decide(state(heard: .zero, sent: .seconds(5)), at: .milliseconds(5_001))
        #expect(continuer == StreamLiveness.Decision(interruptsNow: true, action: .resume))
        let originator = decide(state(heard: .zero, sent: .seconds(5), continuer: false), at: .milliseconds(5_001))
        #expect(originator == StreamLiveness.Decision(interruptsNow: true, action: .nothing))
        // Slow is not dead: heard within the idle timeout, the pair stays as it is.
        #expect(!decide(state(heard: .seconds(1), sent: .seconds(5)), at: .seconds(5)).interruptsNow)
    }

    @Test("rule 5: an interrupted pair's continuing side resumes once a second, and sends no keep-alives meanwhile")
    func resumeOnceASecond() {
        #expect(decide(state(interrupted: .seconds(6), resumed: .seconds(6)), at: .milliseconds(6_999)).action == .nothing)
        #expect(decide(state(interrupted: .seconds(6), resumed: .seconds(6)), at: .seconds(7)).action == .resume)
        // The originating side waits for the continuing side's resume.
        #expect(decide(state(interrupted: .seconds(6), resumed: nil, continuer: false), at: .seconds(8)).action == .nothing)
    }

    @Test("rule 5: past the resume window without a resume, the pair is lost, on either side")
    func expiresAfterTheWindow() {
        #expect(decide(state(interrupted: .seconds(6), resumed: .seconds(36)), at: .milliseconds(36_001)).action == .expire)
        #expect(decide(state(interrupted: .seconds(6), continuer: false), at: .milliseconds(36_001)).action == .expire)
        #expect(decide(state(interrupted: .seconds(6), resumed: .seconds(35)), at: .seconds(36)).action == .resume)
    }

    @Test("stall rule: a connected pair waiting on its peer past the stall timeout without progress gives up; within it, a keep-alive as usual")
    func stallGivesUp() {
        let heard = state(heard: .milliseconds(9_500), sent: .seconds(9), peersTurn: .zero)
        #expect(decide(heard, at: .milliseconds(10_001), stallTimeout: .seconds(10)).action == .giveUp)
        #expect(decide(heard, at: .milliseconds(10_001), stallTimeout: .seconds(11)).action == .keepAlive)
        // Without a stall timeout the peer may take as long as it answers keep-alives.
        #expect(decide(heard, at: .seconds(3_600)).action != .giveUp)
    }

    @Test("stall rule: the wait counts from the peer's turn, so time this side's application took does not count; nor a pair waiting on this side")
    func stallCountsOnlyThePeersTurn() {
        let ownStepLate = state(heard: .milliseconds(9_500), sent: .seconds(9), peersTurn: .seconds(8))
        #expect(decide(ownStepLate, at: .milliseconds(10_001), stallTimeout: .seconds(10)).action == .keepAlive)
        let waitsOnItself = state(heard: .milliseconds(9_500), sent: .seconds(9), waitsOnPeer: false)
        #expect(decide(waitsOnItself, at: .milliseconds(10_001), stallTimeout: .seconds(10)).action == .keepAlive)
    }

    @Test("stall rule: an interrupted pair is the resume window's to judge, not the stall timeout's")
    func stallLeavesInterruptedPairsToTheWindow() {
        let interrupted = state(heard: .zero, interrupted: .seconds(6), resumed: .seconds(7))
        #expect(decide(interrupted, at: .seconds(8), stallTimeout: .seconds(1)).action == .resume)
        #expect(decide(interrupted, at: .milliseconds(36_001), stallTimeout: .seconds(1)).action == .expire)
    }

    @Test("rule: a failed pair is kept for failedPairKept (its late frames dropped quietly), then forgotten")
    func failedPairsForgotten() {
        let failedAt = ContinuousClock.now
        let kept = StreamLiveness.failedPairKept
        #expect(kept == .seconds(60))
        #expect(!StreamLiveness.forgets(failedAt: failedAt, now: failedAt + kept))
        #expect(StreamLiveness.forgets(failedAt: failedAt, now: failedAt + kept + .milliseconds(1)))
    }
}
