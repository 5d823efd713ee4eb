import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import Synchronization
import ZeroMQ

// The originating side of continuation: answering continue requests on the ROUTER, will-save first.
extension Node {
    // MARK: Originating side

    func serveContinuations() async {
        var burst = ReceiveBurst()
        while await burst.next() {
            let received: [Frame]?
            // The peer's routing id, an envelope, and a stream chunk's payload.
            do { received = try await sockets.server.receiveMultipart(maxFrames: 3) } catch { return }
            if let received {
                observability.metrics.received(on: .continuationServer, bytes: received.reduce(0) { $0 + $1.count })
                // (The routing id is the ROUTER's own frame: the envelope names the connection.)
                if let descriptor = received.last?.sourceDescriptor { sockets.unfinishedMessages.delivered(on: descriptor) }
            }
            guard let frames = received, frames.count >= 2 else {
                noteMalformed(bus: false, received == nil ? "a message of more than 3 frames" : "a message without an envelope")
                continue
            }
            let identity = frames[0].bytes
            do {
                let envelope: WireEnvelope
                switch try frames[1].serverEnvelope(strings: sockets.peerStrings) {
                case .continueRequest(let header, let request):
                    await answer(request, header, frame: frames[1], to: identity)
                    continue
                case .streamFrame(let frame, let sender):
                    streamFrameArrived(frame, in: frames, from: identity, sender: sender)
                    continue
                case .other(let other): envelope = other
                }
                switch ContinuationServer.route(envelope.body) {
                case .continueRequest(let request):
                    await answer(request, WireRequestHeader(envelope), frame: frames[1], to: identity)
                case .streamFrame(let frame):
                    streamFrameArrived(frame, in: frames, from: identity, sender: envelope.sender, traceID: envelope.traceID)
                case .refuse(let error, let noted):
                    noteMalformed(bus: false, noted)
                    reply(to: identity, correlationID: envelope.correlationID, .error(error.wire))
                }
            } catch {
                noteMalformed(bus: false, "a message that is not an envelope: \(error)")
                reply(to: identity, correlationID: 0, .error(error.wireError))
            }
        }
    }

    /// A stream frame the ROUTER received in `frames` (the routing id of the peer `identity`, the
    /// envelope, a chunk's payload), read alone or in its envelope, goes to its pair.
    private func streamFrameArrived(_ frame: WireStreamFrame, in frames: [Frame], from identity: [UInt8], sender: WireNodeRef, traceID: String = "") {
        // The peer, for the per-peer stream limit: its CURVE key when secure.
        let owner = frames[1].property("User-Id") ?? sender.nodeID
        handleStreamFrame(frame, payload: frames.count > 2 ? frames[2] : nil, from: .router(identity), owner: owner,
                          traceID: traceID, sender: sender)
    }

    func reply(to identity: [UInt8], correlationID: UInt64, _ body: WireEnvelope.OneOf_Body) {
        send(envelopes.bytes(body, correlationID: correlationID), to: identity)
    }

    /// Sends an encoded envelope to the peer `identity` names on the ROUTER.
    private func send(_ bytes: [UInt8], to identity: [UInt8]) {
        do {
            // ROUTER drops a reply to a vanished peer; it never blocks.
            if try sockets.server.trySend(identity, more: true), try sockets.server.trySend(bytes) {
                observability.metrics.sent(on: .continuationServer, bytes: identity.count + bytes.count)
            }
        } catch {
            own.logger.warning("could not reply to a continue request: \(error)")
        }
    }

    /// Answers a continue request that came in `frame` as ``ContinuationServer`` decides. The
    /// decision (and a continue-once claim) is made here, before anything awaits; with a delegate
    /// to call (will-save, was-continued) the rest runs as its own task, so that the delegate does
    /// not hold up the requests behind this one.
    func answer(_ request: WireContinueRequest, _ header: WireRequestHeader, frame: Frame, to identity: [UInt8]) async {
        // Read off the clock only for a traced request: tracing costs nothing when off.
        let received = header.traceID.isEmpty ? nil : Date()
        // Secure, the requester is who its CURVE key says (the ZAP handler's User-Id), whatever
        // node it claims to be.
        let authenticatedKey = frame.property("User-Id").flatMap { try? CurveKey(z85: $0) }
        let requester = ContinuationServer.requester(
            claimed: NodeInfo(wire: header.sender), authenticatedKey: authenticatedKey, secure: own.configuration.security != nil)
        let correlationID = header.correlationID
        // A traced request (wire.proto, "Tracing") is answered as any other, and reported.
        let trace = startContinueTrace(traceID: header.traceID, request, requester: requester, received: received)
        let decision = ContinuationServer.decide(
            request, current: advertiser.current, node: own.info.name, date: Date(), handOversWaiting: lifecycle.handOversWaiting)
        switch decision {
        case .overloaded(let error):
            refuse(request, error, to: identity, correlationID: correlationID, requester: requester, trace: trace)
            logRateLimited("refusing continue requests while \(lifecycle.handOversWaiting) wait on the application's delegate (the last from \(requester))")
        case .refuse(let error):
            refuse(request, error, to: identity, correlationID: correlationID, requester: requester, trace: trace)
        case .expired(let activity, let error):
            activity.detach()
            remove(activity, reason: .expired)
            refuse(request, error, to: identity, correlationID: correlationID, requester: requester, trace: trace)
        case .answer(let activity, let claims, let save):
            if activity.delegate == nil {
                await handOver(activity, claimed: claims, save: save, request, to: identity, correlationID: correlationID, requester: requester, trace: trace)
            } else {
                lifecycle.handOversWaiting += 1
                spawn {
                    await self.handOver(activity, claimed: claims, save: save, request, to: identity, correlationID: correlationID,
                                        requester: requester, trace: trace)
                    await self.handOverEnded()
                }
            }
        }
    }

    private func handOverEnded() { lifecycle.handOversWaiting -= 1 }

    private func refuse(
        _ request: WireContinueRequest, _ error: HandoffError, to identity: [UInt8], correlationID: UInt64, requester: NodeInfo, trace: ContinueTrace?
    ) {
        var reply = WireContinueReply()
        reply.error = error.wire
        own.logger.debug("refused to continue \(request.activityID) for \(requester): \(error)")
        self.reply(to: identity, correlationID: correlationID, .continueReply(reply))
        endContinueTrace(trace, "refused: \(error.code): \(error.message)")
        observability.metrics.answeredContinue(restored: false)
    }

    /// Will-save when it is due, the last checks, the reply; then what follows a continuation.
    private func handOver(
        _ activity: UserActivity, claimed: Bool, save: Bool, _ request: WireContinueRequest, to identity: [UInt8],
        correlationID: UInt64, requester: NodeInfo, trace: ContinueTrace?
    ) async {
        // Will-save as often as ContinuationServer says: when decided, and again while the activity
        // is marked as needing one (an app may mark it after a change, during a save).
        var saves = 0
        let saving: ContinuousClock.Instant? = trace == nil ? nil : .now  // read only when traced
        while ContinuationServer.saveDue(activity, decided: save, rounds: saves), let delegate = activity.delegate {
            await delegate.userActivityWillSave(activity)
            activity.didSave()
            saves += 1
        }
        switch ContinuationServer.finish(activity, claimed: claimed, maxUserInfoSize: own.configuration.maxUserInfoSize, date: Date()) {
        case .failure(let error):
            refuse(request, error, to: identity, correlationID: correlationID, requester: requester, trace: trace)
        case .success(let activity):
            // Encoded once for as long as the activity does not change (UserActivity+EncodedWire.swift).
            let encoded = activity.encodedWire(origin: envelopes.sender, defaultTeamID: own.configuration.teamID)
            send(envelopes.bytes(continueReplyActivity: encoded.bytes, correlationID: correlationID), to: identity)
            if let saving {
                let saved = saves == 0 ? "no will-save"
                    : "will-save " + (saves == 1 ? "" : "\(saves) times, ") + String(format: "%.3f ms", (ContinuousClock.now - saving).seconds * 1000)
                endContinueTrace(trace, "the activity, version \(encoded.version) (\(saved))")
            }
            observability.metrics.answeredContinue(restored: true)
            guard let handedOver = ContinuationServer.continued(activity, by: requester, refresh: request.refresh) else { return }
            // The audit line goes with the event: a peer continuing in a loop is logged once a minute.
            if publishPeerEvent(about: requester.publicKey?.z85 ?? requester.id, handedOver.event) {
                own.logger.info("\(activity.activityType) continued by \(requester)")
            }
            if handedOver.endsHere {
                activity.invalidateAfterContinuation()
                publish(advertiser.continuedOnce(activity))
            }
            await activity.delegate?.userActivityWasContinued(activity, by: requester)
        }
    }
}
