import ZeroMQ

extension Broker {
    /// Where the broker listens and how it caches.
    ///
    /// High-water marks: the broker is a fan-in/fan-out point, so its queues are much deeper than
    /// libzmq's default of 1,000 — deep enough to replay a full cache to a late joiner at once. At a
    /// subscriber's high-water mark the backend drops messages for that subscriber alone (XPUB
    /// semantics): one slow node never stalls the bus. What a publisher sends waits in its own
    /// queue, not the broker's, while the broker is busy (``publisherQueue``). A stopped broker does
    /// not hold on to undelivered messages (publishers re-advertise periodically anyway): linger is
    /// 0, except 200 ms on the sockets that send to subscribers and upstream, which libzmq 4.3.4
    /// needs to close safely while their peers drop (`BrokerSockets.sendingLinger`).
    public struct Configuration: Sendable, Hashable {
        /// Where publishers connect (the broker binds an XSUB socket there).
        public var frontend: String
        /// Where subscribers connect (the broker binds an XPUB socket there, verbose: every
        /// subscription reaches the broker, duplicates included).
        public var backend: String
        /// Where to publish a copy of every forwarded message, both directions, or `nil` for none.
        public var capture: String?
        /// A second endpoint of the backend, in this process only (`inproc://…`, made in the
        /// broker's context), for the operators' view (``BusObserver``, the live page): it
        /// subscribes there without a key of the account, and costs nothing while nobody does.
        public var viewEndpoint: String?
        /// Every endpoint the broker binds.
        public var endpoints: [String] { [frontend, backend] + (capture.map { [$0] } ?? []) + upstreams.flatMap { [$0.frontend, $0.backend] } }
        /// Upstream brokers this one joins (sites): its own publishers' messages go up to each,
        /// and what its subscribers follow comes down. Empty: a bus of its own. With
        /// ``security``, the links run CURVE to the upstream's key, ``Security/brokerKey``.
        public var upstreams: [Upstream] = []
        /// With CURVE, the keys of the site brokers that join this one (their ``upstreams`` name
        /// it): each relays its site's nodes' messages, so what arrives on its connection is not
        /// held to that connection's key (the site's broker held it to its nodes' keys). They are
        /// let in as if in the account.
        public var relayKeys: Set<CurveKey> = []

        /// This broker's site on the links between sites (wire.proto, "Sites"): what its
        /// upstreams send it is addressed to this name, and what it sends names it. `nil`: a
        /// random one for each start. Names must differ between the brokers of one bus.
        public var site: SiteName?

        /// An upstream broker's endpoints, as its own nodes use them.
        public typealias Upstream = Node.Configuration.BrokerEndpoints
        /// Whether to cache advertisements and replay them to new subscriptions.
        public var lastValueCache: Bool
        /// The most activities the cache holds; when it is full, the entry that would expire
        /// soonest makes room. Keep it at most ``highWaterMark`` so a full replay fits a
        /// subscriber's queue.
        public var cacheCapacity: Int
        /// The most memory the cache's entries take, in bytes: each its frames (up to 64 KiB) and
        /// 256 bytes of bookkeeping. When a new or grown entry would take more, the entries that
        /// would expire soonest make room. The default, 512 MiB, holds 100,000 activities of up to
        /// 5 KiB each (a typical advertisement is 300–600 bytes); bounded by ``cacheCapacity``
        /// alone, members advertising the largest frames could make it 6.4 GB. At least 128 KiB
        /// and 256 bytes: one entry of the largest topic and envelope.
        public var cacheBytes: Int = 512 << 20
        /// The most activities of any one origin node the broker caches and forwards: a new
        /// activity beyond it is dropped, counted (``Counters/overQuota``) and logged once per origin,
        /// so that one node cannot fill the cache nor flood every subscriber. Updates to the
        /// activities it has cached, and withdrawals, always pass.
        public var maxActivitiesPerOrigin: Int
        /// The most activities of any one CURVE key the broker caches and forwards, over all the
        /// nodes that name it; `nil` (the default) is four times ``maxActivitiesPerOrigin``: an
        /// agent and the commands run beside it under its key. A member that names itself as many
        /// nodes cannot fill the cache past it, nor evict the others' activities. Counted and
        /// logged as ``maxActivitiesPerOrigin``; without ``security`` nothing proves a key, and it
        /// does not apply.
        public var maxActivitiesPerKey: Int?

        /// ``maxActivitiesPerKey``, or its default.
        var effectiveMaxActivitiesPerKey: Int {
            if let maxActivitiesPerKey { return maxActivitiesPerKey }
            let (fourfold, overflow) = maxActivitiesPerOrigin.multipliedReportingOverflow(by: 4)
            return overflow ? .max : fourfold
        }
        /// How many subscriptions a subscriber may hold here, per connection and per key; past
        /// them its connection is cut (``SubscriptionBounds``, ``Counters/subscribersCut``).
        public var subscriptionBounds = SubscriptionBounds()
        /// How long to cache an advertisement whose `leaseMs` is 0 (unset).
        public var defaultLease: Duration
        /// Send and receive high-water mark of every broker socket, in messages per peer, except
        /// the frontend's receive queue (``publisherQueue``) and the backend's (a subscriber's
        /// subscriptions: 10, so that libzmq keeps only a few ahead of the broker's bounds,
        /// ``subscriptionBounds``).
        public var highWaterMark: Int32
        /// How many of one publisher's messages the broker holds received but not yet handled
        /// (the frontend's receive high-water mark). Beyond it libzmq stops reading that
        /// connection and TCP pushes back, so the rest wait in the publisher's own queue (a node's
        /// holds 100,000) rather than in the broker's memory. Kept short, a flood from publishers
        /// faster than the broker costs it no memory, and libzmq's receive buffers are reused while
        /// still warm instead of each being new memory (docs/performance.md, "A publisher's queue
        /// in the publisher"). 0 means unlimited.
        public var publisherQueue: Int32
        /// The broker's key pair and the account: with it, the frontend, backend and capture run
        /// CURVE and let in only the account's nodes (``Security/authorizedKeys``). `nil` runs
        /// without encryption or authentication, which is allowed only on loopback unless
        /// ``allowInsecure`` is set.
        public var security: Security?
        /// Whether to listen beyond loopback without ``security`` (local development only).
        public var allowInsecure: Bool

        /// Creates a configuration.
        ///
        /// - Parameters:
        ///   - frontend: Endpoint to bind for publishers; `tcp://127.0.0.1:*` picks a free port.
        ///   - backend: Endpoint to bind for subscribers.
        ///   - capture: Endpoint to bind for the capture copy, or `nil`.
        ///   - lastValueCache: Whether to cache and replay advertisements.
        ///   - cacheCapacity: The most activities cached (at least 1).
        ///   - defaultLease: Cache lifetime of an advertisement without a lease (more than zero).
        ///   - highWaterMark: Queue depth per peer, in messages; 0 means unlimited.
        ///   - publisherQueue: Messages of one publisher held before TCP pushes back; 0 means unlimited.
        public init(
            frontend: String = "tcp://127.0.0.1:5555",
            backend: String = "tcp://127.0.0.1:5556",
            capture: String? = nil,
            lastValueCache: Bool = true,
            cacheCapacity: Int = 100_000,
            maxActivitiesPerOrigin: Int = 1_000,
            defaultLease: Duration = .seconds(30),
            highWaterMark: Int32 = 100_000,
            publisherQueue: Int32 = 1_000
        ) {
            self.frontend = frontend
            self.backend = backend
            self.capture = capture
            self.lastValueCache = lastValueCache
            self.cacheCapacity = cacheCapacity
            self.maxActivitiesPerOrigin = maxActivitiesPerOrigin
            self.defaultLease = defaultLease
            self.highWaterMark = highWaterMark
            self.publisherQueue = publisherQueue
            security = nil
            allowInsecure = false
        }
    }
}
