import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ZeroMQ

/// `handoff monitor`: a live view of the bus, filtered by type or node, as text, JSON, raw frames,
/// or per-type rates.
struct MonitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "monitor",
        abstract: "Watch the bus live: advertisements and withdrawals, presence, continuations, streams with progress.",
        discussion: "--stats prints per-type message and byte rates every second instead of each message (like `redis-cli --stat`).")
    @Option(help: "The broker's backend, or its capture endpoint (default: the backend of --broker, else of $HANDOFF_BROKER, else tcp://127.0.0.1:5556).")
    var bus: String?
    @Option(name: .customLong("broker"), parsing: .upToNextOption,
            help: ArgumentHelp("The broker's frontend and backend, as every other command names it (or $HANDOFF_BROKER): the monitor watches the backend (of the first broker of a pair).", valueName: "frontend backend"))
    var broker: [String] = []
    @Option(help: "Only activities and events whose type starts with this prefix (presence, which has no type, is left out).")
    var type: String?
    @Option(help: "Only what this node sends or is about: its name or its id (or a prefix of the id).")
    var node: String?
    @Option(help: "Stop after this many messages shown.") var count: Int?
    @Flag(help: "Each message's frames in hexadecimal, after its topic.") var raw = false
    @Flag(help: "Per-type rates every second instead of each message.") var stats = false
    @Flag(help: "One JSON object a line, for scripts.") var json = false
    @Option(help: "Stop after this many seconds.") var seconds: Double?
    @OptionGroup var security: SecurityOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard count.map({ $0 > 0 }) ?? true else { throw ValidationError("--count takes a positive number") }
        guard !(stats && raw) else { throw ValidationError("--stats and --raw show different things: pick one") }
        if !broker.isEmpty { _ = try Environment.bus(broker) }
        guard broker.isEmpty || bus == nil else { throw ValidationError("give --broker or --bus, not both") }
    }

    func run() async throws {
        logging.bootstrap(defaultLevel: .warning)
        let watched = try WatchedBus(bus: self.bus, broker: broker, security: security, what: "watch it")
        let (bus, keys) = (watched.endpoint, watched.keys)
        let context = try Context()
        let subscriber = try watched.subscriber(in: context)
        // A refusal shows as a failed handshake, or (a keyless client against a CURVE broker, when the
        // broker hangs up before the client has read its greeting) as a connection closed before any
        // handshake succeeded: both are reported, never taken for a quiet bus.
        let handshakes = try subscriber.monitor([.handshakeFailedAuth, .handshakeFailedProtocol, .handshakeSucceeded, .disconnected])
        var handshaken = false
        defer { handshakes.stop() }
        // The type filter is ZeroMQ's own: only the matching topics cross the network.
        for topic in type.map({ ["A:" + $0, "E:" + $0] }) ?? [""] { try subscriber.subscribe(topic) }
        try subscriber.connect(bus)
        let limit = seconds.map { ContinuousClock.now + .milliseconds(Int($0 * 1000)) }
        var printer = MonitorPrinter(json: json, raw: raw, started: .now)
        var rates = MonitorRates(json: json)
        var nextStats = ContinuousClock.now + .seconds(1)
        var shown = 0
        if !json { announce("watching \(bus)\(type.map { " for \($0)*" } ?? "")\(node.map { " from \($0)" } ?? "") (Ctrl-C to stop)") }
        while limit.map({ ContinuousClock.now < $0 }) ?? true, count.map({ shown < $0 }) ?? true {
            let remaining = limit.map { ContinuousClock.now.duration(to: $0) } ?? .seconds(3600)
            // A refused key is an error to report, not a quiet bus (checked at least every 250 ms).
            while let event = try await handshakes.next(timeout: .zero) {
                if event.kind == .handshakeSucceeded { handshaken = true; continue }
                if event.kind == .disconnected && handshaken { continue }  // the broker restarted: libzmq reconnects
                if keys != nil, event.kind == .disconnected {
                    throw HandoffError(.unauthorized, "the broker at \(event.endpoint) hung up during the CURVE handshake: check that --broker-key is its key and that it runs CURVE")
                }
                if let keys {
                    throw HandoffError(.unauthorized, "the broker at \(event.endpoint) refused this key at the CURVE handshake: \(keys.keyPair.publicKey.z85) is not in its account")
                }
                throw HandoffError(.unauthorized, "the broker at \(event.endpoint) refused the handshake: it runs CURVE; give the monitor a key in its account (--key)")
            }
            if stats, ContinuousClock.now >= nextStats {
                rates.report(over: .seconds(1))
                nextStats = nextStats + .seconds(1)
            }
            let wait = stats ? min(remaining, ContinuousClock.now.duration(to: nextStats)) : remaining
            guard let frames = try await subscriber.receiveMultipart(maxFrames: 4, timeout: max(min(wait, .milliseconds(250)), .milliseconds(1))) else { continue }
            let message = MonitoredMessage(frames)
            // A hub's copies for the sites below ("L:" + site + "|" + topic, wire.proto "Sites")
            // repeat what its subscribers hear anyway.
            if message.topic.hasPrefix("L:") { continue }
            guard message.matches(type: type, node: node) else { continue }
            shown += 1
            if stats { rates.count(message) } else { printer.show(message) }
        }
        if stats { rates.report(over: nil) }
    }
}

extension Socket {
    /// The next multipart message of at most `maxFrames` frames, or `nil` when none starts within
    /// `timeout`; a longer one comes back as its first frames alone, the rest dropped.
    func receiveMultipart(maxFrames: Int, timeout: Duration) async throws -> [Frame]? {
        guard let first = try await receive(timeout: timeout) else { return nil }
        var frames = [first]
        while frames.last!.hasMore {
            let next = try await receive()
            if frames.count < maxFrames { frames.append(next) }
        }
        return frames
    }
}

/// One bus message as the monitor sees it.
struct MonitoredMessage {
    let frames: [Frame]
    let topic: String
    let envelope: WireEnvelope?

    init(_ frames: [Frame]) {
        self.frames = frames
        topic = frames.first.map { String(decoding: $0.bytes, as: UTF8.self) } ?? ""
        envelope = frames.count == 2 ? try? WireEnvelope.decode(frames[1].data) : nil
    }

    /// A subscriber's subscription (or its withdrawal) as a broker's capture copies it: one frame,
    /// 1 (or 0) and the topic.
    var subscription: (subscribes: Bool, topic: String)? {
        guard frames.count == 1, let kind = frames[0].bytes.first, kind <= 1 else { return nil }
        return (kind == 1, String(decoding: frames[0].bytes.dropFirst(), as: UTF8.self))
    }

    /// The activity type it is about, if any.
    var activityType: String? {
        switch envelope?.body {
        case .advertisement(let ad): ad.activityType
        case .withdrawal(let withdrawal): withdrawal.activityType
        case .nodeEvent(let event): event.activityType
        default: nil
        }
    }

    /// What the rates are grouped by: the activity type, else the kind of message.
    var group: String {
        if let activityType { return activityType }
        if subscription != nil { return "(subscriptions)" }
        switch envelope?.body {
        case .nodePresence: return "(presence)"
        case .snapshotReply: return "(snapshot)"
        case nil: return "(malformed)"
        default: return "(other)"
        }
    }

    func matches(type: String?, node: String?) -> Bool {
        if let type, !(activityType?.hasPrefix(type) ?? false) { return false }
        guard let node else { return true }
        guard let envelope else { return false }
        var names = [envelope.sender.name, envelope.sender.nodeID]
        switch envelope.body {
        case .advertisement(let ad): names += [ad.origin.name, ad.origin.nodeID]
        case .withdrawal(let withdrawal): names += [withdrawal.origin.name, withdrawal.origin.nodeID]
        case .nodeEvent(let event): names += [event.peer.name, event.peer.nodeID]
        default: break
        }
        return names.contains { $0 == node || (!node.isEmpty && $0.hasPrefix(node) && $0.count >= 32) }
    }
}

/// Prints each message: a line of text, a JSON object, or its frames in hexadecimal.
struct MonitorPrinter {
    let json: Bool
    let raw: Bool
    let started: ContinuousClock.Instant
    /// Advertisements so far by type (bounded as ``MonitorRates``'s).
    var counts = BoundedTally(zero: 0)

    mutating func show(_ message: MonitoredMessage) {
        let elapsed = milliseconds(ContinuousClock.now - started) / 1000
        let at = String(format: "%.3f", elapsed)
        if raw {
            let hex = message.frames.map { $0.bytes.map { String(format: "%02x", $0) }.joined() }
            if json { announce(jsonLine(MonitorLine(event: "raw", time: at, topic: message.topic, frames: hex))) } else { announce("\(at)s  \(message.topic)  \(hex.joined(separator: " "))") }
            return
        }
        if let (subscribes, topic) = message.subscription {
            let event = subscribes ? "subscription" : "unsubscription"
            if json { announce(jsonLine(MonitorLine(event: event, time: at, topic: topic))) } else { announce("\(at)s  \(subscribes ? "sub  " : "unsub")  \(topic)") }
            return
        }
        guard let envelope = message.envelope else {
            if json { announce(jsonLine(MalformedLine(frames: message.frames.count))) } else { announce("?? malformed message (\(message.frames.count) frames)") }
            return
        }
        switch envelope.body {
        case .advertisement(let ad):
            let counted = counts.add(ad.activityType) { $0 += 1 }
            if json {
                announce(jsonLine(MonitorLine(
                    event: "advertisement", time: at, id: ad.activityID, type: ad.activityType, title: ad.title, node: ad.origin.name,
                    nodeID: ad.origin.nodeID, version: ad.version, sequence: envelope.sequence, bytes: message.frames[1].count)))
            } else {
                let count = counts[counted]!
                announce("\(at)s  ad   \(ad.origin.name)  \(ad.activityType)  \"\(ad.title)\"  v\(ad.version)  (\(count) so far, \(String(format: "%.1f", Double(count) / max(elapsed, 0.001)))/s)")
            }
        case .withdrawal(let withdrawal):
            if json {
                announce(jsonLine(MonitorLine(
                    event: "withdrawal", time: at, id: withdrawal.activityID, type: withdrawal.activityType, node: withdrawal.origin.name,
                    reason: "\(withdrawal.reason)")))
            } else {
                announce("\(at)s  gone \(withdrawal.origin.name)  \(withdrawal.activityType)  (\(withdrawal.reason))")
            }
        case .nodePresence(let presence):
            if json {
                announce(jsonLine(MonitorLine(
                    event: "presence", time: at, node: presence.node.name, nodeID: presence.node.nodeID, host: presence.node.host,
                    activities: presence.activityIds.count, leaseMs: presence.leaseMs)))
            } else {
                announce("\(at)s  pres \(presence.node.name) on \(presence.node.host)  \(presence.activityIds.count)\(presence.partial ? "+" : "") activities")
            }
        case .nodeEvent(let event):
            let name: String = switch event.kind {
            case .continued: "continued"
            case .streamOpened: "stream-opened"
            case .streamProgress: "stream-progress"
            case .streamFinished: "stream-finished"
            case .streamFailed: "stream-failed"
            default: "event"
            }
            if json {
                announce(jsonLine(MonitorLine(
                    event: name, time: at, id: event.activityID, type: event.activityType, node: envelope.sender.name,
                    peer: event.peer.name, stream: event.streamID, sent: event.bytesSent, received: event.bytesReceived,
                    expected: event.expectedLength, detail: event.detail)))
            } else if event.kind == .continued {
                announce("\(at)s  cont \(envelope.sender.name) → \(event.peer.name)  \(event.activityType)")
            } else {
                let expected = event.expectedLength > 0 ? " of \(event.expectedLength)" : ""
                announce("\(at)s  \(name) \(envelope.sender.name)  \(event.activityType) #\(event.streamID)  sent \(event.bytesSent)  received \(event.bytesReceived)\(expected)" + (event.detail.isEmpty ? "" : "  (\(event.detail))"))
            }
        default:
            if json { announce(jsonLine(MonitorLine(event: "other", time: at, topic: message.topic))) }
        }
    }
}

/// Per-type counts for `--stats`: messages and bytes since the last report, and in all.
struct MonitorRates {
    let json: Bool
    /// Bounded (a member may publish as many types as it likes); names past the bound are counted
    /// as one row. A window's names are the total's.
    private var window = BoundedTally(zero: (messages: 0, bytes: 0))
    private var total = BoundedTally(zero: (messages: 0, bytes: 0))
    private var reports = 0

    init(json: Bool) { self.json = json }

    mutating func count(_ message: MonitoredMessage) {
        let bytes = message.frames.reduce(0) { $0 + $1.count }
        let name = total.add(message.group) { $0.messages += 1; $0.bytes += bytes }
        window.add(name) { $0.messages += 1; $0.bytes += bytes }
    }

    /// Prints the rates over the last `interval` (or, at the end, the totals) and starts a new window.
    mutating func report(over interval: Duration?) {
        let rows = (interval == nil ? total : window).counts
        let seconds = interval.map { milliseconds($0) / 1000 } ?? 1
        if json {
            for (group, counts) in rows.sorted(by: { $0.key < $1.key }) {
                announce(jsonLine(MonitorLine(
                    event: interval == nil ? "total" : "rate", type: group, bytes: counts.bytes, messages: counts.messages,
                    perSecond: Double(counts.messages) / seconds)))
            }
        } else {
            if reports % 20 == 0 || interval == nil {
                announce(interval == nil ? "total" : "type                                          msg/s     bytes/s      total")
            }
            for (group, counts) in rows.sorted(by: { $0.key < $1.key }) {
                let all = total[group]?.messages ?? 0
                // Padded to the column, never cut: two long types that share their first 44
                // characters stay two names (such a row runs past the column instead).
                let name = group + String(repeating: " ", count: max(0, 44 - group.count))
                let line = interval == nil
                    ? "\(name)  \(counts.messages) messages, \(counts.bytes) bytes"
                    : "\(name)  \(String(format: "%7.0f", Double(counts.messages) / seconds))  \(String(format: "%10.0f", Double(counts.bytes) / seconds))  \(String(format: "%9d", all))"
                announce(line)
            }
        }
        reports += 1
        window.removeAll()
    }
}

/// `monitor --json`: one line per message (or per type and interval with `--stats`); the fields
/// a kind of line has are set, the others left out.
private struct MonitorLine: Encodable {
    let event: String
    var time: String?
    var topic: String?
    var frames: [String]?
    var id: String?
    var type: String?
    var title: String?
    var node: String?
    var nodeID: String?
    var host: String?
    var version: UInt64?
    var sequence: UInt64?
    var bytes: Int?
    var reason: String?
    var activities: Int?
    var leaseMs: UInt32?
    var peer: String?
    var stream: UInt64?
    var sent: UInt64?
    var received: UInt64?
    var expected: UInt64?
    var detail: String?
    var messages: Int?
    var perSecond: Double?
}

/// `monitor --json`: a message that is not a topic and an envelope.
private struct MalformedLine: Encodable {
    let event = "malformed"
    let frames: Int
}
