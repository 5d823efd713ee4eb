import Foundation
import HandoffWire
import Testing
@testable import Handoff

/// The continuing side's rules on ``ContinuationClient``, with no socket, task or real clock: what
/// waits is a plain name, and the handlers are names too.
@Suite("Continuation client: whether and how to continue, requests and their ends, replies (no I/O)")
struct ContinuationClientTests {
    typealias Client = ContinuationClient<String, String>
    let start = ContinuousClock.now
    let date = Date(timeIntervalSince1970: 2_000_000_000)
    let origin: WireNodeRef = {
        var node = WireNodeRef()
        node.nodeID = "origin-1"
        return node
    }()

    func made(_ type: String = "org.test.edit", team: String? = nil, webpage: URL? = nil, expires: Date? = nil) throws -> (UserActivity, DiscoveredActivity) {
        let activity = try UserActivity(activityType: type)
        activity.title = "t"
        activity.teamID = team
        activity.webpageURL = webpage
        activity.expirationDate = expires
        let advertised = DiscoveredActivity(wire: activity.advertisement(origin: origin, continueEndpoint: "tcp://o:1", lease: .seconds(6), defaultTeamID: nil))
        return (activity, advertised)
    }

    func reply(_ result: WireContinueReply.OneOf_Result?) -> WireEnvelope {
        var reply = WireContinueReply()
        reply.result = result
        return WireEnvelope(body: .continueReply(reply), sender: origin, sequence: 1)
    }

    /// The code of the HandoffError `body` throws; nil when it throws nothing.
    func code(_ body: () throws -> Any) -> HandoffError.Code? {
        do {
            _ = try body()
            return nil
        } catch {
            return (error as? HandoffError)?.code
        }
    }

    @Test("without a handler for its type: its webpage when it has one, else noHandler")
    func noHandler() throws {
        let client = Client(teamPolicy: .sameTeam, timeout: .seconds(5))
        let url = URL(string: "https://example.org/doc")!
        guard case .webpage(url) = try client.plan(try made(webpage: url).1, date: date) else {
            Issue.record("no webpage fallback")
            return
        }
        let unhandled = try made().1
        #expect(code { try client.plan(unhandled, date: date) } == .noHandler)
    }

    @Test("a handler of another team gets nothing unless the policy trusts that team; the full activity's team is checked again")
    func teams() throws {
        var strict = Client(teamPolicy: .sameTeam, timeout: .seconds(5))
        strict.register("restore-edit", forType: "org.test.edit", teamID: "A")
        let teamB = try made(team: "B").1
        #expect(code { try strict.plan(teamB, date: date) } == .teamMismatch)
        guard case .fetch(let registered) = try strict.plan(try made(team: "A").1, date: date) else {
            Issue.record("team A's activity did not go to team A's handler")
            return
        }
        #expect(registered.handler == "restore-edit")
        // The originator's full answer names another team than its advertisement did.
        let (activity, _) = try made(team: "B")
        let continued = try ContinuedActivity(wire: activity.wire(origin: origin, defaultTeamID: nil), continueEndpoint: "tcp://o:1")
        #expect(code { try strict.check(continued, for: registered) } == .teamMismatch)
        var trusting = Client(teamPolicy: .trusting(["B"]), timeout: .seconds(5))
        trusting.register("restore-edit", forType: "org.test.edit", teamID: "A")
        #expect(code { try trusting.plan(teamB, date: date) } == nil)
    }

    @Test("an activity whose expiration date passed is refused before anything is sent")
    func expired() throws {
        var client = Client(teamPolicy: .sameTeam, timeout: .seconds(5))
        client.register("h", forType: "org.test.edit", teamID: nil)
        let expired = try made(expires: date.addingTimeInterval(-1)).1
        #expect(code { try client.plan(expired, date: date) } == .activityExpired)
        #expect(client.pending.isEmpty)
    }

    @Test("each request has its own correlation id and names the activity and its type; the first outcome wins, a later one or an unknown id finds nothing")
    func firstOutcomeWins() throws {
        var client = Client(teamPolicy: .sameTeam, timeout: .seconds(5))
        let (_, a) = try made()
        let first = client.request(a, refresh: false, endpoint: "tcp://o:1", waiter: "caller-1", now: start)
        let second = client.request(a, refresh: true, endpoint: "tcp://o:1", waiter: "caller-2", now: start)
        #expect(first.correlationID != second.correlationID)
        #expect(first.body.activityID == a.id && first.body.activityType == a.activityType && !first.body.refresh && second.body.refresh)
        #expect(client.end(first.correlationID, .success(.envelope(reply(nil))))?.waiter == "caller-1")
        #expect(client.end(first.correlationID, .success(.envelope(reply(nil)))) == nil)
        #expect(client.end(999, .success(.envelope(reply(nil)))) == nil)
        #expect(client.pending.count == 1)
    }

    @Test("requests past their deadline fail as timed out, soonest first; a dropped connection fails only its endpoint's requests at once; shutdown fails the rest")
    func ends() throws {
        var client = Client(teamPolicy: .sameTeam, timeout: .seconds(5))
        let (_, a) = try made()
        _ = client.request(a, refresh: false, endpoint: "tcp://o:1", waiter: "late", now: start + .seconds(1))
        _ = client.request(a, refresh: false, endpoint: "tcp://o:1", waiter: "early", now: start)
        _ = client.request(a, refresh: false, endpoint: "tcp://other:1", waiter: "other", now: start + .seconds(2))
        _ = client.request(a, refresh: false, endpoint: "tcp://gone:1", waiter: "dropped", now: start + .seconds(2))
        #expect(client.expire(now: start + .milliseconds(4_999)).isEmpty)
        let dropped = client.disconnected(from: "tcp://gone:1")
        #expect(dropped.map(\.waiter) == ["dropped"])
        #expect(code { try dropped[0].result.get() } == .connectionUnavailable)
        let timedOut = client.expire(now: start + .seconds(6))
        #expect(timedOut.map(\.waiter) == ["early", "late"])
        for outcome in timedOut { #expect(code { try outcome.result.get() } == .remoteApplicationTimedOut) }
        let rest = client.failAll(HandoffError(.notRunning, "stopped"))
        #expect(rest.map(\.waiter) == ["other"] && client.pending.isEmpty)
    }

    @Test("a reply is the full activity; or the originator's typed error; another activity's id, no result, an unparseable URL in its userInfo, or not a reply at all is malformed; the same read as the generated envelope or in plain values")
    func replies() throws {
        let (activity, advertised) = try made()
        activity.userInfo = [
            "name": "Ada", "count": 3, "ratio": 0.5, "ok": true, "raw": .bytes(Data([0, 1, 2])),
            "site": .url(URL(string: "https://example.org/a?b=c")!), "at": .date(Date(timeIntervalSince1970: 1_700_000_000.25)),
            "tags": ["a", 2, ["nested": [1, 2]]],
        ]
        activity.requiredUserInfoKeys = ["name", "tags"]
        activity.keywords = ["k1", "k2"]
        let full = activity.wire(origin: origin, defaultTeamID: nil)
        let generated = try Client.interpret(reply(.activity(full)), for: advertised)
        #expect(generated.id == activity.id)
        let read = ContinueAnswer(sentAsBytes: reply(.activity(full)))
        guard case .activity = read else { Issue.record("an activity reply must be read in plain values: \(read)"); return }
        let plain = try Client.interpret(read, for: advertised)
        #expect(plain == generated && plain.userInfo == activity.userInfo && plain.wire == generated.wire)
        var refused = WireError()
        refused.code = HandoffError.Code.alreadyContinued.wire
        refused.message = "once"
        for answer in [ContinueAnswer.envelope(reply(.error(refused))), ContinueAnswer(sentAsBytes: reply(.error(refused)))] {
            #expect(code { try Client.interpret(answer, for: advertised) } == .alreadyContinued)
        }
        let (other, _) = try made()
        var unparseable = full
        var notAURL = WireValue()
        notAURL.urlValue = "http://[not a url"
        unparseable.userInfo["site"] = notAURL
        let malformed: [WireEnvelope] = [
            reply(.activity(other.wire(origin: origin, defaultTeamID: nil))), reply(nil), reply(.activity(unparseable)),
            WireEnvelope(body: .snapshotReply(WireSnapshotReply(count: 1, typePrefix: "x")), sender: origin, sequence: 2),
        ]
        for envelope in malformed {
            #expect(code { try Client.interpret(envelope, for: advertised) } == .malformedMessage)
            #expect(code { try Client.interpret(ContinueAnswer(sentAsBytes: envelope), for: advertised) } == .malformedMessage)
        }
    }
}
