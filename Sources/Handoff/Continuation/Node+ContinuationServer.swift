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
        while !Task.isCancelled {
            await burst.next()
            let received: [Frame]?
            // The peer's routing id, an envelope, and a stream chunk's payload.
            do { received = try await server.receiveMultipart(maxFrames: 3) } catch { return }
            if let received { metrics.received(on: .continuationServer, bytes: received.reduce(0) { $0 + $1.count }) }
            guard let frames = received, frames.count >= 2 else {
                noteMalformed(bus: false, received == nil ? "a message of more than 3 frames" : "a message without an envelope")
                continue
            }
            let identity = frames[0].bytes
            do {
                let envelope = try WireEnvelope.decode(frames[1].data)
                switch envelope.body {
                case .continueRequest(let request):
                    // Secure, the requester is who its CURVE key says (the ZAP handler's User-Id),
                    // whatever node it claims to be.
                    let authenticated = frames[1].property("User-Id").flatMap { try? CurveKey(z85: $0) }
                    // Without a delegate to call (will-save, was-continued) nothing in the answer
                    // waits: answer here, without a task. Otherwise the delegate must not hold up
                    // the requests behind this one.
                    if advertiser.current[request.activityID]?.delegate == nil {
                        await answer(request, in: envelope, to: identity, authenticatedKey: authenticated)
                    } else {
                        spawn { await self.answer(request, in: envelope, to: identity, authenticatedKey: authenticated) }
                    }
                case .streamFrame(let frame):
                    // The peer, for the per-peer stream limit: its CURVE key when secure.
                    let owner = frames[1].property("User-Id") ?? envelope.sender.nodeID
                    handleStreamFrame(frame, payload: frames.count > 2 ? frames[2] : nil, from: .router(identity), owner: owner)
                default:
                    noteMalformed(bus: false, "a \(envelope.body.map { "\($0)".prefix(40) } ?? "bodiless") message where continue requests and stream frames go")
                    reply(to: identity, correlationID: envelope.correlationID, .error(HandoffError(.malformedMessage, "this endpoint answers continue requests only").wire))
                }
            } catch {
                noteMalformed(bus: false, "a message that is not an envelope: \(error)")
                reply(to: identity, correlationID: 0, .error(error.wireError))
            }
        }
    }

    func reply(to identity: [UInt8], correlationID: UInt64, _ body: WireEnvelope.OneOf_Body) {
        let bytes = envelopes.bytes(body, correlationID: correlationID)
        do {
            // ROUTER drops a reply to a vanished peer; it never blocks.
            if try server.trySend(identity, more: true), try server.trySend(bytes) {
                metrics.sent(on: .continuationServer, bytes: identity.count + bytes.count)
            }
        } catch {
            logger.warning("could not reply to a continue request: \(error)")
        }
    }

    func answer(
        _ request: WireContinueRequest, in envelope: WireEnvelope, to identity: [UInt8], authenticatedKey: CurveKey?
    ) async {
        let claimed = NodeInfo(wire: envelope.sender)
        let requester = configuration.security == nil ? claimed
            : NodeInfo(id: claimed.id, name: claimed.name, host: claimed.host, publicKey: authenticatedKey)
        var reply = WireContinueReply()
        var continued: UserActivity?
        do {
            let activity = try await prepare(request, for: requester)
            reply.activity = activity.wire(origin: info.wire, defaultTeamID: configuration.teamID)
            continued = activity
        } catch {
            reply.error = error.wire
            logger.debug("refused to continue \(request.activityID) for \(requester): \(error)")
        }
        self.reply(to: identity, correlationID: envelope.correlationID, .continueReply(reply))
        metrics.answeredContinue(restored: continued != nil)
        if let continued, !request.refresh {
            logger.info("\(continued.activityType) continued by \(requester)")
            var event = WireNodeEvent()
            event.kind = .continued
            event.activityID = continued.id
            event.activityType = continued.activityType
            event.peer = requester.wire
            sendOnBus(topic: Topic.event(continued.activityType), .nodeEvent(event))
            if continued.continuationPolicy == .once {
                continued.invalidateAfterContinuation()
                publish(advertiser.continuedOnce(continued))
            }
            await continued.delegate?.userActivityWasContinued(continued, by: requester)
        }
    }

    /// Checks that an activity may be continued, and brings its state up to date (will-save).
    func prepare(_ request: WireContinueRequest, for requester: NodeInfo) async throws(HandoffError) -> UserActivity {
        let activity: UserActivity
        switch ContinueRequestCheck.check(activityID: request.activityID, activityType: request.activityType, in: advertiser.current, node: info.name, now: Date()) {
        case .answer(let found):
            activity = found
        case .refuse(let error):
            throw error
        case .expired(let found, let error):
            found.detach()
            remove(found, reason: .expired)
            throw error
        }
        // A continue-once activity is claimed before anything awaits, so two requests arriving
        // together cannot both have it.
        let claims = activity.continuationPolicy == .once && !request.refresh
        if claims {
            guard activity.claimContinuation() else {
                throw HandoffError(.alreadyContinued, "the activity may be continued once, and it already was", activityType: activity.activityType)
            }
        }
        do throws(HandoffError) {
            if activity.needsSave, let delegate = activity.delegate {
                await delegate.userActivityWillSave(activity)
                activity.didSave()
            }
            try activity.validate(maxUserInfoSize: configuration.maxUserInfoSize)
            return activity
        } catch {
            if claims { activity.releaseContinuationClaim() }
            throw error
        }
    }
}
