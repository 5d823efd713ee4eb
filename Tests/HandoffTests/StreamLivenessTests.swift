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

    func state(heard: Duration = .zero, sent: Duration = .zero, interrupted: Duration? = nil, resumed: Duration? = nil,
               continuer: Bool = true, keepsAlive: Bool = true) -> StreamLiveness.State {
        StreamLiveness.State(
            lastHeard: start + heard, lastSent: start + sent, interruptedSince: interrupted.map { start + $0 },
            lastResumeSent: resumed.map { start + $0 }, isContinuer: continuer, sendsKeepAlives: keepsAlive)
    }

    func decide(_ state: StreamLiveness.State, at offset: Duration) -> StreamLiveness.Decision {
        StreamLiveness.decide(state, now: start + offset, idleTimeout: idle, resumeWindow: window)
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
}
