import Foundation
import HandoffWire
import Logging
import Synchronization
import ZeroMQ

// The node's state outside its protocol machines, grouped by what it is for: the shell's own parts.

/// Who the node is, fixed when it is made.
struct NodeIdentity: Sendable {
    let configuration: Node.Configuration
    let info: NodeInfo
    /// The id as UTF-8, to recognise the node's own messages come back from the broker undecoded.
    let idUTF8: [UInt8]
    /// Where this node answers continue requests, as advertised to others.
    let continuationEndpoint: String
    /// In direct mode, the endpoint peers subscribe to (with the port resolved); `nil` with a broker.
    let busEndpoint: String?
    let logger: Logger
}

/// The node's sockets and what it knows of their connections. Owned by the node actor.
struct NodeSockets {
    let context: Context
    /// The bus publisher: XPUB, so that it sees subscriptions (direct mode answers them at once).
    let publisher: Socket
    /// The bus subscribers: one connected to every broker; in direct mode one per peer, so that
    /// each message is known to come from that peer's connection (and, secure, its key).
    let subscribers: [Socket]
    /// Direct and secure: the key of each subscriber's peer, which every message on it must name as
    /// its sender; `nil` through brokers (the broker has checked each publisher's key).
    let subscriberKeys: [Data?]
    /// Where continue requests arrive.
    let server: Socket
    /// One DEALER per originator endpoint this node continues from.
    var clients: [String: Client] = [:]
    /// Monitors of the bus sockets that connect (to the broker, or to direct peers), to notice a
    /// server that refuses this node at the handshake, each with the socket it watches.
    var busMonitors: [(socket: Socket, monitor: SocketMonitor)]
    /// Monitors of the sockets this node serves on (the continuation ROUTER, and the bus XPUB in
    /// direct mode): each connection accepted, and (secure) handshakes that fail before ZAP is asked.
    var serverMonitors: [SocketMonitor]
    /// What each connection the node reads from hands libzmq between whole messages: those
    /// accepted there, and those its bus subscribers and its DEALERs to originators made.
    var unfinishedMessages: UnfinishedMessageBound<[UInt8]>
    /// The connections of the bus sockets now (handshake done), from their monitors.
    var busConnections: Set<Node.BusConnection> = []
    /// When the bus last proved it carries this node's messages: its own presence came back
    /// through a broker, or (direct) a peer's message arrived. See ``Node/busHealth``.
    var lastBusProof: ContinuousClock.Instant?
    /// Why the bus refused this node at the handshake, once it has.
    var busRefusal: HandoffError?
    /// The strings that repeat in what the bus subscribers read (``WireStrings``).
    let busStrings = WireStrings()
    /// The strings that repeat in what the continuation ROUTER and the DEALERs to originators
    /// read: requesters' ids, names and hosts, activities' ids and types, origins.
    let peerStrings = WireStrings()
}

/// Where the node is in its life, and what waits on that.
struct NodeLifecycle {
    enum RunState { case idle, running, stopped }
    var runState = RunState.idle
    var runningWaiters: [CheckedContinuation<Void, Never>] = []
    /// The node's own tasks (delegates, plugin calls), run in its task group.
    var jobs: AsyncStream<@Sendable () async -> Void>.Continuation?
    /// Continue requests answered in a task of their own because the activity's delegate is
    /// called (will-save, was-continued), not yet done: bounded by ``ContinuationServer/maxHandOversWaiting``.
    var handOversWaiting = 0
}

/// Who may talk to the node.
struct NodeAccess {
    /// The security in force: the configuration's, with the account as last updated.
    var security: Security?
    /// The context's ZAP handler, while this node runs secure; released at shutdown.
    var zap: ZAPHandler?
    /// The ZAP domain of this node's server sockets.
    let zapDomain: String
}

/// What the node counts, reports and logs about itself.
struct NodeObservability {
    /// What the node reports to swift-metrics (no-ops unless the process bootstrapped a backend).
    var metrics = NodeMetrics()
    var counterMetrics = NodeCounterMetrics()
    var securityCounters = Node.SecurityCounters() { didSet { counterMetrics.report(securityCounters) } }
    var streamCounters = Node.StreamCounters() { didSet { counterMetrics.report(streamCounters) } }
    /// How much stream data waits to be read, per open pair's reader (for back-pressure metrics).
    var streamPressureProbes: [@Sendable () -> Int] = []
    /// Which refused handshakes at the server sockets are logged (per peer address and reason).
    var refusalLog = RefusalLog()
    /// Which of peers' stream misdeeds (violations, unverified ends) are logged (per peer and kind).
    var streamPeerLog = RefusalLog()
    /// Which peers' held-back node events are logged (per peer: ``Node/publishPeerEvent(about:_:)``).
    var eventPeerLog = RefusalLog()
    /// When ignored input (malformed, foreign) was last logged: at most once a minute.
    var lastRateLimitedLog: ContinuousClock.Instant?
    /// Tracers' requests answered lately (wire.proto, "Tracing").
    var traceRequests = TraceRequestLimit()
    /// Traced envelopes received and reported lately (the same limit, on its own count).
    var receivedTraces = TraceRequestLimit()
    /// Which events about peers' continues and stream pairs go on the bus (per peer).
    var eventBudget = PeerEventBudget()
}

/// Who hears from the node: its discover streams and its delegate.
struct NodeListeners {
    /// The discover streams and the topics they follow (``Watchers``).
    var watchers = Watchers<DiscoverChannel>()
    weak var delegate: (any HandoffDelegate)?
}

/// Activities changed since the last publish (see ``Node/activityDidChange(_:)``): a change to an
/// activity already waiting costs nothing more, and one wake-up publishes them all. Shared with
/// the activities' threads.
final class ChangeQueue: Sendable {
    let changed = Mutex<Set<String>>([])
    let wakeUps: AsyncStream<Void>
    let wake: AsyncStream<Void>.Continuation

    init() {
        (wakeUps, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }
}
