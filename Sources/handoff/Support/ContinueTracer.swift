import Foundation
import Handoff
import HandoffWire
import ZeroMQ

/// `handoff continue --trace`: a subscriber on the bus for the hops of one traced continue
/// (wire.proto, "Tracing"). The originator reports them on the bus, while the request itself goes
/// node to node: so the subscription must be in place at the broker before the request leaves.
/// It asks for a snapshot of the activity's type on the same connection after subscribing to the
/// hops; the broker's answer proves both subscriptions arrived.
struct ContinueTracer {
    let traceID = TraceRequest.newTraceID()
    private let context: Context
    private let socket: Socket
    /// When the continue was asked for: the trace's zero.
    private(set) var started = Date()

    init(bus: BusOptions, activityType: String) async throws {
        let watched = try WatchedBus(bus: nil, broker: bus.endpoints, security: bus.security, what: "trace a continue")
        context = try Context()
        socket = try watched.subscriber(in: context)
        try socket.subscribe("T:" + traceID)
        let snapshot = "S:" + TraceRequest.newTraceID() + "/" + activityType
        try socket.subscribe(snapshot)
        try socket.connect(watched.endpoint)
        let deadline = ContinuousClock.now + .seconds(3)
        var ready = false
        while !ready, ContinuousClock.now < deadline {
            guard let frames = try await socket.receiveMultipart(maxFrames: 2, timeout: max(.milliseconds(1), ContinuousClock.now.duration(to: deadline))),
                  frames.count == 2, frames[0].bytes.elementsEqual(snapshot.utf8) else { continue }
            if case .snapshotReply? = try? WireEnvelope.decode(frames[1].data).body { ready = true }
        }
        try? socket.unsubscribe(snapshot)
        guard ready else {
            socket.close()
            throw HandoffError(.remoteApplicationTimedOut, "the broker at \(watched.endpoint) did not answer within 3 s: no trace could be set up")
        }
    }

    /// Marks the moment the continue is asked for.
    mutating func start() { started = Date() }

    /// The originator's hops, until it reported its answer and the end of each stream pair it
    /// reported open, or `within` passed, and this node's own: asked, then `outcome` (restored, or
    /// the error) at `ended`.
    /// `streams`: the continue restored an activity with streams, so its pairs' hops are waited
    /// for too (within `within`): they can arrive after the restore returned, under load.
    func hops(within: Duration, outcome: String, ended: Date, endpoint: String, streams: Bool = false) async -> [TraceHopLine] {
        var reported: [(sender: WireNodeRef, hop: WireTraceHop)] = []
        let deadline = ContinuousClock.now + within
        let topic = Array(("T:" + traceID).utf8)
        func waiting() -> Bool {
            let count = { (kind: WireTraceHop.Kind) in reported.count { $0.hop.kind == kind } }
            return count(.continueAnswered) == 0 || (streams && count(.streamOpened) == 0) || count(.streamOpened) > count(.streamEnded)
        }
        // What has arrived is read whatever: a stream's hops queue behind the answer.
        while ContinuousClock.now < deadline {
            let wait = waiting() ? max(.milliseconds(1), ContinuousClock.now.duration(to: deadline)) : .zero
            let received: [Frame]?
            do { received = try await socket.receiveMultipart(maxFrames: 2, timeout: wait) } catch { break }
            guard let frames = received else {
                if waiting() { continue } else { break }
            }
            guard frames.count == 2, frames[0].bytes.elementsEqual(topic),
                  let envelope = try? WireEnvelope.decode(frames[1].data), case .traceHop(let hop) = envelope.body,
                  hop.traceID == traceID else { continue }
            reported.append((envelope.sender, hop))
        }
        socket.close()
        // In causal order: the originator's hops between this node's two, whatever its clock says,
        // but for a pair's end there, which may come after this node's restore returned (the
        // originator's half ends when this node's end reaches it): placed by its time.
        let theirs = reported.sorted { $0.hop.at.date < $1.hop.at.date }
        let endsAfter = { (report: (sender: WireNodeRef, hop: WireTraceHop)) in report.hop.kind == .streamEnded && report.hop.at.date > ended }
        let afterEnd = theirs.filter(endsAfter)
        let beforeEnd = theirs.filter { !endsAfter($0) }
        return [TraceHopLine(node: "this node", nodeID: "", hop: "asked", at: started, since: started, detail: "continuing, from the originator at \(endpoint)")]
            + beforeEnd.map { TraceHopLine($0.sender, $0.hop, since: started) }
            + [TraceHopLine(node: "this node", nodeID: "", hop: "ended", at: ended, since: started, detail: outcome)]
            + afterEnd.map { TraceHopLine($0.sender, $0.hop, since: started) }
    }
}
