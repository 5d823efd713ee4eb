import Foundation
import HandoffWire
import Logging
import ServiceLifecycle
import SwiftProtobuf
import Synchronization
import ZeroMQ

/// The bus broker of a multi-process deployment: an XSUB ⇄ XPUB proxy with a last-value cache.
///
/// Nodes publish to the broker's frontend and subscribe at its backend. Every bus message has two
/// frames: a topic (`"A:" + activityType` for advertisements and withdrawals, `"P:" + nodeID` for
/// node presence) and a serialized ``HandoffWire/WireEnvelope``. The broker forwards every message
/// from the frontend to the backend, frames as they are, without copying them. Without the cache,
/// the publishers are asked for each prefix some subscriber follows, once (``ForwardedInterest``);
/// with it, the frontend subscribes to everything.
///
/// With the last-value cache on, the broker also remembers the newest advertisement of every live
/// activity (kept alive by its origin's presence), and answers a joiner's snapshot subscription
/// with the matching ones, to that joiner alone (wire.proto, "Snapshots"): a node that joins late
/// sees every current activity at once, and nobody else hears them again. To cache what publishers
/// send before anyone subscribes, the broker subscribes its frontend to everything, so all bus
/// traffic reaches it.
///
/// The broker runs on a thread of its own (`BrokerLoop`, named `handoff-broker`) that owns all of
/// its sockets and waits in `zmq_poll`, as libzmq's proxy does. ``stop()`` ends it. ``Broker`` is
/// also a swift-service-lifecycle `Service`
/// for a `ServiceGroup`.
///
/// ```swift
/// let broker = try Broker.start(.init(frontend: "tcp://*:5555", backend: "tcp://*:5556"), context: context)
/// print(broker.counters.messagesIn)
/// await broker.stop()
/// ```
public final class Broker: Sendable {
    /// What the broker has done since it started, as of the moment it was read.
    ///
    /// A message is counted before it is passed on, so once a subscriber has received a message,
    /// the counters include it and everything forwarded before it.
    public struct Counters: Sendable, Hashable {
        /// Messages received from publishers.
        public var messagesIn = 0
        /// Bytes received from publishers (all frames).
        public var bytesIn = 0
        /// Messages handed to the backend for subscribers: forwarded ones plus cache replays. A
        /// message counts once, however many subscribers it reaches.
        public var messagesOut = 0
        /// Bytes handed to the backend (all frames), forwarded and replayed.
        public var bytesOut = 0
        /// Subscription messages seen at the backend (verbose: duplicates included).
        public var subscriptions = 0
        /// Unsubscription messages seen at the backend (libzmq reports one when the last
        /// subscriber of a prefix goes away).
        public var unsubscriptions = 0
        /// Activities in the cache now (expired ones are removed when their lease ends).
        public var cachedActivities = 0
        /// What they take in memory: their frames, and 256 bytes each of bookkeeping.
        public var cachedBytes = 0
        /// Bus messages dropped because their sender is not who it says (secure brokers): its
        /// envelope names another key than its connection's, it speaks for another node, or it is
        /// about an activity of another key.
        public var forged = 0
        /// New activities dropped because their origin has ``Configuration/maxActivitiesPerOrigin``
        /// cached already, or their origin's key ``Configuration/maxActivitiesPerKey``.
        public var overQuota = 0
        /// Subscribers' connections cut off for holding more subscriptions than
        /// ``Configuration/subscriptionBounds`` allows (libzmq then frees all they held).
        public var subscribersCut = 0
        /// Connections cut off for handing the broker more than 8 MiB without finishing a message
        /// (a peer that speaks ZMTP itself can send the frames of one message forever, and libzmq
        /// keeps them all: ``UnfinishedMessageBound``).
        public var unfinishedMessagesCut = 0
        /// Snapshot requests answered (wire.proto, "Snapshots").
        public var snapshots = 0
        /// Of those, answered at once with a `SnapshotReply` alone, whose asker asks again: 64
        /// answers were under way (``SnapshotAnswers``).
        public var snapshotsBusy = 0
        /// Cached advertisements sent in snapshots, each to one subscriber.
        public var snapshotAdvertisements = 0
        /// Messages from publishers that are not a topic frame plus a ``HandoffWire/WireEnvelope``
        /// this build can decode (forwarded all the same, but never cached), and messages of more
        /// than four frames from either side (dropped).
        public var malformed = 0
        /// With an upstream broker (sites): messages passed up, messages received from it, and
        /// those of this site's own nodes it sent back (dropped here).
        public var upstreamOut = 0
        public var upstreamIn = 0
        public var upstreamReturned = 0
        /// With a broker pair upstream: the second copy of an advertisement, come down from the
        /// other broker of the pair (dropped here, so this site's nodes hear it once).
        public var upstreamDuplicates = 0
        /// With sites joined below (their brokers name this one upstream): messages they sent up,
        /// and the copies sent down to them (each to one site that follows its topic).
        public var sitesIn = 0
        public var sitesOut = 0
        /// Site messages dropped for having come round a loop of links (their origin is this
        /// site) or crossed ``SiteName/maxHops`` links, and site subscriptions not taken (past
        /// the bounds of what sites may follow).
        public var siteLoops = 0
        public var siteInterestsRefused = 0
        /// With an upstream broker: subscriptions here followed here but not upstream, past what a
        /// site may follow there (``ForwardedInterest``: 10,000 prefixes, 256 brought by one key).
        public var upstreamInterestsRefused = 0
        /// Subscribers' requests for the publishers (`R:`, `X:`) not passed on: malformed, or past
        /// their key's budget (``PublisherRequests``: ten a second).
        public var requestsRefused = 0
        /// Origins asked to advertise again what the cache lacks (`R:` requests), and the times
        /// every publisher was asked at once (a subscribe-all) because too many lacked at once.
        public var readvertiseRequests = 0
        public var readvertiseEveryone = 0
        /// Of ``readvertiseRequests``: origins asked for copies the cache held and let lapse (their
        /// leases ran out while the origin was stopped or cut off; secure brokers), asked whatever
        /// their key's hold-back.
        public var readvertiseLapsed = 0
        /// CURVE handshakes let in (secure brokers only).
        public var allowedHandshakes = 0
        /// Handshakes refused (secure brokers), by reason: keys not in the account (ZAP), and those
        /// that failed before the account was asked — peers without CURVE, peers that cannot prove
        /// the key they claim. Each is also logged, at most once a minute per peer address and reason.
        public var handshakeRefusals = HandshakeRefusals()

        /// Creates zeroed counters.
        public init() {}
    }

    /// The configuration the broker was started with.
    public let configuration: Configuration
    /// The frontend endpoint as bound, with a wildcard port resolved (e.g. `tcp://127.0.0.1:41234`).
    public let frontendEndpoint: String
    /// The backend endpoint as bound, with a wildcard port resolved.
    public let backendEndpoint: String
    /// The capture endpoint as bound, or `nil` without capture.
    public let captureEndpoint: String?

    private let shared: SharedState
    /// The loop's task: cancelling it stops the broker; it ends once every socket is closed.
    private let loop: Task<Void, Never>
    /// The context's ZAP handler, when secure.
    private let zap: ZAPHandler?
    /// The ZAP domain of the broker's sockets.
    static let zapDomain = "handoff.broker"

    private init(
        configuration: Configuration, endpoints: BoundEndpoints, loop: Task<Void, Never>, shared: SharedState, zap: ZAPHandler?
    ) {
        self.zap = zap
        self.configuration = configuration
        frontendEndpoint = endpoints.frontend
        backendEndpoint = endpoints.backend
        captureEndpoint = endpoints.capture
        self.loop = loop
        self.shared = shared
    }

    /// A broker released without ``stop()`` stops all the same, without waiting.
    deinit {
        loop.cancel()
    }

    /// Binds the broker's sockets and starts forwarding in a task of its own.
    ///
    /// Every socket is bound before this returns, so a taken port or a bad endpoint fails here.
    ///
    /// - Parameters:
    ///   - configuration: Endpoints and cache settings.
    ///   - context: The context to make the sockets in.
    /// - Returns: The running broker.
    /// - Throws: ``HandoffError`` (``HandoffError/Code-swift.struct/invalidConfiguration``): a
    ///   configuration value out of range, endpoints beyond loopback without security, or a socket
    ///   that cannot be bound — then its ``HandoffError/cause`` is the ``ZeroMQ/ZMQError``
    ///   (`addressInUse`, `protocolNotSupported`, `addressNotAvailable`, `invalidArgument` for a
    ///   malformed endpoint, `contextTerminated`). When it throws, every socket it opened is closed.
    public static func start(_ configuration: Configuration = Configuration(), context: Context) throws(HandoffError) -> Broker {
        try start(configuration, context: context, onLoopExit: nil)
    }

    /// ``start(_:context:)`` with a hook called last, once the sockets are closed: when the loop ends,
    /// or before `start` throws (for tests).
    static func start(
        _ configuration: Configuration, context: Context, onLoopExit: (@Sendable () -> Void)?
    ) throws(HandoffError) -> Broker {
        // An entry is two frames (topic and envelope), each up to the largest.
        let largestEntry = 2 * WireLimits.maxBusFrame + LastValueCache.entryOverhead
        guard configuration.cacheBytes >= largestEntry else {
            throw HandoffError(.invalidConfiguration, "the broker's cacheBytes is \(configuration.cacheBytes): it must hold at least one entry of the largest frames, \(largestEntry) bytes")
        }
        guard configuration.cacheCapacity >= 1 else {
            throw HandoffError(.invalidConfiguration, "the broker's cacheCapacity is \(configuration.cacheCapacity): it must be at least 1")
        }
        guard configuration.maxActivitiesPerOrigin >= 1, configuration.effectiveMaxActivitiesPerKey >= 1 else {
            throw HandoffError(.invalidConfiguration, "the broker's maxActivitiesPerOrigin is \(configuration.maxActivitiesPerOrigin) and maxActivitiesPerKey \(configuration.effectiveMaxActivitiesPerKey): each must be at least 1")
        }
        guard configuration.defaultLease > .zero else {
            throw HandoffError(.invalidConfiguration, "the broker's defaultLease is \(configuration.defaultLease): it must be more than zero")
        }
        guard configuration.highWaterMark >= 0 else {
            throw HandoffError(.invalidConfiguration, "the broker's highWaterMark is \(configuration.highWaterMark): it must not be negative")
        }
        guard configuration.publisherQueue >= 0 else {
            throw HandoffError(.invalidConfiguration, "the broker's publisherQueue is \(configuration.publisherQueue): it must not be negative")
        }
        guard configuration.viewEndpoint.map({ $0.hasPrefix("inproc://") }) ?? true else {
            throw HandoffError(.invalidConfiguration, "the broker's viewEndpoint is \(configuration.viewEndpoint!): it must be inproc:// (it skips CURVE, so it must not leave the process)")
        }
        try Security.requireSecurity(
            for: configuration.endpoints, security: configuration.security,
            allowInsecure: configuration.allowInsecure, what: "the broker")
        guard configuration.upstreams.isEmpty || configuration.security.map({ $0.brokerKey != nil }) ?? true else {
            throw HandoffError(.invalidConfiguration, "a broker that joins an upstream broker over CURVE needs the upstream's public key (Security.brokerKey; handoff broker --broker-key)")
        }
        guard configuration.relayKeys.isEmpty || configuration.security != nil else {
            throw HandoffError(.invalidConfiguration, "relay keys name site brokers' CURVE keys: the broker needs CURVE (a key pair) to have any")
        }
        guard configuration.upstreams.isEmpty || configuration.lastValueCache else {
            throw HandoffError(.invalidConfiguration, "a broker that joins an upstream broker needs its cache (its site's snapshots hold every site's activities)")
        }
        var secureZAP: ZAPHandler?
        if let security = configuration.security {
            var logger = Logger(label: "handoff.broker")
            logger[metadataKey: "broker"] = "\(configuration.frontend)"
            let handler: ZAPHandler
            do { handler = try ZAPHandler.shared(for: context) } catch {
                throw HandoffError(.invalidConfiguration, "the broker cannot start its authentication handler (ZAP): \(error)", cause: error)
            }
            handler.setPolicy(forDomain: Self.zapDomain, security.admitting(configuration.relayKeys).zapPolicy(logger: logger, what: "the broker"))
            secureZAP = handler
        }
        let zap = secureZAP
        let shared = SharedState()
        let loop: BrokerLoop
        do throws(ZMQError) {
            loop = try BrokerLoop(configuration, context: context, shared: shared, zap: zap)
        } catch {
            onLoopExit?()
            throw HandoffError(.invalidConfiguration, "the broker cannot open its sockets (frontend \(configuration.frontend), backend \(configuration.backend)\(configuration.capture.map { ", capture \($0)" } ?? "")): \(error)", cause: error)
        }
        let endpoints = loop.endpoints
        loop.start {
            onLoopExit?()
            shared.running.store(false, ordering: .releasing)
        }
        // The handle's task: cancelling it stops the loop's thread; it ends once the thread has.
        let task = Task {
            await withTaskCancellationHandler {
                await loop.ended()
            } onCancel: {
                loop.requestStop()
            }
        }
        return Broker(configuration: configuration, endpoints: endpoints, loop: task, shared: shared, zap: zap)
    }

    /// Runs a broker for the duration of `body`: starts it, hands it to `body`, and stops it after,
    /// also when `body` throws.
    public static func withRunning<Result>(
        _ configuration: Configuration = Configuration(),
        context: Context,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (Broker) async throws -> Result
    ) async throws -> Result {
        let broker = try start(configuration, context: context)
        do {
            let result = try await body(broker)
            await broker.stop()
            return result
        } catch {
            await broker.stop()
            throw error
        }
    }

    /// A snapshot of the broker's counters.
    public var counters: Counters {
        var counters = shared.counters.withLock { $0 }
        if let zap {
            let handshakes = zap.counters(forDomain: Self.zapDomain)
            counters.allowedHandshakes = handshakes.allowed
            counters.handshakeRefusals.keyNotInAccount = handshakes.refused
        }
        return counters
    }

    /// Replaces the account — the public keys allowed in — without a restart: handshakes from now
    /// on are checked against `authorizedKeys` (the broker's own key is always allowed). Connections
    /// already made stay; a node refused before gets in at its next retry.
    ///
    /// - Throws: ``HandoffError`` (``HandoffError/Code-swift.struct/invalidConfiguration``) when the
    ///   broker runs without CURVE and so has no account.
    public func updateAccount(_ authorizedKeys: Set<CurveKey>) throws(HandoffError) {
        guard let zap, var security = configuration.security else {
            throw HandoffError(.invalidConfiguration, "the broker runs without CURVE: it has no account to update")
        }
        security.authorizedKeys = authorizedKeys
        var logger = Logger(label: "handoff.broker")
        logger[metadataKey: "broker"] = "\(configuration.frontend)"
        zap.setPolicy(forDomain: Self.zapDomain, security.admitting(configuration.relayKeys).zapPolicy(logger: logger, what: "the broker"))
    }

    /// Whether the broker is still forwarding (false after ``stop()``, or after the context was
    /// shut down).
    public var isRunning: Bool {
        shared.running.load(ordering: .acquiring)
    }

    /// The id of the thread it forwards on (`gettid`), once that runs: for tests that see it end.
    var threadID: Int32? {
        let id = shared.threadID.load(ordering: .acquiring)
        return id == 0 ? nil : id
    }

    /// Stops the broker: cancels its task, and returns once it has closed every socket (so that its
    /// ports can be bound again).
    ///
    /// Safe to call more than once, from any task; later calls just wait for the first to finish.
    public func stop() async {
        loop.cancel()
        await loop.value
    }
}

// MARK: - Service

extension Broker: Service {
    /// Keeps the broker running until graceful shutdown or task cancellation, then stops it.
    ///
    /// The broker is already forwarding when ``start(_:context:)`` returns; `run()` only ties its
    /// lifetime to a `ServiceGroup` or a task.
    ///
    /// - Throws: The ``ZeroMQ/ZMQError`` that ended the broker's loop early (for instance
    ///   `contextTerminated` when the context was shut down under it).
    public func run() async throws {
        await withTaskCancellationOrGracefulShutdownHandler {
            await self.loop.value
        } onCancelOrGracefulShutdown: {
            self.loop.cancel()
        }
        await stop()
        if let failure = shared.failure.withLock({ $0 }) {
            throw failure
        }
    }
}
