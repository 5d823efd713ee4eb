import Foundation
import HandoffWire

/// The continuing side of continuation, deciding with no I/O: whether and how an activity may be
/// continued here (a handler of its team, or its webpage), the requests that wait for their
/// originators (correlation ids, deadlines, drops), what an originator's reply means, and the
/// activities held for did-update. Generic over what waits for a reply, so that it is tested
/// without tasks or sockets (ContinuationClientTests); the node suspends the caller, sends the
/// request it is handed, and resumes whoever this says with what it says.
struct ContinuationClient<Waiter, Handler> {
    /// A restore handler with its team.
    struct Registered {
        let teamID: String?
        let handler: Handler
    }

    /// How to continue an activity.
    enum Plan {
        /// Fetch it from its originator and hand it to this handler.
        case fetch(Registered)
        /// No handler here, but a webpage to continue at.
        case webpage(URL)
    }

    /// A request ended: whom to resume, with what.
    struct Outcome {
        let waiter: Waiter
        let result: Result<ContinueAnswer, HandoffError>
    }

    let teamPolicy: Node.Configuration.TeamPolicy
    let timeout: Duration
    private(set) var handlers: [String: Registered] = [:]
    private(set) var pending = PendingRequests<Waiter>()
    /// Activities continued here and still on the bus, for did-update.
    var held = HeldActivities()
    private var lastCorrelation: UInt64 = 0

    init(teamPolicy: Node.Configuration.TeamPolicy, timeout: Duration) {
        self.teamPolicy = teamPolicy
        self.timeout = timeout
    }

    // MARK: Handlers

    mutating func register(_ handler: Handler, forType activityType: String, teamID: String?) {
        handlers[activityType] = Registered(teamID: teamID, handler: handler)
    }

    mutating func removeHandler(forType activityType: String) {
        handlers[activityType] = nil
    }

    /// Whether `activity` may be continued here now, and how: its type's handler, of a team the
    /// policy lets it go to, or else its webpage; never once its expiration date passed.
    func plan(_ activity: DiscoveredActivity, date: Date) throws(HandoffError) -> Plan {
        let activityType = activity.activityType
        guard let registered = handlers[activityType] else {
            if let url = activity.webpageURL { return .webpage(url) }
            throw HandoffError(.noHandler, "this node has no continuation handler for \(activityType), and the activity has no webpage URL to fall back to", activityType: activityType)
        }
        guard teamPolicy.allows(activityTeam: activity.teamID, handlerTeam: registered.teamID) else {
            throw HandoffError(.teamMismatch, "the activity belongs to \(Self.teamName(activity.teamID)) but this node's handler for \(activityType) belongs to \(Self.teamName(registered.teamID)); activities go only to handlers of their own team unless the team policy trusts it", activityType: activityType)
        }
        if let expiration = activity.expirationDate, expiration <= date {
            throw HandoffError(.activityExpired, "the activity expired at \(expiration.formatted(.iso8601))", activityType: activityType)
        }
        return .fetch(registered)
    }

    /// The full activity is authoritative: its team is checked again before it is handed on.
    func check(_ continued: ContinuedActivity, for registered: Registered) throws(HandoffError) {
        guard teamPolicy.allows(activityTeam: continued.teamID, handlerTeam: registered.teamID) else {
            throw HandoffError(.teamMismatch, "the continued activity belongs to \(Self.teamName(continued.teamID)) but this node's handler for \(continued.activityType) belongs to \(Self.teamName(registered.teamID))", activityType: continued.activityType)
        }
    }

    static func teamName(_ teamID: String?) -> String {
        teamID.map { "team \"\($0)\"" } ?? "no team"
    }

    // MARK: Requests

    /// A request for `activity` to its originator at `endpoint`, waited for by `waiter` until the
    /// timeout: its correlation id and what to send. `wantStreams`: refused unless the activity
    /// supports continuation streams.
    mutating func request(
        _ activity: DiscoveredActivity, refresh: Bool, wantStreams: Bool = false, endpoint: String, waiter: Waiter, now: ContinuousClock.Instant
    ) -> (correlationID: UInt64, body: WireContinueRequest) {
        lastCorrelation += 1
        var request = WireContinueRequest()
        request.activityID = activity.id
        request.activityType = activity.activityType
        request.refresh = refresh
        request.wantStreams = wantStreams
        pending.add(lastCorrelation, .init(waiter: waiter, endpoint: endpoint, activityType: activity.activityType, deadline: now + timeout))
        return (lastCorrelation, request)
    }

    /// A request ends with `result` (a reply, or a failure to send): the first outcome wins, a
    /// later one for the same id (or a reply nobody waits for) finds nothing.
    mutating func end(_ correlationID: UInt64, _ result: Result<ContinueAnswer, HandoffError>) -> Outcome? {
        pending.remove(correlationID).map { Outcome(waiter: $0.waiter, result: result) }
    }

    /// The requests whose originator did not answer by their deadline.
    mutating func expire(now: ContinuousClock.Instant) -> [Outcome] {
        pending.expired(at: now).compactMap { id in
            guard let request = pending.request(id) else { return nil }
            return end(id, .failure(HandoffError(.remoteApplicationTimedOut, "the originator at \(request.endpoint) did not answer within \(timeout)", activityType: request.activityType)))
        }
    }

    /// The connection to `endpoint` dropped: its requests fail now rather than time out.
    mutating func disconnected(from endpoint: String) -> [Outcome] {
        pending.ids(to: endpoint).compactMap {
            end($0, .failure(HandoffError(.connectionUnavailable, "the originator at \(endpoint) disconnected before answering")))
        }
    }

    /// The node stops: every request fails.
    mutating func failAll(_ error: HandoffError) -> [Outcome] {
        pending.ids.compactMap { end($0, .failure(error)) }
    }

    /// What an originator's reply to a request for `activity` means: the full activity, or the
    /// typed error it sent, or malformed when it is neither or names another activity.
    static func interpret(_ answer: ContinueAnswer, for activity: DiscoveredActivity) throws(HandoffError) -> ContinuedActivity {
        switch answer {
        case .activity(let plain):
            guard plain.activityID == activity.id else {
                throw HandoffError(.malformedMessage, "the originator answered with activity \(plain.activityID), not \(activity.id)", activityType: activity.activityType)
            }
            return try ContinuedActivity(plain: plain, continueEndpoint: activity.continueEndpoint)
        case .envelope(let envelope):
            return try interpret(envelope, for: activity)
        }
    }

    /// ``interpret(_:for:)-(ContinueAnswer,_)`` for a reply read as the generated envelope.
    static func interpret(_ envelope: WireEnvelope, for activity: DiscoveredActivity) throws(HandoffError) -> ContinuedActivity {
        let activityType = activity.activityType
        guard case .continueReply(let reply) = envelope.body else {
            throw HandoffError(.malformedMessage, "the originator answered with something other than a continue reply", activityType: activityType)
        }
        switch reply.result {
        case .activity(let wire):
            guard wire.activityID == activity.id else {
                throw HandoffError(.malformedMessage, "the originator answered with activity \(wire.activityID), not \(activity.id)", activityType: activityType)
            }
            return try ContinuedActivity(wire: wire, continueEndpoint: activity.continueEndpoint)
        case .error(let error):
            throw HandoffError(wire: error, activityType: activityType)
        case nil:
            throw HandoffError(.malformedMessage, "the originator's reply holds neither an activity nor an error", activityType: activityType)
        }
    }
}

/// An originator's answer as the continuing node's receiver read it (``WireReplyEnvelope``).
/// Indirect: it passes from the receiver through the pending request's outcome to the waiting
/// caller, and inline, each step copied the whole activity (a retain for every string in it).
indirect enum ContinueAnswer: Sendable {
    /// A reply holding an activity, read in plain values.
    case activity(WirePlainActivity)
    /// Any other message, as the generated envelope: an error reply, or a reply the plain reader
    /// left to the generated one.
    case envelope(WireEnvelope)
}
