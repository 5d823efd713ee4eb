import DequeModule
import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import ZeroMQ

// Continuation streams: keep-alives, interruption and loss, and relief under pressure.
extension Node {
    // MARK: Liveness

    /// The liveness rules' limits, from the configuration.
    var streamLimits: StreamLiveness.Limits {
        StreamLiveness.Limits(idleTimeout: own.configuration.streamIdleTimeout, resumeWindow: own.configuration.streamResumeWindow,
                              stallTimeout: own.configuration.streamStallTimeout)
    }

    /// Called on every tick: keep-alives for quiet pairs, resumes for interrupted ones, failure for
    /// peers silent past the resume window, cleanup.
    func superviseStreams(now: ContinuousClock.Instant) {
        relieveStreamPressure()
        let limits = streamLimits
        for session in streams.all {
            if let failedAt = session.pair.failedAt {
                reportFailure(session)
                if StreamLiveness.forgets(failedAt: failedAt, now: now) { forgetSession(session) }
                continue
            }
            if session.pair.isOpening {
                perform(session.pair.expireOpen(now: now, unanswered: unansweredOpen(session)), on: session)
                continue
            }
            if session.progressDue(now: now) {
                session.progressReportedAt = now
                publishStreamEvent(.streamProgress, session)
            }
            session.pair.readerTook(session.reading.counter.progress.bytes, now: now)
            let actions = session.pair.tick(now: now, limits: limits, writerWaiting: session.creditWaiter != nil)
            perform(actions, on: session)
        }
    }

    /// The error an open of this node's fails with when its originator does not answer it in time.
    private func unansweredOpen(_ session: StreamSession) -> HandoffError {
        let endpoint = switch session.route.peer {
        case .dealer(let endpoint): endpoint
        case .router: "its continuation endpoint"
        }
        return StreamOpenRequest.unanswered(endpoint: endpoint, timeout: own.configuration.continueTimeout, activityType: session.activityType)
    }

    /// Publishes a failed pair's `streamFailed` event, once.
    private func reportFailure(_ session: StreamSession) {
        guard !session.failureReported else { return }
        session.failureReported = true
        publishStreamEvent(.streamFailed, session, detail: session.failure.map { "\($0)" } ?? "")
    }

    /// Before a pair is made: the failed pairs past ``Configuration/maxStreams`` are forgotten,
    /// reported first. They are kept only so that their late frames are dropped quietly (as frames
    /// of no pair are), so a peer that opens and fails pairs as fast as it can holds at most that
    /// many in the table, not as many as it made within the time a failed pair is kept.
    func makeRoomForAnotherPair() {
        for session in streams.failedToMakeRoom(keeping: own.configuration.maxStreams) {
            reportFailure(session)
            forgetSession(session)
        }
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
        guard let victim = streams.stalledVictim(now: now, grace: own.configuration.streamStallGrace) else { return false }
        observability.streamCounters.evicted += 1
        let idle = (now - victim.peersTurnSince).seconds.formatted(.number.precision(.fractionLength(1)))
        if observability.streamCounters.evicted.nonzeroBitCount == 1 {  // 1, 2, 4, 8…: logged, not flooded
            own.logger.warning("ended streams \(victim.route.id) of \(victim.owner) (no progress for \(idle) s): \(reason) (\(observability.streamCounters.evicted) ended so far)")
        }
        let error = HandoffError(.tooManyStreams, "\(reason); this pair made no progress for \(idle) s and was ended to make room", activityType: victim.activityType)
        var wire = error.wire
        wire.details["scope"] = "evicted"
        perform(victim.pair.fail(error, telling: .error(wire), now: now), on: victim)
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
