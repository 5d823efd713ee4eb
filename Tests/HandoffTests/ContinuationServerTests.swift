import Foundation
import HandoffWire
import Testing
import ZeroMQ
@testable import Handoff

/// The originating side's continuation rules on ``ContinuationServer``, with no socket.
@Suite("Continuation server: answer or refuse, the continue-once claim, will-save, what follows (no I/O)")
struct ContinuationServerTests {
    let date = Date(timeIntervalSince1970: 2_000_000_000)

    final class Saver: UserActivityDelegate {
        func userActivityWillSave(_ activity: UserActivity) async {}
    }

    func request(_ activity: UserActivity, refresh: Bool = false, wantStreams: Bool = false) -> WireContinueRequest {
        var request = WireContinueRequest()
        request.activityID = activity.id
        request.activityType = activity.activityType
        request.refresh = refresh
        request.wantStreams = wantStreams
        return request
    }

    @Test("a current activity is answered; one not current, of another type, or not eligible is refused with its precise error")
    func answerOrRefuse() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        let hidden = try UserActivity(activityType: "org.test.hidden")
        hidden.isEligibleForHandoff = false
        let all = CurrentActivities.holding(activity, hidden)
        guard case .answer(let answered, claimed: false, save: false) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date) else {
            Issue.record("a current activity was not answered")
            return
        }
        #expect(answered === activity)
        var wrongType = request(activity)
        wrongType.activityType = "org.test.other"
        let refusals: [(WireContinueRequest, HandoffError.Code)] = [
            (request(try UserActivity(activityType: "org.test.gone")), .activityNotFound), (wrongType, .invalidActivityType),
            (request(hidden), .activityNotFound),
        ]
        for (request, code) in refusals {
            guard case .refuse(let error) = ContinuationServer.decide(request, current: all, node: "n", date: date) else {
                Issue.record("\(request.activityID) was not refused")
                continue
            }
            #expect(error.code == code)
        }
    }

    @Test("a continue-once activity is claimed by the first request, before will-save; the second is refused as already continued; a refresh claims nothing")
    func continueOnce() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        activity.continuationPolicy = .once
        let saver = Saver()
        activity.delegate = saver
        activity.needsSave = true
        let all = CurrentActivities.holding(activity)
        guard case .answer(_, claimed: true, save: true) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date) else {
            Issue.record("the first request did not claim it, with will-save to run")
            return
        }
        guard case .refuse(let error) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date) else {
            Issue.record("a second request had it too")
            return
        }
        #expect(error.code == .alreadyContinued)
        guard case .answer(_, claimed: false, _) = ContinuationServer.decide(request(activity, refresh: true), current: all, node: "n", date: date) else {
            Issue.record("a refresh was refused or claimed")
            return
        }
        let follows = ContinuationServer.continued(activity, by: NodeInfo(id: "c", name: "c", host: "h", publicKey: nil), refresh: false)
        #expect(follows?.endsHere == true && follows?.event.kind == .continued && follows?.event.activityType == "org.test.edit")
        #expect(follows?.event.peer.nodeID == "c")
        #expect(ContinuationServer.continued(activity, by: NodeInfo(id: "c", name: "c", host: "h", publicKey: nil), refresh: true) == nil)
    }

    @Test("rule: a request that wants streams of an activity without them is refused with streamsNotSupported before any claim; of one with them, answered")
    func wantStreams() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        activity.continuationPolicy = .once
        let streaming = try UserActivity(activityType: "org.test.list")
        streaming.supportsContinuationStreams = true
        let all = CurrentActivities.holding(activity, streaming)
        guard case .refuse(let error) = ContinuationServer.decide(request(activity, wantStreams: true), current: all, node: "n", date: date) else {
            Issue.record("a request wanting streams was answered with an activity that has none")
            return
        }
        #expect(error.code == .streamsNotSupported)
        // Not claimed: the continue-once activity is still there for a request that wants no streams.
        guard case .answer(_, claimed: true, _) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date) else {
            Issue.record("the refusal used the continue-once activity up")
            return
        }
        guard case .answer(let answered, _, _) = ContinuationServer.decide(request(streaming, wantStreams: true), current: all, node: "n", date: date) else {
            Issue.record("a request wanting streams of an activity with them was refused")
            return
        }
        #expect(answered === streaming)
    }

    @Test("rule: an activity marked as needing a save after its request was decided must be saved before it is sent; without a delegate nothing can save it")
    func markedAfterTheDecision() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        let saver = Saver()
        activity.delegate = saver
        let all = CurrentActivities.holding(activity)
        guard case .answer(let answered, _, save: false) = ContinuationServer.decide(request(activity, refresh: true), current: all, node: "n", date: date) else {
            Issue.record("not answered, or will-save asked for an activity not marked")
            return
        }
        #expect(!ContinuationServer.mustSave(answered))
        activity.userInfo = ["draft": .string("typed, not saved")]
        activity.needsSave = true  // the app's second step, after the decision
        #expect(ContinuationServer.mustSave(answered))
        activity.delegate = nil
        #expect(!ContinuationServer.mustSave(answered))
    }

    @Test("an answer that fails its last check (a required key missing) gives the claim back, so another request may have it")
    func failedAnswerReleasesTheClaim() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        activity.continuationPolicy = .once
        activity.requiredUserInfoKeys = ["draft"]
        let all = CurrentActivities.holding(activity)
        guard case .answer(let answered, let claimed, _) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date) else {
            Issue.record("not answered")
            return
        }
        guard case .failure(let error) = ContinuationServer.finish(answered, claimed: claimed, maxUserInfoSize: 4_096, date: date) else {
            Issue.record("an activity without its required key was handed over")
            return
        }
        #expect(error.code == .missingRequiredUserInfoKey)
        activity.userInfo = ["draft": .string("x")]
        guard case .answer(_, claimed: true, _) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date) else {
            Issue.record("the claim was not given back")
            return
        }
    }

    @Test("an activity past its expiration date is refused as expired and handed back for the node to withdraw")
    func expired() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        activity.expirationDate = date.addingTimeInterval(-1)
        guard case .expired(let found, let error) = ContinuationServer.decide(request(activity), current: CurrentActivities.holding(activity), node: "n", date: date) else {
            Issue.record("an expired activity was not refused as such")
            return
        }
        #expect(found === activity && error.code == .activityExpired)
    }

    @Test("rule: with maxHandOversWaiting requests waiting on the delegate a request is refused (remoteApplicationTimedOut) before its decision, and a continue-once activity is not claimed; one fewer and it is answered")
    func overloadedBeforeTheClaim() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        activity.continuationPolicy = .once
        let all = CurrentActivities.holding(activity)
        let limit = ContinuationServer.maxHandOversWaiting
        guard case .overloaded(let error) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date, handOversWaiting: limit) else {
            Issue.record("a request was decided with \(limit) waiting on the delegate")
            return
        }
        #expect(error.code == .remoteApplicationTimedOut && error.activityType == "org.test.edit")
        #expect(error.message.contains("\(limit) continue requests waiting"))
        guard case .answer(_, claimed: true, _) = ContinuationServer.decide(request(activity), current: all, node: "n", date: date, handOversWaiting: limit - 1) else {
            Issue.record("the overloaded refusal used the continue-once activity up, or one fewer waiting was refused")
            return
        }
    }

    @Test("rule: will-save runs in the first round when decided, again while the activity is marked, at most maxSaveRounds times, and never without a delegate")
    func saveRounds() throws {
        let activity = try UserActivity(activityType: "org.test.edit")
        let saver = Saver()
        activity.delegate = saver
        #expect(ContinuationServer.saveDue(activity, decided: true, rounds: 0))
        #expect(!ContinuationServer.saveDue(activity, decided: false, rounds: 0), "will-save ran for an activity neither decided nor marked")
        activity.didSave()
        #expect(!ContinuationServer.saveDue(activity, decided: true, rounds: 1), "the decision asked for a second round of an activity saved since")
        // An app that marks its activity again at every save: rounds 1 and 2 run, the fourth does not.
        var rounds = 0
        while ContinuationServer.saveDue(activity, decided: true, rounds: rounds) {
            activity.didSave()
            activity.needsSave = true
            rounds += 1
        }
        #expect(rounds == ContinuationServer.maxSaveRounds)
        activity.delegate = nil
        #expect(!ContinuationServer.saveDue(activity, decided: true, rounds: 0), "will-save was due with no delegate to call")
    }

    @Test("rule: a secure node takes the requester to be the key its CURVE handshake authenticated (or none), not the one its envelope claims; an open node takes the envelope's word")
    func requesterIdentity() throws {
        let claimedKey = try CurveKeyPair.generate().publicKey
        let authenticated = try CurveKeyPair.generate().publicKey
        let claimed = NodeInfo(id: "laptop", name: "Laptop", host: "h", publicKey: claimedKey)
        #expect(ContinuationServer.requester(claimed: claimed, authenticatedKey: authenticated, secure: true).publicKey == authenticated)
        #expect(ContinuationServer.requester(claimed: claimed, authenticatedKey: nil, secure: true).publicKey == nil)
        #expect(ContinuationServer.requester(claimed: claimed, authenticatedKey: authenticated, secure: true).id == "laptop")
        #expect(ContinuationServer.requester(claimed: claimed, authenticatedKey: authenticated, secure: false) == claimed)
    }
}

extension ContinuationServerTests {
    @Test("rule: the continuation endpoint takes continue requests and stream frames; anything else is refused as malformed, saying what it was")
    func inboundRouted() {
        var request = WireContinueRequest()
        request.activityID = "a"
        guard case .continueRequest(let routed) = ContinuationServer.route(.continueRequest(request)) else {
            Issue.record("a continue request was not routed as one")
            return
        }
        #expect(routed.activityID == "a")
        var frame = WireStreamFrame()
        frame.streamID = 7
        guard case .streamFrame(let routedFrame) = ContinuationServer.route(.streamFrame(frame)) else {
            Issue.record("a stream frame was not routed as one")
            return
        }
        #expect(routedFrame.streamID == 7)
        guard case .refuse(let error, let noted) = ContinuationServer.route(.advertisement(WireAdvertisement())) else {
            Issue.record("an advertisement was not refused")
            return
        }
        #expect(error.code == .malformedMessage)
        #expect(noted.hasPrefix("a advertisement("), "\(noted)")
        guard case .refuse(let bodiless, let notedBodiless) = ContinuationServer.route(nil) else {
            Issue.record("a bodiless envelope was not refused")
            return
        }
        #expect(bodiless.code == .malformedMessage)
        #expect(notedBodiless == "a bodiless message where continue requests and stream frames go")
    }
}
