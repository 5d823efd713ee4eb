import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

// The transport floor of a continue between two processes: a DEALER and a ROUTER of this package's
// ZeroMQ module, each awaiting its socket on the event loops as a node does (ReadinessWatcher),
// sending bytes of a continue request's and reply's sizes, with no node, no actor and no protobuf.
// Beside raw REQ/REP in C and Handoff's continue, it splits the gap between them: what the loops,
// the Swift wrapper and async waiting cost, and what the protocol's own work costs. With `--actor`
// the asker asks from an actor whose receiver task resumes it, as a node does; with `--codec` each
// end also encodes and decodes the real envelopes (a continue request; a reply holding the
// edit-contact activity). Each parts one more piece from the rest of the node's work.

/// The sizes the floor sends: about a continue request's and the edit-contact reply's envelopes.
private let floorRequestBytes = 128, floorReplyBytes = 360

/// What the floor's ends do besides sending and receiving bytes.
enum FloorMode: CaseIterable {
    /// Nothing: the transport as this package drives it.
    case bare
    /// The asker asks as a node asks: from an actor, its reply read by a receiver task (``FloorClient``).
    case actor
    /// Each end encodes and decodes the real envelopes.
    case codec

    var replierArguments: [String] { self == .codec ? ["--codec"] : [] }
    var askerArguments: [String] { self == .bare ? [] : self == .actor ? ["--actor"] : ["--codec"] }
}

/// Round trips between a `floor-asker` and a `floor-replier` process: the asker's p50 and p99 over
/// `rounds`, after 200 of warm-up, and its CPU per round trip.
func continueFloorBetweenProcesses(rounds: Int, _ mode: FloorMode, placement: Placement = .free) throws -> RoundTrips {
    let replier = try Child(["floor-replier", "--rounds", "\(rounds + 200)"] + mode.replierArguments, cpu: placement.serving)
    let ready = try replier.line(startingWith: "READY")  // READY endpoint
    let asker = try Child(["floor-asker", "--peer", ready[1], "--rounds", "\(rounds)"] + mode.askerArguments, cpu: placement.asking)
    let done = try asker.line(startingWith: "DONE", within: .seconds(120))
    let cpu = try asker.line(startingWith: "CPU")
    asker.wait()
    replier.closeInput()
    replier.wait()
    return try RoundTrips(done: done, cpu: cpu, role: "the floor's asker")
}

/// `floor-replier`: a ROUTER on loopback, `READY endpoint`, answering `--rounds` requests each with
/// a reply of ``floorReplyBytes``, then waiting for its standard input to close.
func runFloorReplier(_ arguments: [String]) async throws {
    let context = try Context()
    let router = try context.socket(.router)
    try router.bind("tcp://127.0.0.1:*")
    tell("READY \(try router.lastEndpoint)")
    let fixedReply = [UInt8](repeating: 0x5A, count: floorReplyBytes)
    let codec = arguments.contains("--codec")
    for _ in 0..<intOption("--rounds", 5200, in: arguments) {
        // The peer's identity, then the request.
        guard let frames = try await router.receiveMultipart(maxFrames: 2), frames.count == 2 else { continue }
        _ = try router.trySend(frames[0], more: true)
        if codec {
            // As an originator answers: the activity encoded once, each reply's envelope around it.
            let request = try frames[1].withUnsafeBytes { try WireEnvelope.decode($0) }
            _ = try router.trySend(FloorEnvelopes.reply(request.correlationID))
        } else {
            _ = try router.trySend(fixedReply)
        }
    }
    await untilStandardInputCloses()
    router.close()
}

/// `floor-asker`: a DEALER to `--peer`; 200 warm-up round trips, then `--rounds` measured; says
/// `DONE p50 p99` in microseconds, then `CPU` and each thread's microseconds per round trip. With
/// `--actor`, asked as a node asks (``FloorClient``).
func runFloorAsker(_ arguments: [String]) async throws {
    guard let peer = stringOption("--peer", in: arguments) else { throw HandoffError(.invalidConfiguration, "floor-asker needs --peer") }
    let rounds = intOption("--rounds", 5000, in: arguments)
    if arguments.contains("--actor") {
        let client = try FloorClient(peer)
        let receiving = Task(executorPreference: EventLoops.shared) { await client.receiveReplies() }
        try await timedRoundTrips(rounds) { try await client.ask() }.report()
        receiving.cancel()
        return
    }
    let context = try Context()
    let dealer = try context.socket(.dealer)
    try dealer.connect(peer)
    let fixedRequest = [UInt8](repeating: 0xA5, count: floorRequestBytes)
    let codec = arguments.contains("--codec")
    var correlationID: UInt64 = 0
    /// One round trip: the request sent (once the connection takes it), the reply awaited.
    func roundTrip() async throws {
        correlationID += 1
        let request = codec ? FloorEnvelopes.request(correlationID) : fixedRequest
        while try !dealer.trySend(request) { try await Task.sleep(for: .milliseconds(1)) }
        let reply = try await dealer.receiveMultipart(maxFrames: 1)
        if codec, let frame = reply?.first {
            // Read as a node's receiver reads its DEALER's messages.
            let read = try frame.withUnsafeBytes { try WireReplyEnvelope.decode($0) }
            guard case .activityReply(let answered, _) = read, answered == correlationID else {
                throw HandoffError(.malformedMessage, "the floor's replier answered something else")
            }
        }
    }
    try await timedRoundTrips(rounds, roundTrip).report()
    dealer.close()
}

/// The floor asked as a node asks (`Node.fetch` and `receiveReplies`): the caller hops onto an
/// actor that owns the DEALER, sends and suspends on a continuation; a receiver task on the actor
/// reads the reply and resumes it, handing off on its thread. No codec, no bookkeeping.
private actor FloorClient {
    private let context: Context
    private let dealer: Socket
    private var waiter: UnsafeContinuation<Void, Never>?
    private let request = [UInt8](repeating: 0xA5, count: floorRequestBytes)

    init(_ peer: String) throws {
        context = try Context()
        dealer = try context.socket(.dealer)
        try dealer.connect(peer)
    }

    func ask() async throws {
        while try !dealer.trySend(request) { try await Task.sleep(for: .milliseconds(1)) }
        await withUnsafeContinuation { waiter = $0 }
    }

    func receiveReplies() async {
        while !Task.isCancelled {
            guard (try? await dealer.receiveMultipart(maxFrames: 1)) != nil else { return }
            if let waiter {
                self.waiter = nil
                EventLoops.handingOff { waiter.resume() }
            }
        }
    }
}

/// The envelopes `--codec` sends: as a node's, the edit-contact activity in the reply.
private enum FloorEnvelopes {
    static func node(_ name: String) -> WireNodeRef {
        var node = WireNodeRef()
        node.nodeID = "5BAD26B7-2AD0-4CD5-BB03-AA0C2A2BE188"
        node.name = name
        node.host = "vm"
        return node
    }

    static let activity: WireActivity = {
        var activity = WireActivity()
        activity.activityID = "7E4AAEAF-CCAF-4877-A578-CAAB7D0D3DFF"
        activity.activityType = "org.handoff.contacts.edit-contact"
        activity.title = "Editing Ada Lovelace"
        for (key, value) in benchContactInfo {
            var wire = WireValue()
            wire.stringValue = value.stringValue ?? ""
            activity.userInfo[key] = wire
        }
        activity.eligibleForHandoff = true
        activity.origin = node("originator")
        activity.version = 7
        activity.updatedAt = WireTimestamp(Date())
        return activity
    }()

    /// The activity's encoding, made once as an originator makes it (`UserActivity.encodedWire`).
    static let encodedActivity: [UInt8] = try! activity.serializedBytes()

    /// The two ends, encoded once as a node's envelopes have them (EnvelopeBuilder).
    static let replier = WireEnvelopeSender(node("replier")), asker = WireEnvelopeSender(node("asker"))

    static func reply(_ correlationID: UInt64) -> [UInt8] {
        WireEnvelope.encoded(continueReplyActivity: encodedActivity, sender: replier, sequence: 0, correlationID: correlationID)
    }

    static func request(_ correlationID: UInt64) -> [UInt8] {
        var request = WireContinueRequest()
        request.activityID = activity.activityID
        request.activityType = activity.activityType
        return WireEnvelope.encoded(body: .continueRequest(request), sender: asker, sequence: 0, correlationID: correlationID)
    }
}

/// The codec's four steps of a continue (encode and decode a request, then a reply, its activity
/// encoded once before as an originator does, read as a node's receiver reads it), each hot (the same envelope 100,000 times in a loop), in
/// µs: what the floor's codec mode costs at the least, where between processes it runs cold.
func continueCodecHotCosts() throws -> [(step: String, microseconds: Double)] {
    let count = 100_000
    let replyBytes = FloorEnvelopes.reply(5)
    let requestBytes = FloorEnvelopes.request(5)
    var sink = 0
    func time(_ step: String, _ body: () throws -> Int) rethrows -> (String, Double) {
        let started = ContinuousClock.now
        for _ in 0..<count { sink &+= try body() }
        return (step, seconds(ContinuousClock.now - started) * 1e6 / Double(count))
    }
    let costs = [
        time("encode a request") { FloorEnvelopes.request(5).count },
        try time("decode a request") { Int(try requestBytes.withUnsafeBytes { try WireEnvelope.decode($0) }.correlationID) },
        time("encode a reply") { FloorEnvelopes.reply(5).count },
        try time("decode a reply") {
            guard case .activityReply(let correlationID, let activity) = try replyBytes.withUnsafeBytes({ try WireReplyEnvelope.decode($0) }) else { return 0 }
            return Int(correlationID) + activity.userInfo.count
        },
    ]
    // Read, so that no step is optimized away.
    guard sink != 0 else { throw HandoffError(.handoffFailed, "the codec's steps gave nothing") }
    return costs
}
