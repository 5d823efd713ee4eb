import HandoffWire
import Foundation

/// One moment of a ``BusView``: what the live page draws, `handoff top` prints, and
/// `/view.json` and `top --json` carry (as JSON, these names).
public struct BusViewSnapshot: Codable, Sendable, Equatable {
    /// A node heard on the bus.
    public struct Node: Codable, Sendable, Equatable {
        public var id: String
        public var name: String
        public var host: String
        /// Activities its last presence listed (`partial`: more than fit the frame).
        public var activities: Int
        public var partial: Bool
        public var lastHeardSecondsAgo: Double
        /// Its presence is later than its lease: it left or died (shown a minute, then dropped).
        public var gone: Bool
        /// What this view heard it publish on the bus.
        public var publishedMessages: Int
        public var publishedBytes: Int
        /// What its own sockets carried, in all and per second, as its presence reports
        /// (wire.proto, `NodeTraffic`); `nil` until a presence said (or from an older node).
        public var traffic: Traffic?
    }

    /// A node's traffic as its presence reports it.
    public struct Traffic: Codable, Sendable, Equatable {
        public var messagesIn: UInt64
        public var bytesIn: UInt64
        public var messagesOut: UInt64
        public var bytesOut: UInt64
        /// Over the last two presences; `nil` until two arrived.
        public var messagesInPerSecond: Double?
        public var messagesOutPerSecond: Double?
        public var bytesInPerSecond: Double?
        public var bytesOutPerSecond: Double?
    }

    /// The activities current of one type.
    public struct ActivityType: Codable, Sendable, Equatable {
        public var type: String
        public var activities: Int
        /// How many nodes advertise them.
        public var nodes: Int
    }

    /// A continuation stream, as its nodes' events tell (wire.proto, `NodeEvent`).
    public struct Stream: Codable, Sendable, Equatable {
        public enum State: String, Codable, Sendable {
            case open, finished, failed
        }
        /// The node that reports it, and the other end.
        public var node: String
        public var peer: String
        public var type: String
        public var id: UInt64
        public var sent: UInt64
        public var received: UInt64
        /// The total its writer announced (0: unknown).
        public var expected: UInt64
        public var state: State
        public var detail: String
        public var secondsOpen: Double
    }

    /// One second of the chart.
    public struct Second: Codable, Sendable, Equatable {
        public var messages: Int
        public var bytes: Int
    }

    /// What this view watches, and from where (e.g. "broker tcp://0.0.0.0:5556").
    public var source: String
    public var observingSeconds: Double
    public var nodes: [Node]
    public var types: [ActivityType]
    public var streams: [Stream]
    /// The last minute, a second at a time, oldest first.
    public var rates: [Second]
    /// Over the last ten whole seconds.
    public var messagesPerSecond: Double
    public var bytesPerSecond: Double
    public var totalMessages: Int
    public var totalBytes: Int
    /// Continue requests answered (as the originators' events tell).
    public var continuations: Int
    /// Messages that were not a topic and a well-formed envelope.
    public var malformed: Int
    /// Nodes, activities or streams not shown: past the view's bounds (``BusView/Limits``).
    public var overflow: Int
    /// What the process serving the view refused, by reason (its own counters; empty for
    /// `handoff top` on the bus alone).
    public var refusals: [String: UInt64]
}

extension BusView {
    /// What the view shows as of `now`; `refusals` are the serving process's own.
    public func snapshot(source: String, refusals: [String: UInt64] = [:], now: ContinuousClock.Instant) -> BusViewSnapshot {
        let rates = rates(now: now)
        let lastTen = rates.suffix(10)
        var byType: [String: (activities: Int, nodes: Set<String>)] = [:]
        for activity in activities.values where activity.expires > now {
            byType[activity.type, default: (0, [])].activities += 1
            byType[activity.type]!.nodes.insert(activity.origin)
        }
        return BusViewSnapshot(
            source: source,
            observingSeconds: (now - started).seconds,
            nodes: nodes.map { id, node in node.snapshot(id: id, now: now) }
                .sorted { ($0.gone ? 1 : 0, $0.name, $0.id) < ($1.gone ? 1 : 0, $1.name, $1.id) },
            types: byType.map { .init(type: $0.key, activities: $0.value.activities, nodes: $0.value.nodes.count) }
                .sorted { ($1.activities, $0.type) < ($0.activities, $1.type) },
            streams: streams.values.map { $0.snapshot(now: now) }
                .sorted { ($0.node, $0.id) < ($1.node, $1.id) },
            rates: rates.map { .init(messages: $0.messages, bytes: $0.bytes) },
            messagesPerSecond: Double(lastTen.reduce(0) { $0 + $1.messages }) / Double(max(lastTen.count, 1)),
            bytesPerSecond: Double(lastTen.reduce(0) { $0 + $1.bytes }) / Double(max(lastTen.count, 1)),
            totalMessages: total.messages, totalBytes: total.bytes,
            continuations: continuations, malformed: malformed, overflow: overflow, refusals: refusals)
    }
}

extension BusView.NodeRecord {
    func snapshot(id: String, now: ContinuousClock.Instant) -> BusViewSnapshot.Node {
        BusViewSnapshot.Node(
            // (Heard publishing before its first presence: named by its id until it comes.)
            id: id, name: name.isEmpty ? "(" + id.prefix(8) + "…)" : name, host: host, activities: activityCount, partial: partial,
            lastHeardSecondsAgo: ((now - lastHeard).seconds * 10).rounded() / 10,
            gone: now - lastHeard > lease,
            publishedMessages: published.messages, publishedBytes: published.bytes,
            traffic: traffic.map { latest, at in
                var traffic = BusViewSnapshot.Traffic(
                    messagesIn: latest.messagesIn, bytesIn: latest.bytesIn, messagesOut: latest.messagesOut, bytesOut: latest.bytesOut)
                if let (before, then) = previousTraffic, at > then {
                    let seconds = (at - then).seconds
                    func rate(_ a: UInt64, _ b: UInt64) -> Double { a >= b ? Double(a - b) / seconds : 0 }
                    traffic.messagesInPerSecond = rate(latest.messagesIn, before.messagesIn)
                    traffic.messagesOutPerSecond = rate(latest.messagesOut, before.messagesOut)
                    traffic.bytesInPerSecond = rate(latest.bytesIn, before.bytesIn)
                    traffic.bytesOutPerSecond = rate(latest.bytesOut, before.bytesOut)
                }
                return traffic
            })
    }
}

extension BusView.StreamRecord {
    func snapshot(now: ContinuousClock.Instant) -> BusViewSnapshot.Stream {
        BusViewSnapshot.Stream(
            node: node, peer: peer, type: activityType, id: streamID, sent: sent, received: received,
            expected: expected, state: state, detail: detail, secondsOpen: ((updated - opened).seconds * 10).rounded() / 10)
    }
}
