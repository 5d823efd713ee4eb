import Foundation
import ZeroMQ

extension Node {
    /// How a node joins the bus and how it behaves there.
    public struct Configuration: Sendable {
        /// How advertisements travel between nodes.
        public enum Bus: Sendable, Hashable {
            /// Through a ``Broker`` (the normal multi-process deployment): the node publishes to the
            /// broker's `frontend` (its XSUB) and subscribes at its `backend` (its XPUB). The broker's
            /// last-value cache gives a joining node every current activity at once.
            case broker(frontend: String, backend: String)
            /// Through several brokers at once, normally a pair, all active: the node publishes to
            /// every frontend and subscribes at every backend, so while any one of them runs no node
            /// loses sight of any activity (what arrives twice is recognised and ignored). The
            /// brokers share one key pair when they run CURVE.
            case brokers([BrokerEndpoints])
            /// Directly between nodes: the node publishes on `listen` and subscribes to every endpoint in
            /// `peers`. Each peer answers a joining node's snapshot subscription itself.
            case direct(listen: String, peers: [String])
        }

        /// One broker's two endpoints.
        public struct BrokerEndpoints: Sendable, Hashable {
            /// Where the node publishes (the broker's XSUB).
            public var frontend: String
            /// Where the node subscribes (the broker's XPUB).
            public var backend: String

            public init(frontend: String, backend: String) {
                self.frontend = frontend
                self.backend = backend
            }
        }

        /// The node's human-readable name.
        public var name: String
        /// The node's id; a new UUID when `nil`.
        public var id: String?
        /// How the node joins the bus.
        public var bus: Bus
        /// Where the node answers continue requests (a ROUTER). `tcp://127.0.0.1:*` picks a free port.
        public var continuationEndpoint: String
        /// The host name other nodes use to reach this one, replacing a wildcard address (`*`,
        /// `0.0.0.0`) in the advertised continuation endpoint. Defaults to this machine's host name.
        public var advertisedHost: String?
        /// Activity-type prefixes the node tracks from the start (empty string: every type).
        /// ``Node/discover(_:)`` adds its own.
        public var subscriptions: [String]
        /// How often the node sends its presence (one `NodePresence` listing its current
        /// activities), which keeps them alive at every other node and at the broker.
        public var advertiseInterval: Duration
        /// How long other nodes keep an activity (and this node) without hearing of it again;
        /// 3 × ``advertiseInterval`` when `nil`. A node that vanishes takes its activities with it
        /// after this long.
        public var lease: Duration?
        /// How often each current activity is advertised again although it did not change, so
        /// that a lost advertisement is made good and a broker's copy stays within every node's
        /// ``replayWindow`` (keep it under half of that). Between those, presence keeps it alive.
        public var refreshInterval: Duration
        /// How long a continue request waits for the originator's answer.
        public var continueTimeout: Duration
        /// How long a continue request waits for a connection to the originator.
        public var connectTimeout: Duration
        /// How long, at most, an event loop polls for the answer to a continue request (or to a
        /// request to open streams) instead of sleeping (``ZeroMQ/EventLoops/awaitReply(within:)``):
        /// a sleeping loop takes a thread wake-up to see the answer, tens of microseconds on a
        /// virtual machine. Costs CPU only while a request waits, at most this long per request;
        /// zero never polls. By default 200 µs, and zero in a process that may use one CPU only
        /// (``ZeroMQ/UsableProcessors``): there the reply needs libzmq's I/O thread, which shares
        /// the CPU with the polling loop, and polling gained nothing (docs/performance.md).
        public var replyPolling: Duration
        /// The largest encoded ``UserActivity/userInfo`` accepted, in bytes (Apple advises under 3 KB).
        public var maxUserInfoSize: Int
        /// The team id given to activities that set none.
        public var teamID: String?
        /// Whether discovery reports this node's own activities too.
        public var includeOwnActivities: Bool
        /// Chunks of a continuation stream this node lets a writer have in flight to it (its receive
        /// window). Memory for a stream is bounded by window × chunk size (4 MiB by default).
        public var streamWindow: Int
        /// The largest chunk this node sends on a continuation stream, in bytes.
        public var streamChunkSize: Int
        /// Folders this node shares with other nodes (a network file system, a synced folder),
        /// as paths here: a document activity whose file lies under one is opened in place when
        /// its content has the advertised hash (``Node/openDocument(of:into:)``); any other is
        /// pulled over a continuation stream. Empty (the default): always pulled.
        public var sharedFolders: [String] = []
        /// How long a continuation stream may hear nothing from its peer (not even a keep-alive, sent
        /// every second) before it fails with ``HandoffError/Code-swift.struct/peerLost``.
        public var streamIdleTimeout: Duration
        /// How long a stream pair whose peer went silent (or whose connection dropped) is kept,
        /// with what was sent but not acknowledged, waiting for the peer to resume it; past it the
        /// pair fails with ``HandoffError/Code-swift.struct/peerLost``.
        public var streamResumeWindow: Duration
        /// The most stream pairs open on this node at once, both sides together; more are refused
        /// with ``HandoffError/Code-swift.struct/tooManyStreams``.
        public var maxStreams: Int
        /// The most stream pairs one peer (one CURVE key; one node id without security) may have
        /// open with this node as originator at once.
        public var maxStreamsPerPeer: Int
        /// Under pressure — the node at ``maxStreams``, or every plugin worker taken with stream
        /// calls waiting — the pair that has gone longest without progress (nothing read, nothing
        /// acknowledged), at least this long, is ended with ``HandoffError/Code-swift.struct/tooManyStreams``
        /// to make room, taken from the peer that holds the most pairs. Slow readers make progress and
        /// are never chosen; a peer that opens pairs and never reads loses them to the next newcomer.
        public var streamStallGrace: Duration
        /// How long a stream pair may wait on its peer without progress, while the peer stays
        /// connected and answers keep-alives, before this node gives up on it: a reader that has
        /// taken everything that arrived and gets nothing new, or a writer whose chunks the peer
        /// never takes. The pair then fails with ``HandoffError/Code-swift.struct/remoteApplicationTimedOut``
        /// on both sides (the peer is told, `details["scope"] = "stalled"`). Time this side's
        /// application takes does not count (the wait starts when it last read or wrote), nor time
        /// the pair spent interrupted or this process did not run. `nil` (the
        /// default): a pair lives as long as its peer is heard, however slow (a stuck or hostile
        /// peer application then holds it until one side cancels).
        public var streamStallTimeout: Duration?
        /// The checksum this node's stream writers end each direction with, announced when the pair
        /// opens so that the reader computes it as the bytes arrive (stream.proto,
        /// `ChecksumAlgorithm`). Readers verify whichever their writer announced. CRC-32C (the
        /// default) is copied and checked in one pass at memory speed; SHA-256 costs a few hundred
        /// MB/s at each end.
        public var streamChecksum: StreamChecksum
        /// Whether a stream whose end this node cannot verify fails with
        /// ``HandoffError/Code-swift.struct/streamChecksumMismatch``: at its end, one with no
        /// checksum or in another algorithm than its writer announced; as it opens, one whose
        /// writer announces an algorithm this node does not know (before any byte, and the
        /// application never sees the pair). `false` (the default, as stream.proto says): such an
        /// end is held to its length only, logged and counted, so that writers from before
        /// announced algorithms keep working.
        public var requireVerifiedStreamEnds = false

        /// The node's key pair and account: with it, every socket runs CURVE and only the account's
        /// nodes get in (see ``Security``). `nil` runs without encryption or authentication, which
        /// is allowed only on loopback unless ``allowInsecure`` is set.
        public var security: Security?
        /// Whether to run without ``security`` on endpoints beyond loopback (local development only).
        public var allowInsecure: Bool
        /// Which activities this node's handlers get, by team id. A handler (or a plugin) has a
        /// team: the one it was registered with, else ``teamID``.
        public var teamPolicy: TeamPolicy
        /// How old an advertisement or withdrawal may be (by its sender's clock, against this
        /// node's) and still be believed; older ones are ignored as stale or replayed. Keep it
        /// above the lease and the clock skew between hosts.
        public var replayWindow: Duration
        /// The most activities of any one other node this node keeps track of: a new one beyond it
        /// is ignored, counted (``Node/SecurityCounters/overQuotaIgnored``) and logged once per
        /// origin, so that one node cannot fill this one's memory (a broker has its own quota).
        /// With CURVE, one key gets four times it over all the nodes that name it, so that a
        /// member naming itself as many nodes cannot either.
        public var maxKnownActivitiesPerNode: Int
        /// The most activities of all other nodes together this node keeps track of.
        public var maxKnownActivities: Int
        /// The most memory, in bytes, the activities of other nodes that this node keeps track of
        /// take together (each its strings and 512 bytes): a new activity, or a newer version,
        /// that would take more is ignored and counted as ``maxKnownActivities`` is. The counts
        /// alone let peers that lie (each string nearly a whole 64 KiB frame) make 100,000
        /// activities 6 GB. The default, 256 MiB, holds 100,000 of 2.6 KiB each (a typical one
        /// is under 1 KiB). At least 64 KiB: one activity of the largest frame.
        public var maxKnownActivityBytes = 256 << 20
        /// The most events a ``Node/discover(_:)`` stream holds for its reader beyond its first
        /// listing (an ``ActivityEvent/appeared(_:)`` for each activity known then). A reader that
        /// falls further behind has its stream ended, after the events it holds, rather than
        /// missing one or holding ever more: discover again to start over from what the node knows.
        /// Each such end is logged and counted (`handoff_node_discover_streams_overrun_total`).
        public var maxDiscoverBacklog: Int

        /// A configuration with defaults for everything but the name and bus.
        public init(
            name: String,
            bus: Bus,
            continuationEndpoint: String = "tcp://127.0.0.1:*",
            subscriptions: [String] = [""],
            advertiseInterval: Duration = .seconds(2),
            lease: Duration? = nil,
            continueTimeout: Duration = .seconds(5),
            connectTimeout: Duration = .seconds(1),
            maxUserInfoSize: Int = 3 * 1024,
            teamID: String? = nil
        ) {
            self.name = name
            self.bus = bus
            self.continuationEndpoint = continuationEndpoint
            self.subscriptions = subscriptions
            self.advertiseInterval = advertiseInterval
            self.lease = lease
            self.continueTimeout = continueTimeout
            self.connectTimeout = connectTimeout
            replyPolling = UsableProcessors.count < 2 ? .zero : .microseconds(200)
            self.maxUserInfoSize = maxUserInfoSize
            self.teamID = teamID
            includeOwnActivities = false
            streamWindow = 16
            streamChunkSize = 256 * 1024
            streamIdleTimeout = .seconds(5)
            streamResumeWindow = .seconds(30)
            maxStreams = 64
            maxStreamsPerPeer = 4
            streamStallGrace = .seconds(2)
            streamStallTimeout = nil
            streamChecksum = .crc32c
            security = nil
            allowInsecure = false
            teamPolicy = .sameTeam
            replayWindow = .seconds(60)
            refreshInterval = .seconds(25)
            maxKnownActivitiesPerNode = 1_000
            maxKnownActivities = 100_000
            maxDiscoverBacklog = 10_000
        }

        /// Which activities a continuing node hands to a handler, by team id.
        public enum TeamPolicy: Sendable, Hashable {
            /// Only activities of the handler's own team (an activity without a team goes only to a
            /// handler without one). Apple's rule, and the default.
            case sameTeam
            /// The handler's own team, and these.
            case trusting(Set<String>)
            /// Any team.
            case anyTeam

            /// Whether an activity of `activityTeam` may go to a handler of `handlerTeam`.
            public func allows(activityTeam: String?, handlerTeam: String?) -> Bool {
                let activity = activityTeam ?? "", handler = handlerTeam ?? ""
                switch self {
                case .sameTeam: return activity == handler
                case .trusting(let teams): return activity == handler || teams.contains(activity)
                case .anyTeam: return true
                }
            }
        }

        /// Every endpoint the node binds or connects to (before any wildcard is resolved).
        var endpoints: [String] {
            switch bus {
            case .broker, .brokers: [continuationEndpoint] + (bus.brokerEndpoints ?? []).flatMap { [$0.frontend, $0.backend] }
            case .direct(let listen, let peers): [continuationEndpoint, listen] + peers
            }
        }

        /// The lease other nodes are told.
        var effectiveLease: Duration { lease ?? advertiseInterval * 3 }

        /// The longest the node's scheduler sleeps between two ticks (it also wakes when a presence
        /// is due): a quarter of the shortest of the lease, the stream idle timeout and the continue
        /// timeout, so that each is noticed at most a quarter of itself late, and at most 250 ms.
        var tickInterval: Duration {
            min(effectiveLease / 4, streamIdleTimeout / 4, continueTimeout / 4, .milliseconds(250))
        }

        /// Refuses what no node can keep: a presence interval of zero (the node's clock would
        /// spin), a lease past ``WireLimits/maxLease``, which other nodes would cut short, or an id,
        /// name or host past ``WireLimits``' lengths, whose messages every receiver would drop.
        func check() throws(HandoffError) {
            if let id, id.isEmpty || id.utf8.count > WireLimits.maxNodeID {
                throw HandoffError(.invalidConfiguration, "node \(name): its id must be 1 to \(WireLimits.maxNodeID) bytes (it is \(id.utf8.count))")
            }
            guard name.utf8.count <= WireLimits.maxNodeName, (advertisedHost?.utf8.count ?? 0) <= WireLimits.maxHost else {
                throw HandoffError(.invalidConfiguration, "node \(name.prefix(64)): its name must be at most \(WireLimits.maxNodeName) bytes and its advertised host at most \(WireLimits.maxHost), or no node hears its presence")
            }
            guard maxKnownActivityBytes >= WireLimits.maxBusFrame else {
                throw HandoffError(.invalidConfiguration, "node \(name): maxKnownActivityBytes must hold one activity of the largest frame, \(WireLimits.maxBusFrame) bytes (it is \(maxKnownActivityBytes))")
            }
            guard advertiseInterval > .zero else {
                throw HandoffError(.invalidConfiguration, "node \(name): the advertise interval must be more than zero (it is \(advertiseInterval))")
            }
            guard effectiveLease > advertiseInterval, effectiveLease <= WireLimits.maxLease else {
                throw HandoffError(.invalidConfiguration, "node \(name): the lease (\(effectiveLease)) must be longer than the advertise interval (\(advertiseInterval)) and at most \(WireLimits.maxLease), the longest lease other nodes grant")
            }
        }
    }
}

extension Node.Configuration.Bus {
    /// The brokers of a broker bus (one for ``broker(frontend:backend:)``); `nil` in direct mode.
    public var brokerEndpoints: [Node.Configuration.BrokerEndpoints]? {
        switch self {
        case .broker(let frontend, let backend): [.init(frontend: frontend, backend: backend)]
        case .brokers(let brokers): brokers
        case .direct: nil
        }
    }

    /// Whether nodes meet through brokers (one or more), not directly.
    public var usesBrokers: Bool { brokerEndpoints != nil }
}
