import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ZeroMQ

/// `handoff trace`: follows one activity's advertisement across the bus, hop by hop (wire.proto,
/// "Tracing"): the origin's send, each broker's receive, cache and forward, each follower's
/// receive and what it delivered.
struct TraceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trace",
        abstract: "Follow one activity's advertisement across the bus: each hop with its time.",
        discussion: """
            Asks the activity's origin to advertise it once more, traced; every party that handles \
            that one envelope reports when and what it did. Times are on each party's clock, \
            relative to the origin's send: exact on one host, off by the clocks' offset across hosts.
            """)

    @Option(help: "The activity to trace (its id).") var id: String?
    @Option(help: "Trace the first activity heard whose type starts with this prefix.") var type: String?
    @Option(help: "The broker's backend (default: the backend of --broker, else of $HANDOFF_BROKER, else tcp://127.0.0.1:5556).")
    var bus: String?
    @Option(name: .customLong("broker"), parsing: .upToNextOption,
            help: ArgumentHelp("The broker's frontend and backend, as every other command names it (or $HANDOFF_BROKER).", valueName: "frontend backend"))
    var broker: [String] = []
    @Option(help: "How long to look for the activity, in seconds.") var wait: Double = 3
    @Option(help: "How long to collect hops after asking, in seconds.") var seconds: Double = 2
    @Flag(help: "One JSON object: the activity and its hops.") var json = false
    @OptionGroup var security: SecurityOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        guard (id == nil) != (type == nil) else { throw ValidationError("give --id or --type (one of them)") }
        guard wait > 0, seconds > 0 else { throw ValidationError("--wait and --seconds take a positive number of seconds") }
        guard broker.isEmpty || bus == nil else { throw ValidationError("give --broker or --bus, not both") }
    }

    func run() async throws {
        logging.bootstrap(defaultLevel: .warning)
        let bus = try WatchedBus(bus: bus, broker: broker, security: security, what: "trace")
        let socket = try bus.subscriber(in: Context())
        defer { socket.close() }
        let prefix = type ?? ""
        try socket.subscribe("A:" + prefix)
        try socket.subscribe("S:" + TraceRequest.newTraceID() + "/" + prefix)
        try socket.connect(bus.endpoint)

        let target = try await find(on: socket)
        let request = TraceRequest(origin: target.origin.nodeID, traceID: TraceRequest.newTraceID(), activityID: target.activityID)
        // Both subscriptions travel in order on one connection: the hops' topic is in place at the
        // broker before the origin hears the request.
        try socket.subscribe(request.hopsTopic)
        try socket.subscribe(request.topic)
        var hops: [(sender: WireNodeRef, hop: WireTraceHop)] = []
        // The traced advertisement itself comes here too (this socket follows its type): its
        // arrival is the last hop of the path a subscriber of this host sees, origin to here.
        let tracedTopic = "A:" + target.activityType
        var heardHere = false
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < end {
            guard let frames = try await socket.receiveMultipart(maxFrames: 2, timeout: max(.milliseconds(1), ContinuousClock.now.duration(to: end))),
                  frames.count == 2 else { continue }
            let arrived = Date()
            if frames[0].bytes.elementsEqual(request.hopsTopic.utf8) {
                guard let envelope = try? WireEnvelope.decode(frames[1].data), case .traceHop(let hop) = envelope.body,
                      hop.traceID == request.traceID else { continue }
                hops.append((envelope.sender, hop))
            } else if !heardHere, frames[0].bytes.elementsEqual(tracedTopic.utf8),
                      let envelope = try? WireEnvelope.decode(frames[1].data), envelope.traceID == request.traceID,
                      case .advertisement(let advertisement) = envelope.body, advertisement.activityID == target.activityID {
                heardHere = true
                hops.append(Self.receivedHere(request, at: arrived))
            }
        }
        try? socket.unsubscribe(request.topic)
        report(target, request: request, hops: hops)
        guard hops.contains(where: { $0.hop.kind == .sent }) else {
            throw HandoffError(.remoteApplicationTimedOut, "\(target.origin.name) did not answer the trace within \(seconds) s (an older node, or the activity ended)")
        }
    }

    /// The activity to trace: from the bus or the broker's snapshot, within `wait`.
    private func find(on socket: Socket) async throws -> WireAdvertisement {
        let end = ContinuousClock.now + .milliseconds(Int(wait * 1000))
        while ContinuousClock.now < end {
            guard let frames = try await socket.receiveMultipart(maxFrames: 2, timeout: max(.milliseconds(1), ContinuousClock.now.duration(to: end))),
                  frames.count == 2, let envelope = try? WireEnvelope.decode(frames[1].data),
                  case .advertisement(let advertisement) = envelope.body else { continue }
            if let id, advertisement.activityID != id { continue }
            return advertisement
        }
        throw HandoffError(.activityNotFound, id.map { "no activity \($0) heard on the bus within \(wait) s" }
            ?? "no activity of a type starting with \"\(type ?? "")\" heard on the bus within \(wait) s")
    }

    private func report(_ target: WireAdvertisement, request: TraceRequest, hops: [(sender: WireNodeRef, hop: WireTraceHop)]) {
        let ordered = hops.sorted { $0.hop.at.date < $1.hop.at.date }
        let origin = ordered.first { $0.hop.kind == .sent }?.hop.at.date ?? ordered.first?.hop.at.date ?? Date()
        let lines = ordered.map { TraceHopLine($0.sender, $0.hop, since: origin) }
        if json {
            announce(jsonLine(TraceReport(
                trace: request.traceID, activityID: target.activityID, type: target.activityType, title: target.title,
                origin: target.origin.name, hops: lines)))
            return
        }
        announce("trace \(request.traceID) of \"\(target.title)\" (\(target.activityType)) \(target.activityID) from \(target.origin.name)")
        TraceHopLine.announce(lines)
    }

    /// The hop this command reports for itself: the traced advertisement reached its subscriber.
    static func receivedHere(_ request: TraceRequest, at date: Date) -> (sender: WireNodeRef, hop: WireTraceHop) {
        var here = WireNodeRef()
        here.name = "this trace"
        var hop = WireTraceHop()
        hop.traceID = request.traceID
        hop.kind = .received
        hop.activityID = request.activityID
        hop.at = WireTimestamp(date)
        hop.detail = "on this host, by this command's subscriber"
        return (here, hop)
    }
}

/// `trace --json`: the traced activity and its hops.
private struct TraceReport: Encodable {
    let trace: String
    let activityID: String
    let type: String
    let title: String
    let origin: String
    let hops: [TraceHopLine]
}
