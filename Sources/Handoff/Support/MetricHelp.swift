/// The help text of every metric family a broker or a node reports: Prometheus' `# HELP` line.
///
/// swift-metrics, which the broker and the node report to, has no place for help text, so the
/// exporter (`handoff … --metrics`) looks each family up here by name. Prometheus' tools reject a
/// family without one (`promtool check metrics`, which MetricsTests runs on a real broker's and
/// agent's `/metrics`). A family added in Metrics.swift gets its line here and in
/// docs/operations.md.
public enum MetricHelp {
    /// The help text of the family `name`, or `nil` for a family this build does not describe.
    public static func text(for name: String) -> String? { texts[name] }

    private static let texts: [String: String] = [
        // The broker.
        "handoff_broker_messages_total": "Bus messages the broker received from publishers (socket=frontend) and handed to subscribers (socket=backend; forwarded and snapshots, once however many subscribers).",
        "handoff_broker_bytes_total": "Bytes (all frames) of the bus messages in handoff_broker_messages_total.",
        "handoff_broker_subscriptions_total": "Subscriptions and unsubscriptions seen at the broker's backend.",
        "handoff_broker_cached_activities": "Activities in the broker's last-value cache now.",
        "handoff_broker_cached_bytes": "Memory the broker's cached activities take now: their frames, and 256 bytes each of bookkeeping (at most --cache-mib).",
        "handoff_broker_snapshots_total": "Snapshot requests the broker answered.",
        "handoff_broker_snapshots_busy_total": "Of those, answered at once with their count alone while 64 answers were under way; the asker asks again after its backoff.",
        "handoff_broker_snapshot_advertisements_total": "Cached advertisements the broker sent in snapshots.",
        "handoff_broker_refusals_total": "What the broker refused, by reason: forged and over-quota messages, and handshakes (handshake_no_curve, handshake_key_not_in_account, handshake_key_not_proven, handshake_malformed, handshake_incomplete).",
        "handoff_broker_handshakes_allowed_total": "CURVE handshakes the broker let in.",
        "handoff_broker_malformed_total": "Messages at the broker that are not what the contract says (not a topic and an envelope, too many frames, an unreadable envelope).",
        "handoff_broker_site_messages_total": "Bus messages on the links between sites: to and from the upstream brokers (link=upstream), from the sites joined below and the copies sent down to them, one per site (link=sites).",
        "handoff_broker_site_dropped_total": "Site messages dropped: this site's own come back (returned), a pair's second copy (duplicate), one that went round a loop of links or crossed too many (loop).",
        "handoff_broker_site_interests_refused_total": "Subscriptions of sites below not taken: past the bounds of what sites may follow (1,000 sites, 10,000 topic prefixes each, 257 bytes a prefix, no request, snapshot or site topic), naming no valid site, or (CURVE) a name another key holds or a ninth name of one key that is no relay's (logged once per site).",
        "handoff_broker_upstream_interests_refused_total": "A site broker's subscriptions followed at the site but not upstream: past 10,000 prefixes, 256 brought by one key (CURVE; relays aside), or longer than any topic.",
        "handoff_broker_requests_refused_total": "Subscribers' requests for the publishers (R:, X:) not passed on: malformed, or past their key's budget (50 at once, then 10 a second; relays unbounded).",
        "handoff_broker_readvertise_requests_total": "Requests that nodes advertise again what the cache lacks: one origin (R:), or every node at once (a subscribe-all, when too many lack at once).",
        "handoff_broker_readvertise_lapsed_total": "Of the origins asked to advertise again, those asked for copies the cache held and let lapse (secure brokers): asked whatever their key's hold-back, once per lapse.",
        // The node (an agent, or any process that hosts a Node).
        "handoff_node_messages_total": "Messages per socket kind (bus, continuation_server, continuation_client) and direction.",
        "handoff_node_bytes_total": "Bytes (all frames) of the messages in handoff_node_messages_total.",
        "handoff_node_continuations_answered_total": "Continue requests this node answered: with the activity (restored) or with an error (refused).",
        "handoff_node_continue_requests_total": "Continues this node made, by result.",
        "handoff_node_continue_duration_seconds": "Time from a continue request of this node to its activity restored.",
        "handoff_node_streams_open": "Continuation stream pairs open now.",
        "handoff_node_stream_bytes_total": "Stream payload bytes received (each once) and sent (resends included).",
        "handoff_node_stream_resumes_total": "Stream pairs resumed after a broken connection.",
        "handoff_node_stream_bytes_resent_total": "Stream bytes sent again after resumes.",
        "handoff_node_stream_duplicate_bytes_dropped_total": "Stream bytes that arrived twice and were dropped.",
        "handoff_node_streams_ended_total": "Stream pairs that failed: peer silent past the resume window (lost), ended under pressure for making no progress (evicted), given up on after the stall timeout without progress (stalled), cancelled because this node's application stopped reading before the end (reader_stopped) or let go of the pair leaving bytes unended or unread (let_go).",
        "handoff_node_stream_ends_not_verified_total": "Stream ends held to their length only: no checksum, or one in another algorithm than the writer's open announced.",
        "handoff_node_refusals_total": "What this node's checks refused or ignored, by reason: replayed, stale, foreign and over-quota messages, streams over the limit or breaking the protocol, and handshakes (handshake_no_curve, handshake_key_not_in_account, handshake_key_not_proven, handshake_malformed, handshake_incomplete).",
        "handoff_node_handshakes_allowed_total": "CURVE handshakes this node let in at its server sockets.",
        "handoff_node_malformed_total": "Input at this node that is not what the contract says, by socket (bus, continuation).",
        "handoff_node_current_activities": "Activities current on this node now.",
        "handoff_node_known_activities": "Other nodes' activities known to this node now.",
        "handoff_node_on_bus": "1 when this node is on the bus (as /healthz says), else 0.",
        "handoff_node_discover_streams_overrun_total": "Discover streams ended because their reader fell more than maxDiscoverBacklog events behind.",
        "handoff_node_events_held_back_total": "Node events about a peer's continues and stream pairs not published: more than 50 a second about that peer (after a burst of 200).",
        "handoff_node_snapshot_rounds_total": "Rounds of snapshots this node asked for again to repair what the bus lost: a bus connection came back (reconnected), a presence named activities not held here (unheld_ids), or came after its origin was silent here for over half a lease (silence_ended). At most one a second.",
        "handoff_node_snapshot_answers_busy_total": "Direct peers' snapshot requests answered with a reply alone (the asker asks again), while this node answered the most it answers at once.",
    ]
}
