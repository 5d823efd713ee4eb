import Foundation
import HandoffWire
import ZeroMQ

/// The originating side of continuation, deciding with no I/O: whether a continue request is
/// answered with the activity or refused with a precise error, the continue-once claim (taken
/// before anything awaits, so two requests arriving together cannot both have it), when will-save
/// must run first, and what follows an answer (the bus hears who continued it; a continue-once
/// activity is withdrawn). The node carries out each step: it calls will-save when told, sends
/// the reply, publishes. Tested without sockets (ContinuationServerTests); the simulator drives
/// the same machine.
enum ContinuationServer {
    /// The most continue requests waiting on the application's delegate at once (will-save,
    /// was-continued): each waits in a task of its own, and a peer asking faster than the delegate
    /// returns would otherwise make tasks without end.
    static let maxHandOversWaiting = 256

    /// The most will-save rounds before one reply: an app that marks its activity as needing a save
    /// again at every save does not hold the reply for ever.
    static let maxSaveRounds = 3

    /// What the continuation endpoint does with an envelope it received: wire.proto sends continue
    /// requests and stream frames there, and nothing else.
    enum Inbound {
        case continueRequest(WireContinueRequest)
        case streamFrame(WireStreamFrame)
        /// Anything else: noted as malformed (`noted` says what it was) and answered with this
        /// error (`malformedMessage`), so that a peer speaking another version learns why.
        case refuse(HandoffError, noted: String)
    }

    /// Where an envelope's body goes (``Inbound``).
    static func route(_ body: WireEnvelope.OneOf_Body?) -> Inbound {
        switch body {
        case .continueRequest(let request): .continueRequest(request)
        case .streamFrame(let frame): .streamFrame(frame)
        default:
            .refuse(
                HandoffError(.malformedMessage, "this endpoint answers continue requests only"),
                noted: "a \(body.map { "\($0)".prefix(40) } ?? "bodiless") message where continue requests and stream frames go")
        }
    }

    /// What to do with a request, as far as is decided before anything awaits.
    enum Decision {
        /// Refuse with this error.
        case refuse(HandoffError)
        /// Refuse with this error (`remoteApplicationTimedOut`): ``maxHandOversWaiting`` requests
        /// wait on the application's delegate already. Decided before anything else, so that no
        /// continue-once claim is taken for a request that cannot be answered now.
        case overloaded(HandoffError)
        /// Its expiration date passed: the node lets it go, withdraws it, and refuses.
        case expired(UserActivity, HandoffError)
        /// Answer with this activity: first will-save when `save` (then ``finish(_:claimed:maxUserInfoSize:date:)``).
        case answer(UserActivity, claimed: Bool, save: Bool)
    }

    /// Decides on `request` against the node's current activities (claiming a continue-once one),
    /// while `handOversWaiting` earlier answers wait on the application's delegate.
    static func decide(
        _ request: WireContinueRequest, current: CurrentActivities, node: String, date: Date, handOversWaiting: Int = 0
    ) -> Decision {
        guard handOversWaiting < maxHandOversWaiting else {
            return .overloaded(HandoffError(
                .remoteApplicationTimedOut, "\(node) has \(handOversWaiting) continue requests waiting on its application's delegate; try again later",
                activityType: request.activityType))
        }
        let activity: UserActivity
        switch ContinueRequestCheck.check(activityID: request.activityID, activityType: request.activityType, in: current, node: node, now: date) {
        case .answer(let found): activity = found
        case .refuse(let error): return .refuse(error)
        case .expired(let found, let error): return .expired(found, error)
        }
        // Refused before any claim: a continue-once activity is not used up by a request that
        // could not have had what it asked for (wire.proto, ContinueRequest.want_streams).
        if request.wantStreams, !activity.supportsContinuationStreams {
            return .refuse(HandoffError(.streamsNotSupported, "the request wants continuation streams, and the activity does not support them", activityType: activity.activityType))
        }
        // A continue-once activity is claimed now, before will-save awaits. A refresh (did-update
        // of a continuation already made) claims nothing.
        let claims = activity.continuationPolicy == .once && !request.refresh
        if claims, !activity.claimContinuation() {
            return .refuse(HandoffError(.alreadyContinued, "the activity may be continued once, and it already was", activityType: activity.activityType))
        }
        return .answer(activity, claimed: claims, save: mustSave(activity))
    }

    /// Whether will-save must run before `activity` is sent: it is marked as needing a save and
    /// has a delegate to save it. Asked again once the decision is carried out: an app that changes
    /// the activity and then marks it (two steps) may have a request decided between them, and its
    /// unsaved state must not go out as the newest version (the continuing node would not ask again).
    static func mustSave(_ activity: UserActivity) -> Bool {
        activity.needsSave && activity.delegate != nil
    }

    /// Whether will-save runs (once more) before the reply, after `rounds` of it: in the first round
    /// when the decision said so (``Decision/answer(_:claimed:save:)``), in any round while the
    /// activity is marked as needing one (``mustSave(_:)``), never past ``maxSaveRounds`` or with no
    /// delegate to call.
    static func saveDue(_ activity: UserActivity, decided: Bool, rounds: Int) -> Bool {
        guard rounds < maxSaveRounds, activity.delegate != nil else { return false }
        return (rounds == 0 && decided) || mustSave(activity)
    }

    /// Who asks: secure, the node its CURVE key authenticated (the ZAP handler's `User-Id`),
    /// whatever node the envelope claims it is, and no key when none was authenticated; otherwise
    /// the node the envelope names.
    static func requester(claimed: NodeInfo, authenticatedKey: CurveKey?, secure: Bool) -> NodeInfo {
        guard secure else { return claimed }
        return NodeInfo(id: claimed.id, name: claimed.name, host: claimed.host, publicKey: authenticatedKey)
    }

    /// After will-save (when it ran): the activity as it will be sent, or why not (its claim is
    /// given back then, so that another request may have it).
    static func finish(_ activity: UserActivity, claimed: Bool, maxUserInfoSize: Int, date: Date) -> Result<UserActivity, HandoffError> {
        do throws(HandoffError) {
            try activity.validate(maxUserInfoSize: maxUserInfoSize, now: date)
            return .success(activity)
        } catch {
            if claimed { activity.releaseContinuationClaim() }
            return .failure(error)
        }
    }

    /// What follows an answer that handed the activity over (not a refresh): the node event the
    /// bus hears (monitors), and whether the activity is continued once and so ends here.
    static func continued(_ activity: UserActivity, by requester: NodeInfo, refresh: Bool) -> HandedOver? {
        guard !refresh else { return nil }
        return HandedOver(activity: activity, requester: requester, endsHere: activity.continuationPolicy == .once)
    }

    /// An activity handed over to a continuing node (``continued(_:by:refresh:)``).
    struct HandedOver {
        let activity: UserActivity
        let requester: NodeInfo
        /// It was continued once: it ends here.
        let endsHere: Bool

        /// The node event the bus hears: built only when it goes, since a peer continuing in a loop
        /// is past its budget (``PeerEventBudget``) on all but a few, and the event and its peer's
        /// wire form were a tenth of the answering loop's CPU per continue.
        var event: WireNodeEvent {
            var event = WireNodeEvent()
            event.kind = .continued
            event.activityID = activity.id
            event.activityType = activity.activityType
            event.peer = requester.wire
            return event
        }
    }
}
