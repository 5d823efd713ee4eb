import Foundation

/// A stream pair's liveness rules (stream.proto, steps 4 and 5), decided with no I/O: from what the
/// pair last heard, sent and got done and the time passed in, what the node does for it on a tick —
/// nothing, a keep-alive, a resume, or giving up. The node carries the decision out
/// (``Node/superviseStreams(now:)``); the rules are tested without a socket or a clock.
enum StreamLiveness {
    /// What the rules read of a pair.
    struct State: Equatable {
        /// Since when the peer is silent, as the idle timeout counts it (``StreamPair/silentSince``):
        /// since it was last heard, less the time this side did not run.
        var silentSince: ContinuousClock.Instant
        var lastSent: ContinuousClock.Instant
        /// Since when it is the peer's turn (``StreamPair/peersTurnSince``): the pair's last
        /// progress, or this side's last step if later.
        var peersTurnSince: ContinuousClock.Instant
        /// Since when the pair is interrupted, if it is.
        var interruptedSince: ContinuousClock.Instant?
        var lastResumeSent: ContinuousClock.Instant?
        /// This side opened the pair (and so is the one that resumes it).
        var isContinuer: Bool
        /// A direction this side takes part in is still open for it (``StreamPair/sendsKeepAlives``).
        var sendsKeepAlives: Bool
        /// The pair waits on its peer, not on this side's application (``StreamPair/waitsOnPeer(writerWaiting:)``).
        var waitsOnPeer: Bool
    }

    /// The node's timeouts the rules apply (``Node/Configuration-swift.struct``).
    struct Limits: Equatable {
        /// Silence (not even a keep-alive) after which the pair is interrupted.
        var idleTimeout: Duration
        /// How long an interrupted pair waits for a resume before it is lost.
        var resumeWindow: Duration
        /// How long a connected pair may wait on its peer without progress before this side gives
        /// up on it; `nil`: as long as the peer is heard.
        var stallTimeout: Duration?
    }

    /// What to do for the pair now.
    enum Action: Equatable {
        case nothing
        /// Send a keep-alive (StreamCredit, chunks 0): this side sent nothing for a second.
        case keepAlive
        /// Send StreamResume (continuing side, at most once a second while interrupted).
        case resume
        /// The resume window passed without a resume: the pair is lost.
        case expire
        /// The peer is heard but made no progress for the stall timeout while the pair waited on
        /// it (its application stopped writing or reading): this side gives up and tells it.
        case giveUp
    }

    struct Decision: Equatable {
        /// The pair becomes interrupted now: nothing heard for the idle timeout.
        var interruptsNow = false
        var action = Action.nothing
    }

    /// How often a quiet side sends a keep-alive, and an interrupted continuing side a resume.
    static let keepAliveInterval = Duration.seconds(1)
    static let resumeInterval = Duration.seconds(1)

    /// How long a failed pair is kept, so that its late frames are dropped quietly (as frames of no
    /// pair are) rather than taken for a new pair's.
    static let failedPairKept = Duration.seconds(60)

    /// Whether a pair that failed at `failedAt` is kept no longer.
    static func forgets(failedAt: ContinuousClock.Instant, now: ContinuousClock.Instant) -> Bool {
        now - failedAt > failedPairKept
    }

    static func decide(_ state: State, now: ContinuousClock.Instant, limits: Limits) -> Decision {
        var decision = Decision()
        var interruptedSince = state.interruptedSince
        if interruptedSince == nil, now - state.silentSince > limits.idleTimeout {
            decision.interruptsNow = true
            interruptedSince = now
        }
        if let since = interruptedSince {
            // A silent or disconnected peer is the resume window's to judge, not the stall's.
            if now - since > limits.resumeWindow {
                decision.action = .expire
            } else if state.isContinuer, state.lastResumeSent.map({ now - $0 >= resumeInterval }) ?? true {
                decision.action = .resume
            }
        } else if let stall = limits.stallTimeout, state.waitsOnPeer, now - state.peersTurnSince > stall {
            decision.action = .giveUp
        } else if state.sendsKeepAlives, now - state.lastSent > keepAliveInterval {
            decision.action = .keepAlive
        }
        return decision
    }
}
