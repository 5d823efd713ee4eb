import Foundation
import HandoffWire
import Logging
import SwiftProtobuf
import Synchronization
import ZeroMQ

extension Node {
    /// What waits for an originator's reply: the suspended `fetch`.
    typealias ReplyWaiter = UnsafeContinuation<Result<ContinueAnswer, HandoffError>, Never>

    // MARK: Continuing side

    /// Registers the continue/restore handler for an activity type, replacing any earlier one.
    ///
    /// - Parameters:
    ///   - activityType: The type the handler restores.
    ///   - teamID: The handler's team: under ``Configuration-swift.struct/teamPolicy`` it gets only
    ///     activities of this team. `nil` means the node's ``Configuration-swift.struct/teamID``.
    ///   - handler: Called with the full activity.
    public func setContinuationHandler(
        forType activityType: String, teamID: String? = nil, _ handler: @escaping ContinuationHandler
    ) {
        continuing.register(handler, forType: activityType, teamID: teamID ?? own.configuration.teamID)
    }

    /// Removes the handler for an activity type.
    public func removeContinuationHandler(forType activityType: String) {
        continuing.removeHandler(forType: activityType)
    }

    /// The activity types this node has continuation handlers for.
    public var handledActivityTypes: [String] { continuing.handlers.keys.sorted() }

    /// Sets the delegate told of continuations on this side. Held weakly.
    public func setDelegate(_ delegate: (any HandoffDelegate)?) {
        self.delegate = delegate
    }

    /// Sets the delegate unless one is set (a plugin runtime yields to the app's own). Held weakly.
    func setDelegateIfNone(_ delegate: any HandoffDelegate) {
        if self.delegate == nil { self.delegate = delegate }
    }

    /// Continues an activity this node knows of, by id.
    ///
    /// - Throws: ``HandoffError`` — ``HandoffError/Code-swift.struct/activityNotFound`` when no such
    ///   activity is known here; otherwise as ``continueActivity(_:)``.
    public func continueActivity(id activityID: String) async throws(HandoffError) -> ContinuationResult {
        guard let entry = follower.known[activityID] else {
            throw HandoffError(.activityNotFound, "no activity with id \(activityID) is known here (\(follower.known.count) known); it may have ended, or this node does not subscribe to its type")
        }
        return try await continueActivity(entry.activity)
    }

    /// The known activity of a type made current or changed last, by its originator's clock
    /// (``DiscoveredActivity/updatedAt``), also when this node heard of them in another order (a
    /// snapshot, a slow link); without that time (older nodes), the one whose newest version this
    /// node heard of last. Versions count per activity, so they are never compared across activities.
    public func newestActivity(ofType activityType: String) -> DiscoveredActivity? {
        follower.known.newest(ofType: activityType)
    }

    /// The activity with id `id`, or (`id` nil or empty) the newest of `activityType`, waiting up to
    /// `timeout` for this node to know one (it may have joined the bus a moment ago).
    public func activity(id: String?, orNewestOf activityType: String, within timeout: Duration) async -> DiscoveredActivity? {
        let deadline = ContinuousClock.now + timeout
        while true {
            let found = if let id, !id.isEmpty { follower.known[id]?.activity } else { newestActivity(ofType: activityType) }
            if let found { return found }
            guard ContinuousClock.now < deadline else { return nil }
            // On the loops' clock: a busy or held pool does not stretch the wait (EventLoops.sleep).
            do { try await EventLoops.sleep(for: .milliseconds(20)) } catch { return nil }
        }
    }

    /// Continues the newest known activity of a type (``newestActivity(ofType:)``).
    public func continueActivity(type activityType: String) async throws(HandoffError) -> ContinuationResult {
        guard let newest = newestActivity(ofType: activityType) else {
            throw HandoffError(.activityNotFound, "no activity of type \(activityType) is known here", activityType: activityType)
        }
        return try await continueActivity(newest)
    }

    /// Continues an activity from its originator, the way an app delegate would:
    /// will-continue(type) → fetch the full activity → the type's continuation handler; on any failure,
    /// did-fail(type, error) and the error is thrown. With no handler for the type but a webpage URL,
    /// returns ``ContinuationResult/webpage(_:)`` instead.
    ///
    /// - Returns: The restored activity, or the webpage to continue at.
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/noHandler``,
    ///   ``HandoffError/Code-swift.struct/declined``, ``HandoffError/Code-swift.struct/connectionUnavailable``
    ///   (the originator is gone), ``HandoffError/Code-swift.struct/remoteApplicationTimedOut`` (no answer within
    ///   ``Configuration-swift.struct/continueTimeout``), ``HandoffError/Code-swift.struct/activityExpired``,
    ///   ``HandoffError/Code-swift.struct/activityInvalidated``, ``HandoffError/Code-swift.struct/activityNotFound``,
    ///   ``HandoffError/Code-swift.struct/userInfoTooLarge``, ``HandoffError/Code-swift.struct/alreadyContinued``,
    ///   ``HandoffError/Code-swift.struct/handoffFailed`` (the handler threw),
    ///   ``HandoffError/Code-swift.struct/streamsNotSupported`` (`wantingStreams`, and the activity does not support them).
    /// - Parameters:
    ///   - wantingStreams: The handler will open continuation streams: the originator refuses at
    ///     once when the activity does not support them, before it is handed over (a continue-once
    ///     activity is not used up, and nothing is restored).
    ///   - traceID: Trace the request (32 hexadecimal digits, ``TraceRequest/newTraceID()``): the
    ///     originator reports when it took it and when it answered, on the bus under "T:" + the id
    ///     (wire.proto, "Tracing"; `handoff continue --trace`), and so for each stream pair opened
    ///     for the continued activity: when it answered the open, and how the pair ended.
    public func continueActivity(
        _ activity: DiscoveredActivity, wantingStreams: Bool = false, traceID: String? = nil
    ) async throws(HandoffError) -> ContinuationResult {
        let activityType = activity.activityType
        let started = ContinuousClock.now
        do throws(HandoffError) {
            guard lifecycle.runState == .running else {
                throw HandoffError(.notRunning, "start the node with run() before continuing activities", activityType: activityType)
            }
            if let delegate, !(await delegate.node(self, willContinueActivityWithType: activityType)) {
                throw HandoffError(.declined, "the delegate declined to continue it", activityType: activityType)
            }
            let registered: ContinuationClient<ReplyWaiter, ContinuationHandler>.Registered
            switch try continuing.plan(activity, date: Date()) {
            case .webpage(let url): return .webpage(url)
            case .fetch(let handler): registered = handler
            }
            var continued = try await fetch(activity, refresh: false, wantStreams: wantingStreams, traceID: traceID)
            continued.traceID = traceID
            try continuing.check(continued, for: registered)
            do {
                try await registered.handler(continued)
            } catch {
                throw HandoffError(.handoffFailed, "the continuation handler failed: \(error)", activityType: activityType, cause: error)
            }
            let latest = follower.known[continued.id]?.activity
            if continuing.held.continued(continued.id, version: continued.version, known: latest?.version, now: .now), let latest {
                startRefresh(latest)
            }
            observability.metrics.continueEnded(succeeded: true, after: .now - started)
            return .restored(continued)
        } catch {
            observability.metrics.continueEnded(succeeded: false, after: .now - started)
            await delegate?.node(self, didFailToContinueActivityWithType: activityType, error: error)
            throw error
        }
    }

    /// Asks the originator for the full activity.
    ///
    /// The request goes out at once when the connection is up: with `ZMQ_IMMEDIATE` the DEALER
    /// takes a message only over a live connection, which is all that waiting for it to be writable
    /// first would learn, at the price of a `ZMQ_EVENTS` reading (a `poll` and a `getpid` in libzmq)
    /// per continue. Only when the DEALER refuses it (no connection yet, or a dropped one) does the
    /// node wait for the connection, as long as `connectTimeout`, and send it once more.
    func fetch(_ activity: DiscoveredActivity, refresh: Bool, wantStreams: Bool = false, traceID: String? = nil) async throws(HandoffError) -> ContinuedActivity {
        let activityType = activity.activityType
        var client = try originClient(activity.continueEndpoint, serverKey: activity.origin.publicKey, activityType: activityType)
        var waitedForConnection = false
        while true {
            var sendRefused = false
            // A loop polls for the reply rather than sleeping (EventLoops.awaitReply).
            let awaited = EventLoops.awaitReply(within: own.configuration.replyPolling)
            let outcome: Result<ContinueAnswer, HandoffError> = await withUnsafeContinuation { waiter in
                let (correlationID, request) = continuing.request(activity, refresh: refresh, wantStreams: wantStreams, endpoint: client.endpoint, waiter: waiter, now: .now)
                let bytes = envelopes.bytes(.continueRequest(request), correlationID: correlationID, traceID: traceID)
                do {
                    guard try client.socket.trySend(bytes) else {
                        sendRefused = true
                        resolve(correlationID, .failure(HandoffError(.connectionUnavailable, "the connection to the originator at \(client.endpoint) dropped before the request could be sent", activityType: activityType)))
                        return
                    }
                    observability.metrics.sent(on: .continuationClient, bytes: bytes.count)
                } catch {
                    resolve(correlationID, .failure(HandoffError(.connectionUnavailable, "could not send to the originator at \(client.endpoint): \(error)", activityType: activityType)))
                    return
                }
            }
            awaited.end()
            if sendRefused {
                switch client.connection.afterRefusedSend(waitedAlready: waitedForConnection, activityType: activityType) {
                case .awaitConnection:
                    client = try await connectedClient(activity.continueEndpoint, serverKey: activity.origin.publicKey, activityType: activityType)
                    waitedForConnection = true
                    continue
                case .fail(let error):
                    throw error
                case .failAsResolved:
                    break
                }
            }
            return try ContinuationClient<ReplyWaiter, ContinuationHandler>.interpret(try outcome.get(), for: activity)
        }
    }

    /// Completes a pending request (first outcome wins).
    func resolve(_ correlationID: UInt64, _ outcome: Result<ContinueAnswer, HandoffError>) {
        if let ended = continuing.end(correlationID, outcome) { resume(ended) }
    }

    /// Resumes whoever waits on a request that ended. The caller's task runs next on this thread
    /// (the receiver waits again at once), not on another one woken for it (EventLoops).
    func resume(_ outcome: ContinuationClient<ReplyWaiter, ContinuationHandler>.Outcome) {
        EventLoops.handingOff { outcome.waiter.resume(returning: outcome.result) }
    }

    /// Resumes whoever waits on the requests that ended (timed out, dropped, shut down).
    func resume(_ outcomes: [ContinuationClient<ReplyWaiter, ContinuationHandler>.Outcome]) {
        for outcome in outcomes { resume(outcome) }
    }

    /// Fails the requests whose originator did not answer by their deadline, and fetches again
    /// the held activities whose did-update fetch failed.
    func expirePending(now: ContinuousClock.Instant) {
        resume(continuing.expire(now: now))
        for id in continuing.held.dueRetries(now: now, knownVersion: { follower.known[$0]?.activity.version }) {
            if let latest = follower.known[id]?.activity { refreshIfHeld(latest) }
        }
    }

    /// Re-fetches an activity this node continued when its originator advertises a newer version.
    func refreshIfHeld(_ activity: DiscoveredActivity) {
        // Most nodes hold nothing: then no lookup of the id and no reading of the clock.
        guard continuing.held.count > 0, continuing.held.beginRefresh(activity.id, advertised: activity.version, now: .now) else { return }
        startRefresh(activity)
    }

    /// Carries out a fetch `continuing.held` began.
    private func startRefresh(_ activity: DiscoveredActivity) {
        spawn {
            await self.refresh(activity)
        }
    }

    func refresh(_ activity: DiscoveredActivity) async {
        let updated: ContinuedActivity
        do {
            updated = try await fetch(activity, refresh: true)
        } catch {
            let retry = continuing.held.refreshFailed(activity.id, with: error.code, now: .now)
            own.logger.debug("could not refresh \(activity.id)\(retry ? " (tried again in a second)" : ""): \(error)")
            return
        }
        if continuing.held.accept(activity.id, fetched: updated.version) {
            await delegate?.node(self, didUpdate: updated)
        }
        let latest = follower.known[activity.id]?.activity
        if continuing.held.refreshEnded(activity.id, known: latest?.version, now: .now), let latest { startRefresh(latest) }
    }
}
