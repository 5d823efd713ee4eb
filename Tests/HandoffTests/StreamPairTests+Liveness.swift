import Foundation
import HandoffWire
import Testing
@testable import Handoff

// The liveness rules on a pair ticked as a node ticks it (``StreamLiveness``), with no socket and
// no real clock.
extension StreamPairTests {
    /// Ticks `pair` every 250 ms (as a node does) from `from` to `to`; returns each tick's actions
    /// that did anything, with its time since the start.
    func ticks(_ pair: inout StreamPair, from: Duration = .milliseconds(250), to: Duration) -> [(at: Duration, actions: [StreamPair.Action])] {
        var done: [(at: Duration, actions: [StreamPair.Action])] = []
        var at = from
        while at <= to {
            let actions = pair.tick(now: start + at, limits: limits)
            if !actions.isEmpty { done.append((at, actions)) }
            at += .milliseconds(250)
        }
        return done
    }

    @Test("liveness: a keep-alive after a quiet second; silence past the idle timeout interrupts; resumes once a second; lost past the window")
    func liveness() {
        var continuer = pair(continuer: true, direction: .originToContinuer)
        let quiet = ticks(&continuer, to: .seconds(5))
        #expect(quiet.first?.at == .milliseconds(1_250), "a quiet side sends a keep-alive after a second")
        #expect(quiet.allSatisfy { if case .credit = sent($0.actions).first { true } else { false } }, "\(quiet)")
        let silent = continuer.tick(now: start + .milliseconds(5_250), limits: limits)
        #expect(silent.contains { if case .record(.interruptedBySilence) = $0 { true } else { false } })
        guard case .resume = sent(silent).first else { Issue.record("the continuing side asks to resume at once: \(silent)"); return }
        #expect(continuer.awaitsResume && continuer.lastResumeSent == start + .milliseconds(5_250))
        let waiting = ticks(&continuer, from: .milliseconds(5_500), to: .milliseconds(35_250))
        #expect(waiting.map(\.at) == stride(from: 6_250, through: 35_250, by: 1_000).map { .milliseconds($0) }, "a resume a second")
        let lost = continuer.tick(now: start + .milliseconds(35_500), limits: limits)
        #expect(failure(lost)?.code == .peerLost && lost.contains { if case .record(.lost) = $0 { true } else { false } })
        #expect(failure(lost)?.message.contains("the originator") == true)
    }

    @Test("liveness: time this side did not run (no tick for 4 s: its process stopped, its loop ran late) is no silence of the peer's, nor time of the resume window's; what the peer sent meanwhile is read before the peer is judged")
    func ownPauseIsNoSilence() {
        var continuer = pair(continuer: true, direction: .originToContinuer)
        _ = ticks(&continuer, to: .seconds(4))
        // Stopped from 4 s to 8 s: waking, it ticks before it reads what waited in its socket.
        let woke = continuer.tick(now: start + .seconds(8), limits: limits)
        #expect(!woke.contains { if case .record(.interruptedBySilence) = $0 { true } else { false } }, "\(woke)")
        _ = continuer.received(.credit(WireStreamCredit()), now: start + .milliseconds(8_010))
        #expect(!ticks(&continuer, from: .milliseconds(8_250), to: .seconds(13)).contains { tick in
            tick.actions.contains { if case .record(.interruptedBySilence) = $0 { true } else { false } }
        })
        // Silent from 8.01 s: interrupted past 5 s of it, as ever; stopped 10 s in the window, lost 10 s later.
        let silent = ticks(&continuer, from: .milliseconds(13_250), to: .seconds(14))
        #expect(silent.first?.at == .milliseconds(13_250) && continuer.awaitsResume)
        _ = ticks(&continuer, from: .milliseconds(14_250), to: .seconds(20))
        let stillWaiting = continuer.tick(now: start + .seconds(30), limits: limits)
        #expect(failure(stillWaiting) == nil && continuer.awaitsResume)
        #expect(ticks(&continuer, from: .milliseconds(30_250), to: .milliseconds(53_250)).allSatisfy { failure($0.actions) == nil })
        #expect(failure(ticks(&continuer, from: .milliseconds(53_500), to: .seconds(54)).first?.actions ?? [])?.code == .peerLost)
    }

    @Test("liveness: a continuing side whose connection comes back asks to resume at once, not at its next resume interval; an uninterrupted side, an originating side and a failed pair do nothing")
    func resumesWhenConnectionReturns() {
        var continuer = pair(continuer: true, direction: .originToContinuer)
        #expect(continuer.connectionReturned(now: start).isEmpty, "not interrupted: nothing to resume")
        let (_, interrupted) = continuer.connectionDropped(failingOpenWith: HandoffError(.connectionUnavailable, "dropped"), now: start)
        #expect(interrupted)
        let first = continuer.tick(now: start + .milliseconds(250), limits: limits)
        guard case .resume = sent(first).first else { Issue.record("the first tick asks to resume: \(first)"); return }
        // Back 300 ms later: the next resume would be at 1.25 s; it goes now.
        let back = continuer.connectionReturned(now: start + .milliseconds(550))
        guard case .resume(let request) = sent(back).first else { Issue.record("a resume at once: \(back)"); return }
        #expect(request.receivedOffset == 0 && continuer.lastResumeSent == start + .milliseconds(550))
        #expect(ticks(&continuer, from: .milliseconds(750), to: .milliseconds(1_250)).isEmpty, "the interval counts from the resume it sent")

        var originator = pair(continuer: false, direction: .originToContinuer)
        originator.transportRefused(now: start)
        #expect(originator.connectionReturned(now: start + .seconds(1)).isEmpty, "the originator waits to be asked")

        var lost = pair(continuer: true, direction: .originToContinuer)
        _ = lost.connectionDropped(failingOpenWith: HandoffError(.connectionUnavailable, "dropped"), now: start)
        #expect(failure(lost.tick(now: start + .seconds(31), limits: limits))?.code == .peerLost)
        #expect(lost.connectionReturned(now: start + .seconds(32)).isEmpty, "a failed pair says nothing more")
    }
}
