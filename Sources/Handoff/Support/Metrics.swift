import CoreMetrics
import HandoffWire

// What a broker and a node report to swift-metrics. Nothing is exported unless the process
// bootstraps a metrics backend (`handoff broker --metrics`, `handoff agent --metrics` bootstrap
// swift-prometheus); without one, every handle here is swift-metrics' no-op. Names follow
// Prometheus' conventions (`_total` counters, `_seconds` durations, `_bytes` sizes), and every
// metric of one name has the same label names. docs/operations.md lists them all.
//
// The handles are made once, when a broker or node is made: a process must bootstrap its backend
// before that.

/// The broker's counters, reported to swift-metrics as they change.
///
/// The broker's loop keeps its ``Broker/Counters`` as plain integers (it owns them alone, on its
/// thread) and reports their differences since the last report here, so a field added to the
/// counters is one line below, not a call at every place it changes.
struct BrokerMetrics {
    private let messagesIn = Counter(label: "handoff_broker_messages_total", dimensions: [("socket", "frontend"), ("direction", "in")])
    private let bytesIn = Counter(label: "handoff_broker_bytes_total", dimensions: [("socket", "frontend"), ("direction", "in")])
    private let messagesOut = Counter(label: "handoff_broker_messages_total", dimensions: [("socket", "backend"), ("direction", "out")])
    private let bytesOut = Counter(label: "handoff_broker_bytes_total", dimensions: [("socket", "backend"), ("direction", "out")])
    private let subscriptions = Counter(label: "handoff_broker_subscriptions_total", dimensions: [("kind", "subscribe")])
    private let unsubscriptions = Counter(label: "handoff_broker_subscriptions_total", dimensions: [("kind", "unsubscribe")])
    private let cached = Gauge(label: "handoff_broker_cached_activities")
    private let cachedBytes = Gauge(label: "handoff_broker_cached_bytes")
    private let forged = Counter(label: "handoff_broker_refusals_total", dimensions: [("reason", "forged")])
    private let overQuota = Counter(label: "handoff_broker_refusals_total", dimensions: [("reason", "over_quota")])
    private let subscribersCut = Counter(label: "handoff_broker_refusals_total", dimensions: [("reason", "subscriptions_over_bound")])
    private let unfinishedMessagesCut = Counter(label: "handoff_broker_refusals_total", dimensions: [("reason", "unfinished_message")])
    private let handshakeRefusals = Dictionary(uniqueKeysWithValues: HandshakeRefusals.Reason.allCases.map {
        ($0, Counter(label: "handoff_broker_refusals_total", dimensions: [("reason", $0.label)]))
    })
    private let allowedHandshakes = Counter(label: "handoff_broker_handshakes_allowed_total")
    private let snapshots = Counter(label: "handoff_broker_snapshots_total")
    private let snapshotsBusy = Counter(label: "handoff_broker_snapshots_busy_total")
    private let snapshotAdvertisements = Counter(label: "handoff_broker_snapshot_advertisements_total")
    private let malformed = Counter(label: "handoff_broker_malformed_total")
    /// Sites (wire.proto "Sites"): the links to upstream brokers, and to the sites joined below.
    private let upstreamOut = Counter(label: "handoff_broker_site_messages_total", dimensions: [("link", "upstream"), ("direction", "out")])
    private let upstreamIn = Counter(label: "handoff_broker_site_messages_total", dimensions: [("link", "upstream"), ("direction", "in")])
    private let sitesIn = Counter(label: "handoff_broker_site_messages_total", dimensions: [("link", "sites"), ("direction", "in")])
    private let sitesOut = Counter(label: "handoff_broker_site_messages_total", dimensions: [("link", "sites"), ("direction", "out")])
    private let upstreamReturned = Counter(label: "handoff_broker_site_dropped_total", dimensions: [("reason", "returned")])
    private let upstreamDuplicates = Counter(label: "handoff_broker_site_dropped_total", dimensions: [("reason", "duplicate")])
    private let siteLoops = Counter(label: "handoff_broker_site_dropped_total", dimensions: [("reason", "loop")])
    private let siteInterestsRefused = Counter(label: "handoff_broker_site_interests_refused_total")
    private let upstreamInterestsRefused = Counter(label: "handoff_broker_upstream_interests_refused_total")
    private let requestsRefused = Counter(label: "handoff_broker_requests_refused_total")
    private let readvertiseOrigin = Counter(label: "handoff_broker_readvertise_requests_total", dimensions: [("kind", "origin")])
    private let readvertiseEveryone = Counter(label: "handoff_broker_readvertise_requests_total", dimensions: [("kind", "everyone")])
    private let readvertiseLapsed = Counter(label: "handoff_broker_readvertise_lapsed_total")
    private var reported = Broker.Counters()

    init() { cached.record(0) }

    /// Reports what changed since the last report.
    mutating func report(_ counters: Broker.Counters) {
        let old = reported
        add(messagesIn, counters.messagesIn, old.messagesIn)
        add(bytesIn, counters.bytesIn, old.bytesIn)
        add(messagesOut, counters.messagesOut, old.messagesOut)
        add(bytesOut, counters.bytesOut, old.bytesOut)
        add(subscriptions, counters.subscriptions, old.subscriptions)
        add(unsubscriptions, counters.unsubscriptions, old.unsubscriptions)
        add(forged, counters.forged, old.forged)
        add(overQuota, counters.overQuota, old.overQuota)
        add(subscribersCut, counters.subscribersCut, old.subscribersCut)
        add(unfinishedMessagesCut, counters.unfinishedMessagesCut, old.unfinishedMessagesCut)
        for (reason, counter) in handshakeRefusals {
            add(counter, counters.handshakeRefusals[reason], old.handshakeRefusals[reason])
        }
        add(allowedHandshakes, counters.allowedHandshakes, old.allowedHandshakes)
        add(snapshots, counters.snapshots, old.snapshots)
        add(snapshotsBusy, counters.snapshotsBusy, old.snapshotsBusy)
        add(snapshotAdvertisements, counters.snapshotAdvertisements, old.snapshotAdvertisements)
        add(malformed, counters.malformed, old.malformed)
        add(upstreamOut, counters.upstreamOut, old.upstreamOut)
        add(upstreamIn, counters.upstreamIn, old.upstreamIn)
        add(sitesIn, counters.sitesIn, old.sitesIn)
        add(sitesOut, counters.sitesOut, old.sitesOut)
        add(upstreamReturned, counters.upstreamReturned, old.upstreamReturned)
        add(upstreamDuplicates, counters.upstreamDuplicates, old.upstreamDuplicates)
        add(siteLoops, counters.siteLoops, old.siteLoops)
        add(siteInterestsRefused, counters.siteInterestsRefused, old.siteInterestsRefused)
        add(upstreamInterestsRefused, counters.upstreamInterestsRefused, old.upstreamInterestsRefused)
        add(requestsRefused, counters.requestsRefused, old.requestsRefused)
        add(readvertiseOrigin, counters.readvertiseRequests, old.readvertiseRequests)
        add(readvertiseEveryone, counters.readvertiseEveryone, old.readvertiseEveryone)
        add(readvertiseLapsed, counters.readvertiseLapsed, old.readvertiseLapsed)
        if counters.cachedActivities != old.cachedActivities { cached.record(counters.cachedActivities) }
        if counters.cachedBytes != old.cachedBytes { cachedBytes.record(counters.cachedBytes) }
        reported = counters
    }
}

/// A node's traffic and outcomes, reported to swift-metrics where they happen; its
/// ``Node/SecurityCounters`` and ``Node/StreamCounters`` are reported by difference, like the
/// broker's.
struct NodeMetrics: Sendable {
    /// The sockets a node's messages cross.
    enum SocketKind: String, Sendable {
        /// The bus: publications out, subscriptions' messages in.
        case bus
        /// The continuation server (ROUTER): requests and stream frames in, replies out.
        case continuationServer = "continuation_server"
        /// The continuation clients (DEALER, one per originator): requests out, replies in.
        case continuationClient = "continuation_client"
    }

    private struct Traffic: Sendable {
        let messagesIn, bytesIn, messagesOut, bytesOut: Counter
        func count(bytes: Int, out: Bool) {
            if out {
                messagesOut.increment()
                bytesOut.increment(by: bytes)
            } else {
                messagesIn.increment()
                bytesIn.increment(by: bytes)
            }
        }

        init(_ socket: SocketKind) {
            messagesIn = Counter(label: "handoff_node_messages_total", dimensions: [("socket", socket.rawValue), ("direction", "in")])
            bytesIn = Counter(label: "handoff_node_bytes_total", dimensions: [("socket", socket.rawValue), ("direction", "in")])
            messagesOut = Counter(label: "handoff_node_messages_total", dimensions: [("socket", socket.rawValue), ("direction", "out")])
            bytesOut = Counter(label: "handoff_node_bytes_total", dimensions: [("socket", socket.rawValue), ("direction", "out")])
        }
    }

    /// The handles, behind one reference: a method that does not mutate the metrics is called on
    /// a copy of them, and a copy of 23 handles held inline was 23 retains and 23 releases
    /// (measured per continue round trip with uprobes on swift_retain, in `continueEnded`).
    private final class Handles: Sendable {
        let bus = Traffic(.bus)
        let server = Traffic(.continuationServer)
        let client = Traffic(.continuationClient)
        let answered = Counter(label: "handoff_node_continuations_answered_total", dimensions: [("result", "restored")])
        let refused = Counter(label: "handoff_node_continuations_answered_total", dimensions: [("result", "refused")])
        let continued = Counter(label: "handoff_node_continue_requests_total", dimensions: [("result", "succeeded")])
        let failed = Counter(label: "handoff_node_continue_requests_total", dimensions: [("result", "failed")])
        let continueDuration = Timer(label: "handoff_node_continue_duration_seconds", preferredDisplayUnit: .seconds)
        let streamsOpen = Meter(label: "handoff_node_streams_open")
        let streamBytesIn = Counter(label: "handoff_node_stream_bytes_total", dimensions: [("direction", "in")])
        let streamBytesOut = Counter(label: "handoff_node_stream_bytes_total", dimensions: [("direction", "out")])
        let currentActivities = Gauge(label: "handoff_node_current_activities")
        let knownActivities = Gauge(label: "handoff_node_known_activities")
        let onBus = Gauge(label: "handoff_node_on_bus")
        let discoverOverrun = Counter(label: "handoff_node_discover_streams_overrun_total")
        let snapshotsAnsweredBusy = Counter(label: "handoff_node_snapshot_answers_busy_total")
        let eventsHeldBack = Counter(label: "handoff_node_events_held_back_total")
        let snapshotRounds = Resynchronization.Reason.allCases.map {
            Counter(label: "handoff_node_snapshot_rounds_total", dimensions: [("reason", $0.rawValue)])
        }

        /// Counts a message in or out on `socket`. The socket's counters are used where they are
        /// held: a `Traffic` returned (copied) cost a retain and a release for each of its counters,
        /// at every message.
        func count(_ socket: SocketKind, bytes: Int, out: Bool) {
            switch socket {
            case .bus: bus.count(bytes: bytes, out: out)
            case .continuationServer: server.count(bytes: bytes, out: out)
            case .continuationClient: client.count(bytes: bytes, out: out)
            }
        }
    }

    private let handles = Handles()

    init() {
        handles.streamsOpen.set(0)
        handles.currentActivities.record(0)
        handles.knownActivities.record(0)
        handles.onBus.record(0)
    }

    /// What every socket carried, in all: the node's presence reports it (wire.proto,
    /// `NodeTraffic`), for the operators' views of the bus.
    private(set) var totals = WireNodeTraffic()

    /// A message of `bytes` (all frames) received on `socket`.
    mutating func received(on socket: SocketKind, bytes: Int) {
        handles.count(socket, bytes: bytes, out: false)
        totals.messagesIn &+= 1
        totals.bytesIn &+= UInt64(bytes)
    }

    /// A message of `bytes` (all frames) sent on `socket`.
    mutating func sent(on socket: SocketKind, bytes: Int) {
        handles.count(socket, bytes: bytes, out: true)
        totals.messagesOut &+= 1
        totals.bytesOut &+= UInt64(bytes)
    }

    /// This node answered a continue request: with the activity, or with an error.
    func answeredContinue(restored: Bool) { (restored ? handles.answered : handles.refused).increment() }

    /// A continue request of this node ended after `duration`.
    func continueEnded(succeeded: Bool, after duration: Duration) {
        (succeeded ? handles.continued : handles.failed).increment()
        handles.continueDuration.recordNanoseconds(duration.nanoseconds)
    }

    /// A discover stream ended because its reader fell too far behind.
    func discoverStreamOverrun() { handles.discoverOverrun.increment() }

    /// A direct peer's snapshot was answered with a reply alone: this node answered the most already.
    func snapshotAnsweredBusy() { handles.snapshotsAnsweredBusy.increment() }

    /// The follower asked for its snapshots again, for `reason`.
    func snapshotRound(_ reason: Resynchronization.Reason) {
        handles.snapshotRounds[Resynchronization.Reason.allCases.firstIndex(of: reason)!].increment()
    }

    /// A node event about a peer's doings was not published: the peer's budget was spent (``PeerEventBudget``).
    func heldBackEvent() { handles.eventsHeldBack.increment() }

    /// Stream payload bytes that arrived or left.
    func streamed(in bytes: Int) { handles.streamBytesIn.increment(by: bytes) }
    func streamed(out bytes: Int) { handles.streamBytesOut.increment(by: bytes) }

    /// Gauges of the node's state, set on its tick.
    func state(streams: Int, current: Int, known: Int, onBus isOnBus: Bool) {
        handles.streamsOpen.set(streams)
        handles.currentActivities.record(current)
        handles.knownActivities.record(known)
        handles.onBus.record(isOnBus ? 1 : 0)
    }
}

/// The node's ``Node/SecurityCounters`` and ``Node/StreamCounters`` as swift-metrics counters,
/// reported by difference (the node owns the integers; this is the one place that maps them).
struct NodeCounterMetrics {
    private static func refusal(_ reason: String) -> Counter {
        Counter(label: "handoff_node_refusals_total", dimensions: [("reason", reason)])
    }
    private let replayed = refusal("replayed")
    private let stale = refusal("stale")
    private let foreign = refusal("foreign")
    private let overQuota = refusal("over_quota")
    private let subscribersCut = refusal("subscriptions_over_bound")
    private let unfinishedMessagesCut = refusal("unfinished_message")
    private let handshakeRefusals = Dictionary(uniqueKeysWithValues: HandshakeRefusals.Reason.allCases.map { ($0, refusal($0.label)) })
    private let streamsOverLimit = refusal("streams_over_limit")
    private let streamViolations = refusal("stream_protocol_violation")
    private let allowedHandshakes = Counter(label: "handoff_node_handshakes_allowed_total")
    private let malformedBus = Counter(label: "handoff_node_malformed_total", dimensions: [("socket", "bus")])
    private let malformedContinuation = Counter(label: "handoff_node_malformed_total", dimensions: [("socket", "continuation")])
    private let resumed = Counter(label: "handoff_node_stream_resumes_total")
    private let bytesResent = Counter(label: "handoff_node_stream_bytes_resent_total")
    private let duplicatesDropped = Counter(label: "handoff_node_stream_duplicate_bytes_dropped_total")
    private let lost = Counter(label: "handoff_node_streams_ended_total", dimensions: [("reason", "lost")])
    private let evicted = Counter(label: "handoff_node_streams_ended_total", dimensions: [("reason", "evicted")])
    private let stalled = Counter(label: "handoff_node_streams_ended_total", dimensions: [("reason", "stalled")])
    private let readersStopped = Counter(label: "handoff_node_streams_ended_total", dimensions: [("reason", "reader_stopped")])
    private let letGo = Counter(label: "handoff_node_streams_ended_total", dimensions: [("reason", "let_go")])
    private let endsNotVerified = Counter(label: "handoff_node_stream_ends_not_verified_total")
    private var security = Node.SecurityCounters()
    private var streams = Node.StreamCounters()

    mutating func report(_ new: Node.SecurityCounters) {
        let old = security
        add(replayed, new.replayedIgnored, old.replayedIgnored)
        add(stale, new.staleIgnored, old.staleIgnored)
        add(foreign, new.foreignIgnored, old.foreignIgnored)
        add(overQuota, new.overQuotaIgnored, old.overQuotaIgnored)
        add(subscribersCut, new.subscribersCut, old.subscribersCut)
        add(unfinishedMessagesCut, new.unfinishedMessagesCut, old.unfinishedMessagesCut)
        for (reason, counter) in handshakeRefusals {
            add(counter, new.handshakeRefusals[reason], old.handshakeRefusals[reason])
        }
        add(allowedHandshakes, new.allowedHandshakes, old.allowedHandshakes)
        add(malformedBus, new.malformedBus, old.malformedBus)
        add(malformedContinuation, new.malformedContinuation, old.malformedContinuation)
        security = new
    }

    mutating func report(_ new: Node.StreamCounters) {
        let old = streams
        add(streamsOverLimit, new.refusedOverLimit, old.refusedOverLimit)
        add(streamViolations, new.protocolViolations, old.protocolViolations)
        add(resumed, new.resumed, old.resumed)
        add(bytesResent, new.bytesResent, old.bytesResent)
        add(duplicatesDropped, new.duplicateBytesDropped, old.duplicateBytesDropped)
        add(lost, new.lost, old.lost)
        add(evicted, new.evicted, old.evicted)
        add(stalled, new.stalled, old.stalled)
        add(readersStopped, new.readersStopped, old.readersStopped)
        add(letGo, new.letGo, old.letGo)
        add(endsNotVerified, new.endsNotVerified, old.endsNotVerified)
        streams = new
    }
}

/// Adds to `counter` what a plain integer counter gained since it was last reported (the broker's
/// and the node's counters are reported by difference).
private func add<Value: BinaryInteger>(_ counter: Counter, _ new: Value, _ old: Value) {
    if new > old { counter.increment(by: Int(new - old)) }
}

extension Duration {
    /// The whole duration in nanoseconds (saturating).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? (seconds < 0 ? .min : .max) : product &+ attoseconds / 1_000_000_000
    }
}
