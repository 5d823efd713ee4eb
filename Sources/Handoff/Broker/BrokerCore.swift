import Foundation
import HandoffWire
import ZeroMQ

/// What a broker decides, with no socket and no clock of its own: which bus message is forwarded,
/// cached, refused or answered, and what is counted. The loop (``BrokerLoop``) receives, passes
/// each message and the time in, and carries out the verdict.
///
/// Per message it reads only what the contract asks a broker for (wire.proto, "Broker"): the
/// sender, activity id, version and lease of the envelope in place (``WireBusSummary``), the sender
/// check against the connection's key, the last-value cache (which keeps a copy of the envelope).
struct BrokerCore {
    /// What to do with a publisher's message.
    enum PublisherVerdict: Equatable {
        /// Forward it to the subscribers (and the capture); first ask `askToReadvertise`, when set,
        /// to advertise again what the cache lost (wire.proto, "R:").
        case forward(askToReadvertise: String?, trace: Trace? = nil)
        /// Drop it: its sender is not who it says, or it publishes where only the broker may.
        case forged(reason: String)
        /// Drop it: a new activity of an origin that has its quota cached already.
        case overQuota(activityID: String, origin: String)
        /// Drop it: a new activity of a key that has its quota cached already, over its nodes.
        case overKeyQuota(activityID: String, key: [UInt8])
        /// Drop it: it names an activity or node past the contract's lengths (``WireLimits/fitsBus``).
        case pastLengths(reason: String)
    }

    /// A traced message (wire.proto, "Tracing"): the loop reports its hops.
    struct Trace: Equatable {
        var traceID: String
        var activityID: String
        /// Whether the cache stored it (an advertisement, with the cache on).
        var cached: Bool
    }

    /// What to do with a subscriber's message (a subscription, or anything else a SUB sends).
    enum SubscriberVerdict: Equatable {
        /// Send this (un)subscription to the publishers (only without the cache: with it the
        /// frontend subscribes to everything, so publishers hear nothing of subscribers): a
        /// prefix's first subscription or last withdrawal (``ForwardedInterest``).
        case forwardToPublishers([UInt8])
        /// Without the cache, past the bounds of what is forwarded: subscribe to everything at
        /// the publishers, as with the cache (once; nothing is forwarded after it).
        case publishersSendEverything
        /// A snapshot request (wire.proto, "Snapshots"): answered to that subscriber alone.
        case answerSnapshot(topic: [UInt8], typePrefix: String)
        /// Nothing more than the capture copy.
        case keep
        /// A request for the publishers (``PublisherRequests``): subscribed and withdrawn at once
        /// on the frontend, and up each upstream link.
        case passRequest(topic: [UInt8])
    }

    let cacheEnabled: Bool
    /// Whether the keys messages name were checked against their connections' (a secure broker):
    /// only then may a key be held back (``ReadvertiseRequests``).
    let keysChecked: Bool
    /// Whether this broker joins an upstream broker (its site's bus joins a wider one).
    var upstream: Bool { upstreams > 0 }
    /// How many upstream brokers it joins (two: a pair, each sending every message down).
    let upstreams: Int
    /// This broker's site on the links between sites (wire.proto, "Sites").
    let site: SiteName
    /// What the sites joined below this broker follow (internal for BrokerCore+Sites.swift).
    var siteInterests = SiteInterests()
    /// Subscribers' requests for the publishers, within their budget.
    private var publisherRequests = PublisherRequests()
    /// What this site asks of its upstreams.
    var upstreamInterest: ForwardedInterest
    /// Without the cache: what the publishers are asked to send, whether, past its bounds, they
    /// were asked for everything, and when a further subscriber to everything last had them
    /// advertise everything again.
    private var publisherInterest = ForwardedInterest(.publishers)
    private(set) var publishersSendEverything = false
    private var lastEveryoneAgain: ContinuousClock.Instant?
    static let everyoneAgainInterval = Duration.seconds(10)
    private(set) var cache: LastValueCache
    /// With an upstream: the nodes heard on this broker's own frontend lately, whose messages
    /// coming back from upstream are this site's own, returned.
    var localOrigins = RecentNames<String>(memory: .seconds(120), capacity: 100_000)
    /// With an upstream: which of its subscriptions pass to this site's publishers, and when.
    var upstreamSubscriptions = UpstreamSubscriptionGate()
    /// With an upstream: the subscribe-alls from above passed on, by their tokens.
    var upstreamCascades = UpstreamCascades()
    /// With a pair upstream: presences and withdrawals taken from it lately (the other's copy).
    var recentCopies = RecentNames<Int>(memory: .seconds(10), capacity: 100_000)
    private(set) var readvertiseRequests = ReadvertiseRequests()
    /// Set when so many origins lack at once that every publisher is asked (a subscribe-all); the
    /// loop sends it (``takeReadvertiseEveryone()``).
    private var readvertiseEveryoneDue = false
    /// What it counted (internal for the upstream rules, BrokerCore+Upstream.swift).
    var counted = Broker.Counters()
    /// Snapshot requests being answered, a slice each round of the loop.
    var snapshotAnswers: SnapshotAnswers
    /// Traced messages reported lately (``TraceRequestLimit``).
    private var tracesReported = TraceRequestLimit()
    /// The broker's own envelopes (snapshot replies), as a node builds its own.
    private var envelopes: EnvelopeBuilder

    init(
        cacheEnabled: Bool, cache: LastValueCache, sender: WireNodeRef, upstreams: Int = 0, site: SiteName = .random(),
        snapshotSliceSize: Int = 256, keysChecked: Bool = false
    ) {
        self.cacheEnabled = cacheEnabled
        self.keysChecked = keysChecked
        snapshotAnswers = SnapshotAnswers(sliceSize: snapshotSliceSize)
        self.upstreams = upstreams
        self.site = site
        upstreamInterest = ForwardedInterest(.upstream(site))
        self.cache = cache
        envelopes = EnvelopeBuilder(sender: sender)
    }

    /// The counters, with the cache's size as of now.
    var counters: Broker.Counters {
        var counters = counted
        counters.cachedActivities = cache.count
        counters.cachedBytes = cache.bytes
        return counters
    }

    /// When the cache's earliest lease ends, if anything is cached.
    var nextExpiry: ContinuousClock.Instant? { cache.nextExpiry }

    /// A publisher's message (topic, envelope), counted as it is decided.
    ///
    /// - Parameter connectionKey: The CURVE key of the connection it came on; `nil` without CURVE
    ///   (nothing can be checked), empty when the message has no single envelope to check.
    /// - Parameter fromSite: The site whose broker sent it up (the hop's `via`, which for a site
    ///   two levels down is the middle one: the one that asks this broker for snapshots).
    mutating func publisherMessage(
        _ frames: some MessageFrames, connectionKey: [UInt8]?, fromSite: String? = nil, now: ContinuousClock.Instant
    ) -> PublisherVerdict {
        let size = frames.totalSize
        counted.messagesIn += 1
        counted.bytesIn += size
        let content = BrokerBusContent(frames)
        if let reason = content.pastContractLengths {
            counted.malformed += 1
            return .pastLengths(reason: reason)
        }
        // The activity looked up once, for the sender check and the cache (a cache that is off
        // holds nothing to look up).
        // (Statements, not closures: a closure reading `cache` here copied the whole cache.)
        var lookup: LastValueCache.Lookup?
        if cacheEnabled, let id = content.activityIDRange { lookup = cache.lookUp(id, inEnvelopeOf: frames) }
        var ownerKey: [UInt8]?
        if let lookup { ownerKey = cache.originKey(of: lookup) }
        if let forgery = forgery(content, connectionKey: connectionKey, ownerKey: ownerKey) {
            counted.forged += 1
            return .forged(reason: forgery)
        }
        // (Upstream only: no other broker needs to know which origins are its own.)
        if upstream, let origin = content.originID { localOrigins.heard(origin, now: now) }
        let ask: String?, stored: Bool
        switch take(content, now: now, site: fromSite, lookup: lookup) {
        case .overQuota(let activityID, let origin):
            counted.overQuota += 1
            return .overQuota(activityID: activityID, origin: origin)
        case .overKeyQuota(let activityID, let key):
            counted.overQuota += 1
            return .overKeyQuota(activityID: activityID, key: key)
        case .taken(let askToReadvertise, let advertisementStored):
            (ask, stored) = (askToReadvertise, advertisementStored)
        }
        if content.isMalformed { counted.malformed += 1 }
        counted.messagesOut += 1
        counted.bytesOut += size
        if upstream { counted.upstreamOut += 1 }
        return .forward(askToReadvertise: ask, trace: trace(of: content, stored: stored, now: now))
    }

    enum Taken {
        /// `stored`: an advertisement the cache now holds (not a stale, expired or uncached one).
        case taken(askToReadvertise: String?, stored: Bool = false)
        case overQuota(activityID: String, origin: String)
        case overKeyQuota(activityID: String, key: [UInt8])
    }

    /// What the cache makes of a bus message: an advertisement stored (or refused for its origin's
    /// quota), a withdrawal removed, a presence renewing its origin's activities (and, when it
    /// lists some the cache lacks, at most once a second, a request that the origin advertise them
    /// again).
    ///
    /// - Parameter fromUpstream: It came down from an upstream broker: a node of another site,
    ///   which this broker's subscribe-all does not reach.
    /// - Parameter site: The site it came from (kept with an advertisement, for snapshots).
    mutating func take(
        _ content: BrokerBusContent<some MessageFrames>, now: ContinuousClock.Instant, fromUpstream: Bool = false, site: String? = nil,
        lookup: LastValueCache.Lookup? = nil
    ) -> Taken {
        guard cacheEnabled else { return .taken(askToReadvertise: nil) }
        switch content.fields?.body {
        case .advertisement(let activityID, let origin, let version, let leaseMs, let expiresAt):
            let advertisement = CachedAdvertisement(activityID: activityID, origin: origin, version: version, leaseMs: leaseMs, expiresAt: expiresAt)
            let outcome = cache.store(advertisement, frames: content.frames, site: site, now: now, lookup: lookup)
            if outcome == .overQuota {
                return .overQuota(activityID: content.string(activityID), origin: content.string(origin.id))
            }
            if outcome == .overKeyQuota {
                return .overKeyQuota(activityID: content.string(activityID), key: content.withEnvelope { Array(WireBusFields.bytes(origin.publicKey, in: $0)) })
            }
            return .taken(askToReadvertise: nil, stored: outcome == .stored)
        case .withdrawal(let activityID, _):
            cache.remove(lookup ?? cache.lookUp(activityID, inEnvelopeOf: content.frames))
        case .presence(let node, let leaseMs, let partial):
            let origin = content.string(node.id)
            let lease = leaseMs > 0 ? Duration.milliseconds(WireLimits.granted(leaseMs: leaseMs)) : cache.defaultLease
            let listed = Set(content.presenceActivityIDs)
            if cache.renew(origin: origin, listed: listed, partial: partial, lease: lease, now: now) > 0 {
                // (A presence's key is checked on secure brokers only: an open one holds no key back.)
                let key = !keysChecked || node.publicKey.isEmpty ? nil : content.withEnvelope { Array(WireBusFields.bytes(node.publicKey, in: $0)) }
                let relapsed = readvertiseRequests.lapsedCopies(of: origin)?.contains { listed.contains($0) && !cache.contains($0) } ?? false
                switch readvertiseRequests.decide(origin, key: key, now: now, everyoneAllowed: !fromUpstream, relapsed: relapsed) {
                case .origin:
                    counted.readvertiseRequests += 1
                    if relapsed { counted.readvertiseLapsed += 1 }
                    return .taken(askToReadvertise: origin)
                case .everyone:
                    counted.readvertiseEveryone += 1
                    readvertiseEveryoneDue = true
                case .none:
                    break
                }
            } else {
                readvertiseRequests.nothingLacking(origin, listedAny: !listed.isEmpty)
            }
        case .other, nil:
            break
        }
        return .taken(askToReadvertise: nil)
    }

    /// A traced message's trace (wire.proto, "Tracing"), or `nil`: the broker reports its hops
    /// (`stored`: the cache took the advertisement, a hop of its own). Only for what a trace
    /// follows (an advertisement or a withdrawal), with a well-formed id, at most ten a second: a
    /// publisher that sets trace ids on all it sends cannot make the broker publish three hops for each.
    mutating func trace(of content: BrokerBusContent<some MessageFrames>, stored: Bool, now: ContinuousClock.Instant) -> Trace? {
        guard let traceID = content.traceID, content.activityIDRange != nil, TraceRequest.isTraceID(traceID),
              tracesReported.allow(now: now) else { return nil }
        return Trace(traceID: traceID, activityID: content.activityID ?? "", cached: stored)
    }

    /// Whether every publisher is to be asked to advertise again now (once).
    mutating func takeReadvertiseEveryone() -> Bool {
        defer { readvertiseEveryoneDue = false }
        return readvertiseEveryoneDue
    }

    /// Why a message is refused as forged, or `nil`: only the broker answers on snapshot topics,
    /// and (with CURVE) every message is bound to the key of the connection it came on.
    ///
    /// - Parameter ownerKey: The key the cache holds for the activity it is about, if any (`nil`
    ///   when it is about none).
    private func forgery(_ content: BrokerBusContent<some MessageFrames>, connectionKey: [UInt8]?, ownerKey: [UInt8]?) -> String? {
        let frames = content.frames
        if frames.frame(0, startsWith: Topic.snapshotPrefixBytes) { return "publishes on a snapshot topic, which only the broker answers on" }
        if frames.frame(0, startsWith: Topic.sitePrefixBytes) { return "publishes on a site topic, which only brokers send on" }
        guard let connectionKey else { return nil }
        // Checked where the fields lie; the claim's values (five allocations) only for a reason.
        if content.keepsSenderRule(connectionKey: connectionKey, ownerKey: ownerKey) { return nil }
        guard let claim = content.claim else { return nil }
        return SenderCheck.forgery(claim, connectionKey: connectionKey, ownerKey: ownerKey)
    }

    /// A message dropped as it was read, for having more frames than any the contract knows.
    mutating func droppedOverlong(fromPublisher: Bool) {
        if fromPublisher { counted.messagesIn += 1 }
        counted.malformed += 1
    }

    /// A subscriber's message (a subscription is one frame: 1 or 0, then the topic). `key`: the
    /// subscriber's connection key on a secure broker, and whether it is a relay's.
    mutating func subscriberMessage(_ frames: [Frame], key: [UInt8]?, relay: Bool, now: ContinuousClock.Instant) -> SubscriberVerdict {
        // (Anything else a subscriber sends is no subscription: it goes nowhere.)
        guard frames.count == 1 else { return .keep }
        var verdict = SubscriberVerdict.keep
        var onSnapshotTopic = false
        var request = false
        var brokersOwn = false
        frames[0].withUnsafeBytes { bytes in
            let topic = bytes.dropFirst()
            onSnapshotTopic = topic.starts(with: Topic.snapshotPrefixBytes)
            // (`R:*` is a site's broker's own, passed from above: never a subscriber's to send,
            // cache or not.)
            brokersOwn = topic.starts(with: Topic.readvertiseAllPrefixBytes)
            request = PublisherRequests.isRequest(topic)
            switch bytes.first {
            case 1:
                counted.subscriptions += 1
                if let typePrefix = Topic.snapshotTypePrefix(topic) { verdict = .answerSnapshot(topic: Array(topic), typePrefix: typePrefix) }
                // A site's broker asking, for its cache, that a node of another site advertise
                // again, or a tracer asking an origin for a traced advertisement: on to the
                // publishers, cache or not (the other sites' brokers pass it on to theirs).
                if request { verdict = admitRequest(topic, key: key, relay: relay, now: now) }
            case 0:
                counted.unsubscriptions += 1
                // Its asker went away or gave up: the rest of its answer would reach no one.
                if onSnapshotTopic, let dropped = snapshotAnswers.cancel(topic: topic) { countSent(dropped) }
            default:
                break
            }
        }
        if case .answerSnapshot = verdict { return verdict }
        if case .passRequest = verdict { return verdict }
        // A request's withdrawal: what it asked went on withdrawn already.
        if onSnapshotTopic || request || brokersOwn || cacheEnabled { return .keep }
        return forwardToPublishers(frames[0].bytes, key: key, relay: relay, now: now)
    }

    /// Without the cache: what to send the publishers for a subscriber's or a site's
    /// (un)subscription frame (``ForwardedInterest``). A withdrawal carrying a key that never
    /// subscribed goes nowhere: libzmq passes it up all the same, and forwarded it would have
    /// the publishers stop sending what others follow. Past the bounds (a member subscribing to
    /// made-up topics), the publishers are asked for everything, as with the cache, once. A
    /// prefix longer than any topic matches nothing: it goes nowhere.
    ///
    /// A node advertises everything again when a subscription to everything reaches it: a
    /// further subscriber to everything (another observer) passes one on as a request
    /// (subscribed and withdrawn at once, the standing one untouched), at most once every
    /// ``everyoneAgainInterval``, since each costs every node a pass over its activities.
    mutating func forwardToPublishers(_ frame: [UInt8], key: [UInt8]?, relay: Bool, now: ContinuousClock.Instant) -> SubscriberVerdict {
        guard !publishersSendEverything else { return .keep }
        switch publisherInterest.forward(frame, key: key, relay: relay) {
        case .nothing:
            guard frame == [1], lastEveryoneAgain.map({ now - $0 >= Self.everyoneAgainInterval }) ?? true else { return .keep }
            lastEveryoneAgain = now
            return .passRequest(topic: [])
        case .send(let frame):
            if frame == [1] { lastEveryoneAgain = now }
            return .forwardToPublishers(frame)
        case .refused:
            publishersSendEverything = true
            return .publishersSendEverything
        }
    }

    /// A subscriber's request for the publishers, passed on when well formed and within its
    /// key's budget; else counted.
    private mutating func admitRequest(_ topic: UnsafeRawBufferPointer.SubSequence, key: [UInt8]?, relay: Bool, now: ContinuousClock.Instant) -> SubscriberVerdict {
        guard PublisherRequests.isWellFormed(topic), publisherRequests.admit(key: key, relay: relay, now: now) else {
            counted.requestsRefused += 1
            return .keep
        }
        return .passRequest(topic: Array(topic))
    }

    /// The envelope of every live cached advertisement of `typePrefix` (each its origin's own):
    /// the body of a snapshot answer.
    ///
    /// - Parameter topic: The snapshot topic it was asked on: a site's broker's (its token names
    ///   the site, ``SiteName/snapshotToken()``) is answered without that site's own activities.
    func snapshot(typePrefix: String, topic: [UInt8] = [], now: ContinuousClock.Instant) -> [[UInt8]] {
        guard cacheEnabled else { return [] }
        return cache.live(matching: Array((Topic.activityPrefix + typePrefix).utf8), now: now, excludingSite: siteAsking(topic))
    }

    /// The `SnapshotReply` that ends a snapshot of which `sent` advertisements (`sentBytes` with
    /// their topic) reached the subscriber; counts the answer. `promised`: a busy reply's count
    /// (none sent), at least what matches.
    mutating func snapshotReply(typePrefix: String, topicSize: Int, sent: Int, sentBytes: Int, promised: Int? = nil) -> [UInt8] {
        let reply = envelopes.bytes(.snapshotReply(WireSnapshotReply(count: promised ?? sent, typePrefix: typePrefix)))
        counted.snapshots += 1
        counted.snapshotAdvertisements += sent
        counted.messagesOut += sent + 1
        counted.bytesOut += sentBytes + topicSize + reply.count
        return reply
    }

    /// A hop of a traced message, in the broker's own envelope (wire.proto, "Tracing").
    mutating func traceHop(_ kind: WireTraceHop.Kind, _ trace: Trace, at date: Date) -> [UInt8] {
        envelopes.bytes(.traceHop(.hop(kind, traceID: trace.traceID, activityID: trace.activityID, at: date)))
    }

    /// Forgets every cached activity whose lease has ended (remembered, on a secure broker, for
    /// its origin's next presence: ``ReadvertiseRequests``); true when anything changed.
    mutating func expire(now: ContinuousClock.Instant) -> Bool {
        guard keysChecked else { return cache.removeExpired(now: now) }
        var lapsed: [(origin: String, id: String)] = []
        defer { for copy in lapsed { readvertiseRequests.lapsed(copy.id, origin: copy.origin, now: now) } }
        return cache.removeExpired(now: now) { lapsed.append(($0, $1)) }
    }

    /// A handshake that failed before the account was asked.
    mutating func handshakeFailed(_ reason: HandshakeRefusals.Reason) {
        counted.handshakeRefusals[reason] += 1
    }

    /// ZAP's counts of the handshakes it allowed and refused; true when they changed.
    mutating func handshakes(allowed: Int, refused: Int) -> Bool {
        guard allowed != counted.allowedHandshakes || refused != counted.handshakeRefusals.keyNotInAccount else { return false }
        counted.allowedHandshakes = allowed
        counted.handshakeRefusals.keyNotInAccount = refused
        return true
    }
}
