import Foundation
import Logging

// Continuation streams: telling an originator whose process is gone from a link that is cut, and
// what an interrupted pair waits for.
extension Node {
    /// libzmq failed to reconnect to `endpoint` (ZMQ_EVENT_CONNECT_RETRIED). While pairs with it wait
    /// for a resume, the kernel is asked whether anything listens there: a port or socket file that
    /// refuses (twice in a row, ``OriginRefusals``) means the originator's process is gone, and its
    /// pairs fail with `peerLost` now instead of after the resume window. A link that is merely cut
    /// (nothing answers, no route) keeps the window: the originator may be alive behind it.
    func reconnectFailed(to endpoint: String, client identity: ObjectIdentifier) {
        guard let client = sockets.clients[endpoint], ObjectIdentifier(client) == identity else { return }
        let waiting = streams.live(toDealer: endpoint).contains(where: \.pair.awaitsResume)
        guard client.refusals.reconnectFailed(pairsAwaitResume: waiting) else { return }
        spawn {
            let outcome = await Self.probeWorkers.run { EndpointProbe.probe(endpoint, timeout: .seconds(1)) }
            await self.probed(endpoint, client: identity, outcome)
        }
    }

    func probed(_ endpoint: String, client identity: ObjectIdentifier, _ outcome: EndpointProbe.Outcome) {
        guard let client = sockets.clients[endpoint], ObjectIdentifier(client) == identity else { return }
        let reason: String? = if case .refused(let reason) = outcome { reason } else { nil }
        guard client.refusals.probed(refused: reason != nil), let reason else { return }
        for session in streams.live(toDealer: endpoint) where session.pair.awaitsResume {
            let silence = (ContinuousClock.now - session.pair.lastHeard).seconds.formatted(.number.precision(.fractionLength(1)))
            own.logger.info("streams \(session.route.id): the originator at \(endpoint) refuses connections (\(reason)); its process is gone")
            let error = HandoffError(.peerLost, "the originator at \(endpoint) refuses connections (\(reason), \(client.refusals.inARow) times in a row): its process is gone; nothing heard from it for \(silence) s, \(session.pair.receivedOffset) bytes had arrived", activityType: session.activityType)
            perform(session.pair.peerGone(error, now: .now), on: session)
        }
    }

    /// The thread that asks the kernel whether an endpoint listens (a connect, and a name to
    /// resolve, may block), shared by every node of the process.
    static let probeWorkers = PluginWorkers(limit: 1, name: "handoff-probe")

    /// What the stream pairs that wait on something other than their application wait for: an
    /// interrupted pair for its peer to come back, an open for its answer, a reader for bytes the
    /// peer has not sent for a while. For `handoff continue --save` to show while it waits.
    public func streamWaits() -> [StreamWait] {
        let now = ContinuousClock.now
        return streams.live.compactMap { session -> StreamWait? in
            let peer: String = switch session.route.peer {
            case .dealer(let endpoint): "the originator at \(endpoint)"
            case .router: "the continuing node \(session.owner)"
            }
            func wait(_ state: StreamWait.State, since: Duration, refusals: Int = 0) -> StreamWait {
                StreamWait(streamID: session.route.id, state: state, peer: peer, since: since,
                           resumeWindow: own.configuration.streamResumeWindow, stallTimeout: own.configuration.streamStallTimeout, refusals: refusals)
            }
            if session.pair.isOpening { return wait(.opening, since: now - session.pair.lastSent) }
            if let since = session.pair.interruptedSince {
                let refusals = if case .dealer(let endpoint) = session.route.peer { sockets.clients[endpoint]?.refusals.inARow ?? 0 } else { 0 }
                return wait(.interrupted, since: now - since, refusals: refusals)
            }
            let quiet = now - session.pair.peersTurnSince
            guard session.pair.readerWaitsOnPeer, quiet >= .seconds(1) else { return nil }
            return wait(.awaitingBytes, since: quiet)
        }
    }
}

/// What a stream pair waits for, and since when (``Node/streamWaits()``).
public struct StreamWait: Sendable, Hashable, CustomStringConvertible {
    public enum State: Sendable, Hashable {
        /// The open is not answered yet.
        case opening
        /// The connection dropped or went silent: waiting for the peer to resume, up to the window.
        case interrupted
        /// Connected, but no new bytes arrived for a while (the peer writes slowly, or not yet).
        case awaitingBytes
    }

    public let streamID: UInt64
    public let state: State
    /// Who it waits for, in words ("the originator at tcp://…").
    public let peer: String
    /// How long it has waited.
    public let since: Duration
    /// How long an interrupted pair waits before it fails with `peerLost`.
    public let resumeWindow: Duration
    /// How long a connected pair waits on its peer without progress before the node gives up on
    /// it (``Node/Configuration-swift.struct/streamStallTimeout``); `nil`: as long as it is heard.
    public let stallTimeout: Duration?
    /// Reconnects in a row that found nothing listening (two and the pair fails as the peer is gone).
    public let refusals: Int

    public var description: String {
        let waited = since.seconds.formatted(.number.precision(.fractionLength(1)))
        switch state {
        case .opening:
            return "waiting \(waited) s for \(peer) to answer the stream open"
        case .awaitingBytes:
            guard let stallTimeout else { return "connected; nothing new from \(peer) for \(waited) s" }
            let limit = stallTimeout.seconds.formatted(.number.precision(.fractionLength(0...1)))
            return "connected; nothing new from \(peer) for \(waited) s (giving up at \(limit) s)"
        case .interrupted:
            let left = max(0, (resumeWindow - since).seconds).formatted(.number.precision(.fractionLength(0)))
            let refused = refusals > 0 ? "; its endpoint refused \(refusals) reconnect\(refusals == 1 ? "" : "s")" : ""
            return "connection to \(peer) lost \(waited) s ago; waiting up to \(left) s more for it to resume\(refused)"
        }
    }
}
