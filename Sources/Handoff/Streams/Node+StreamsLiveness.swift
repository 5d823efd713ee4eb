import DequeModule
import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import ZeroMQ

// Continuation streams: keep-alives, interruption and loss, and relief under pressure.
extension Node {
    // MARK: Liveness

    /// Called on every tick: keep-alives for quiet pairs, resumes for interrupted ones, failure for
    /// peers silent past the resume window, cleanup.
    func superviseStreams(now: ContinuousClock.Instant) {
        relieveStreamPressure()
        for session in streams.all {
            if let failedAt = session.failedAt {
                if !session.failureReported {
                    session.failureReported = true
                    publishStreamEvent(.streamFailed, session, detail: session.failure.map { "\($0)" } ?? "")
                }
                // Kept a while so that late frames for it are dropped quietly.
                if now - failedAt > .seconds(60) { forgetSession(session) }
                continue
            }
            guard session.openWaiter == nil else { continue }
            if (session.bytesSent, session.bytesArrived) != session.reported {
                publishStreamEvent(.streamProgress, session)
            }
            let decision = StreamLiveness.decide(
                session.liveness, now: now, idleTimeout: own.configuration.streamIdleTimeout, resumeWindow: own.configuration.streamResumeWindow)
            if decision.interruptsNow {
                own.logger.info("streams \(session.route.id): nothing heard from \(session.owner) for \(own.configuration.streamIdleTimeout); waiting up to \(own.configuration.streamResumeWindow) for it to resume")
                session.interruptedSince = now
            }
            switch decision.action {
            case .nothing: break
            case .keepAlive: sendStreamMessage(session, .credit(acknowledgement(of: session)))
            case .resume: sendResume(session, now: now)
            case .expire: expireInterrupted(session)
            }
        }
    }

    func expireInterrupted(_ session: StreamSession) {
        // Everything was delivered both ways and only the last acknowledgement is missing: done.
        if session.endReceived, session.end != nil, session.resend.isEmpty, session.retained.isEmpty {
            session.endAcknowledged = true
            removeIfDone(session)
            return
        }
        observability.streamCounters.lost += 1
        let silence = ContinuousClock.now - session.lastHeard
        let peer = session.isContinuer ? "the originator" : "the continuing node \(session.owner)"
        session.fail(HandoffError(.peerLost, "nothing heard from \(peer) for \(silence.seconds.formatted(.number.precision(.fractionLength(1)))) s, and it did not resume within the resume window (\(own.configuration.streamResumeWindow)): its process died or the network is down; \(session.receivedOffset) bytes had arrived", activityType: session.activityType))
    }
}

/// Which halves of a stream pair the continuing node opens.
public enum StreamDirection: Sendable, Hashable, CustomStringConvertible {
    /// Both ways (the usual case).
    case both
    /// Only from the originator to this node: the output is closed from the start.
    case fromOriginator
    /// Only from this node to the originator: the input is empty and ended from the start.
    case toOriginator

    var wire: WireStreamDirection {
        switch self {
        case .both: .unspecified
        case .fromOriginator: .originToContinuer
        case .toOriginator: .continuerToOrigin
        }
    }

    public var description: String {
        switch self {
        case .both: "both ways"
        case .fromOriginator: "from the originator only"
        case .toOriginator: "to the originator only"
        }
    }
}

// MARK: Pressure

extension Node {
    /// Something that holds stream work the node cannot start yet (a plugin runtime's calls waiting
    /// for a worker): asked on every tick how many wait.
    func addStreamPressureProbe(_ probe: @escaping @Sendable () -> Int) {
        observability.streamPressureProbes.append(probe)
    }

    /// Ends the pair that has gone longest without progress (at least ``Configuration-swift.struct/streamStallGrace``),
    /// from the peer holding the most pairs, to free what it holds: its slot, its buffers, the
    /// plugin workers blocked on it. Only pairs peers opened here (this node the originator) are
    /// chosen. Returns whether one was.
    @discardableResult
    func evictStalledStream(because reason: String) -> Bool {
        let now = ContinuousClock.now
        let live = streams.live.filter { !$0.isContinuer }
        var held: [String: Int] = [:]
        for session in live { held[session.owner, default: 0] += 1 }
        let stalled = live.filter { $0.waitsOnPeer && now - $0.lastProgress >= own.configuration.streamStallGrace }
        guard let victim = stalled.min(by: { a, b in
            let (heldA, heldB) = (held[a.owner]!, held[b.owner]!)
            return heldA != heldB ? heldA > heldB : a.lastProgress < b.lastProgress
        }) else { return false }
        observability.streamCounters.evicted += 1
        let idle = (now - victim.lastProgress).seconds.formatted(.number.precision(.fractionLength(1)))
        if observability.streamCounters.evicted.nonzeroBitCount == 1 {  // 1, 2, 4, 8…: logged, not flooded
            own.logger.warning("ended streams \(victim.route.id) of \(victim.owner) (no progress for \(idle) s): \(reason) (\(observability.streamCounters.evicted) ended so far)")
        }
        let error = HandoffError(.tooManyStreams, "\(reason); this pair made no progress for \(idle) s and was ended to make room", activityType: victim.activityType)
        var wire = error.wire
        wire.details["scope"] = "evicted"
        sendStreamMessage(victim, .error(wire))
        victim.fail(error)
        return true
    }

    /// On every tick: while stream work waits for resources held by stalled pairs, end one stalled
    /// pair per waiting piece of work.
    func relieveStreamPressure() {
        let waiting = observability.streamPressureProbes.reduce(0) { $0 + $1() }
        guard waiting > 0 else { return }
        for _ in 0..<waiting {
            guard evictStalledStream(because: "stream work on \(own.info.name) waits for plugin workers that stalled pairs hold") else { return }
        }
    }
}
