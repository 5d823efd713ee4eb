import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

// `handoff-bench hostile`: real processes on loopback (a `handoff broker`, a `handoff agent` with
// the contacts plugin and a list of contacts) and hostile continuing peers speaking the wire
// contract by hand from this process. While each attack runs, the agent's resident memory and
// threads are sampled from /proc, and a legitimate `handoff continue --save` of the whole list
// must still succeed, in time. Exits 1 when a bound is broken.

/// The bounds the agent must keep (issue 13): memory and threads while attacked, and the time a
/// legitimate continue may take meanwhile.
struct HostileBounds {
    var residentBytes = 256 << 20
    var threads = 32
    var continueSeconds = 1.0
    var pushGrowthBytes = 64 << 20
    /// 2,000 connected peers (issue 14).
    var connectionGrowthBytes = 64 << 20
}

/// `/proc/PID/status` sampled every 20 ms on a thread of its own: peak resident memory and threads.
final class ProcessSampler: @unchecked Sendable {
    // Invariant for @unchecked Sendable: every stored var is touched only with `lock` held.
    private let lock = NSLock()
    private var peakResident = 0
    private var peakThreads = 0
    private var running = true
    let pid: Int32

    init(pid: Int32) {
        self.pid = pid
        let thread = Thread { [self] in
            while lock.withLock({ running }) {
                if let (resident, threads) = Self.read(pid) {
                    lock.withLock {
                        peakResident = max(peakResident, resident)
                        peakThreads = max(peakThreads, threads)
                    }
                }
                usleep(20_000)
            }
        }
        thread.start()
    }

    /// Resident bytes and threads of `pid` now.
    static func read(_ pid: Int32) -> (resident: Int, threads: Int)? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        var resident = 0, threads = 0
        for line in status.split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if line.hasPrefix("VmRSS:"), words.count >= 2 { resident = (Int(words[1]) ?? 0) * 1024 }
            if line.hasPrefix("Threads:"), words.count >= 2 { threads = Int(words[1]) ?? 0 }
        }
        return (resident, threads)
    }

    /// Peaks since the last reset, and starts over.
    func takePeaks() -> (resident: Int, threads: Int) {
        lock.withLock {
            defer { (peakResident, peakThreads) = (0, 0) }
            return (peakResident, peakThreads)
        }
    }

    func stop() { lock.withLock { running = false } }
}

/// A continuing peer that lies: it speaks the wire contract by hand on a DEALER of its own.
struct HostilePeer {
    let dealer: Socket
    var sequence: UInt64 = 0

    init(context: Context, endpoint: String) throws {
        dealer = try context.socket(.dealer)
        try dealer.set(.sendHighWaterMark, 16)  // the agent's reading sets the pace: bytes pushed are bytes it took in
        try dealer.connect(endpoint)
    }

    mutating func send(_ kind: WireStreamFrame.OneOf_Kind, stream: UInt64, nodeID: String, payload: [UInt8]? = nil) async throws {
        var frame = WireStreamFrame()
        frame.streamID = stream
        frame.kind = kind
        var sender = WireNodeRef()
        sender.nodeID = nodeID
        sender.name = nodeID
        sequence += 1
        let bytes: [UInt8] = try WireEnvelope(body: .streamFrame(frame), sender: sender, sequence: sequence).serializedBytes()
        try await dealer.send(bytes, more: payload != nil)
        if let payload { try await dealer.send(payload) }
    }

    /// Opens `count` pairs on `activityID`, each with its own stream id, as `nodeID(i)`; reads nothing.
    mutating func open(_ count: Int, activityID: String, nodeID: (Int) -> String) async throws {
        for index in 0..<count {
            var open = WireStreamOpen()
            open.activityID = activityID
            open.window = 16
            open.chunkSize = 256 * 1024
            try await send(.open(open), stream: UInt64(index + 1), nodeID: nodeID(index))
        }
    }

    /// The first stream error the originator sent back, if any arrives within `timeout`.
    func firstError(within timeout: Duration) async throws -> WireError? {
        try await nextError(within: timeout)?.error
    }

    /// The next stream error the originator sent back within `timeout`, with its pair's stream id
    /// (every other frame that arrives meanwhile is read and dropped).
    func nextError(within timeout: Duration) async throws -> (streamID: UInt64, error: WireError)? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, let first = try await dealer.receive(timeout: deadline - ContinuousClock.now) {
            var more = first.hasMore
            while more { more = try await dealer.receive().hasMore }
            if case .streamFrame(let frame)? = try? WireEnvelope.decode(first.data).body, case .error(let error) = frame.kind {
                return (frame.streamID, error)
            }
        }
        return nil
    }
}

/// A `handoff` process of the scenario (started so while thousands of sockets are open, see
/// ``SpawnedProcess``).
func startHandoff(_ arguments: [String], output: FileHandle? = nil) throws -> SpawnedProcess {
    try SpawnedProcess(
        benchFolder().appendingPathComponent("handoff"), arguments: arguments,
        environment: ProcessInfo.processInfo.environment.merging([ParentWatch.variable: "1"]) { $1 }, output: output)
}

/// The folder this executable (and `handoff`, and the plugins) were built into.
func benchFolder() -> URL {
    URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
}

/// Runs `handoff continue --save` of the list; returns its wall time and the contacts saved.
func legitimateContinue(frontend: String, backend: String, folder: URL) throws -> (seconds: Double, contacts: Int, error: String) {
    let file = folder.appendingPathComponent("saved-\(UUID().uuidString).pb")
    let errors = folder.appendingPathComponent("continue-\(UUID().uuidString).err")
    defer { try? FileManager.default.removeItem(at: file); try? FileManager.default.removeItem(at: errors) }
    _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
    let started = ContinuousClock.now
    let process = try startHandoff(
        ["continue", "--type", "org.handoff.contacts.list-contacts", "--save", file.path,
         "--broker", frontend, backend, "--log-level", "error"], output: try FileHandle(forWritingTo: errors))
    process.waitUntilExit()
    let elapsed = seconds(ContinuousClock.now - started)
    guard process.terminationStatus == 0, let data = try? Data(contentsOf: file),
          let list = try? ContactList(serializedBytes: data) else {
        let said = (try? String(contentsOf: errors, encoding: .utf8))?.split(separator: "\n").last.map(String.init) ?? ""
        return (elapsed, -1, said)
    }
    return (elapsed, list.contacts.count, "")
}

func benchHostile(contacts: Int, streams opens: Int, pushMiB: Int, dealers: Int) async throws {
    let bounds = HostileBounds()
    let context = try Context(maxSockets: dealers + 64)
    let scenario = try await HostileAgent.start(contacts: contacts, context: context)
    defer { scenario.stop() }
    let (agent, activityID, endpoint) = (scenario.agent, scenario.activityID, scenario.endpoint)
    let (frontend, backend, folder) = (scenario.frontend, scenario.backend, scenario.folder)

    let sampler = ProcessSampler(pid: agent.processIdentifier)
    defer { sampler.stop() }
    let baseline = try legitimateContinue(frontend: frontend, backend: backend, folder: folder)
    try await Task.sleep(for: .milliseconds(500))
    let start = ProcessSampler.read(agent.processIdentifier) ?? (0, 0)
    _ = sampler.takePeaks()
    tell("hostile peers against `handoff agent` (contacts plugin, \(contacts) contacts), real processes on loopback")
    tell(String(format: "  at rest: agent RSS %@, %d threads; a legitimate `continue --save` alone: %.3f s, %d contacts",
                 mebibytes(start.resident), start.threads, baseline.seconds, baseline.contacts))
    var failures: [String] = [], notes: [String] = []

    // Attacks 1 and 2: opens that are never read, from one node id, then from a new node id each (a
    // liar). Without CURVE a node id is only a claim, so the per-peer limit cannot hold the liar:
    // its figures are reported, and a bound it breaks is a note, not a failure (with CURVE the
    // owner is the key, and the liar is the first case).
    for (name, nodeID) in [("one peer", { (_: Int) in "hostile" }), ("a new node id per open, no CURVE", { (index: Int) in "liar-\(index)" })] {
        let liar = name != "one peer"
        var peer = try HostilePeer(context: context, endpoint: endpoint)
        defer { peer.dealer.close() }
        try await peer.open(opens, activityID: activityID, nodeID: nodeID)
        var times: [String] = []
        // Right away, then once the hostile pairs have stalled past the grace, then later.
        for pause in [200, 2_500, 3_000] {
            try await Task.sleep(for: .milliseconds(pause))
            let legit = try legitimateContinue(frontend: frontend, backend: backend, folder: folder)
            times.append(String(format: "%.3f s", legit.seconds))
            var broken: String?
            if legit.contacts != contacts {
                times[times.count - 1] += " (failed)"
                broken = "\(name): a legitimate continue got \(legit.contacts) of \(contacts) contacts: \(legit.error)"
            } else if legit.seconds >= bounds.continueSeconds {
                broken = "\(name): a legitimate continue took \(times.last!)"
            }
            if let broken { if liar { notes.append(broken) } else { failures.append(broken) } }
        }
        let peaks = sampler.takePeaks()
        tell("  \(opens) opens never read, \(name): agent RSS peak \(mebibytes(peaks.resident)), threads peak \(peaks.threads); legitimate continue --save: \(times.joined(separator: ", "))")
        if peaks.resident >= bounds.residentBytes { failures.append("\(name): agent RSS reached \(mebibytes(peaks.resident))") }
        if peaks.threads >= bounds.threads { failures.append("\(name): the agent reached \(peaks.threads) threads") }
    }

    // Attack 3: a continuer pushing far past the window it was granted.
    try await Task.sleep(for: .seconds(1))
    let before = ProcessSampler.read(agent.processIdentifier) ?? (0, 0)
    _ = sampler.takePeaks()
    var pusher = try HostilePeer(context: context, endpoint: endpoint)
    defer { pusher.dealer.close() }
    var open = WireStreamOpen()
    open.activityID = activityID
    open.window = 16
    open.chunkSize = 256 * 1024
    try await pusher.send(.open(open), stream: 1, nodeID: "pusher")
    let chunk = [UInt8](repeating: 0x5A, count: 256 * 1024)
    let pushStarted = ContinuousClock.now
    for index in 0..<(pushMiB * 4) {
        var data = WireStreamData()
        data.offset = UInt64(index * chunk.count)
        data.length = UInt32(chunk.count)
        try await pusher.send(.data(data), stream: 1, nodeID: "pusher", payload: chunk)
    }
    let pushSeconds = seconds(ContinuousClock.now - pushStarted)
    let told = try await pusher.firstError(within: .seconds(3))
    let peaks = sampler.takePeaks()
    let growth = max(0, peaks.resident - before.resident)
    tell(String(format: "  %d MiB pushed past the window in %.1f s: the pusher was told %@; agent RSS %@ before, peak %@ (+%@)",
                 pushMiB, pushSeconds, told.map { "\($0.code)" } ?? "nothing", mebibytes(before.resident), mebibytes(peaks.resident), mebibytes(growth)))
    if told?.code != .streamProtocolViolation { failures.append("the pusher was not told STREAM_PROTOCOL_VIOLATION") }
    if growth >= bounds.pushGrowthBytes { failures.append("pushing grew the agent by \(mebibytes(growth))") }
    let legit = try legitimateContinue(frontend: frontend, backend: backend, folder: folder)
    if legit.contacts != contacts { failures.append("after the push, a legitimate continue got \(legit.contacts) of \(contacts) contacts") }

    // Many connections (issue 14): `dealers` continuing peers connect to the agent's continuation
    // endpoint and each asks to continue the list once; the agent's memory and threads must not grow
    // with them beyond the bound.
    try await Task.sleep(for: .seconds(1))
    let idle = ProcessSampler.read(agent.processIdentifier) ?? (0, 0)
    _ = sampler.takePeaks()
    var connections: [Socket] = []
    defer { for dealer in connections { dealer.close() } }
    for index in 0..<dealers {
        let dealer = try context.socket(.dealer)
        try dealer.connect(endpoint)
        var request = WireContinueRequest()
        request.activityID = activityID
        request.activityType = "org.handoff.contacts.list-contacts"
        var sender = WireNodeRef()
        sender.nodeID = "peer-\(index)"
        sender.name = sender.nodeID
        let bytes: [UInt8] = try WireEnvelope(body: .continueRequest(request), sender: sender, sequence: 1, correlationID: 1).serializedBytes()
        try await dealer.send(bytes)
        connections.append(dealer)
    }
    // An answer is the activity, or a typed refusal: past 256 requests waiting on the application's
    // delegate (the plugin's will-save), the agent refuses at once (HandOverLimit).
    var answered = 0
    var refused: [String: Int] = [:]
    let answerDeadline = ContinuousClock.now + .seconds(10)
    var waiting = connections
    while !waiting.isEmpty, ContinuousClock.now < answerDeadline {
        waiting = try waiting.filter { dealer in
            guard let frame = try dealer.tryReceive() else { return true }
            guard case .continueReply(let reply)? = try? WireEnvelope.decode(frame.data).body else { return true }
            switch reply.result {
            case .activity?: answered += 1
            case .error(let error)?: refused["\(error.code)", default: 0] += 1
            case nil: return true
            }
            return false
        }
        if !waiting.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
    }
    let refusals = refused.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
    let connected = sampler.takePeaks()
    let connectedGrowth = max(0, connected.resident - idle.resident)
    let withConnections = try legitimateContinue(frontend: frontend, backend: backend, folder: folder)
    tell(String(format: "  %d DEALERs connected, %d of their continue requests answered with the activity%@: agent RSS %@ before, peak %@ (+%@), threads peak %d; legitimate continue --save meanwhile: %.3f s",
                 dealers, answered, refused.isEmpty ? "" : ", refused: \(refusals)", mebibytes(idle.resident), mebibytes(connected.resident),
                 mebibytes(connectedGrowth), connected.threads, withConnections.seconds))
    if !waiting.isEmpty { failures.append("\(waiting.count) of \(dealers) connected peers got no answer") }
    if connectedGrowth >= bounds.connectionGrowthBytes { failures.append("\(dealers) connections grew the agent by \(mebibytes(connectedGrowth))") }
    if connected.threads >= bounds.threads { failures.append("with \(dealers) connections the agent reached \(connected.threads) threads") }
    if withConnections.contacts != contacts || withConnections.seconds >= bounds.continueSeconds {
        failures.append(String(format: "with %d connections a legitimate continue got %d of %d contacts in %.3f s", dealers, withConnections.contacts, contacts, withConnections.seconds))
    }

    for note in notes { tell("  note: \(note)") }
    tell(failures.isEmpty
          ? "  every bound kept: RSS < \(mebibytes(bounds.residentBytes)), < \(bounds.threads) threads, continue < \(bounds.continueSeconds) s, push growth < \(mebibytes(bounds.pushGrowthBytes)), connections' growth < \(mebibytes(bounds.connectionGrowthBytes))"
          : failures.map { "  FAILED: \($0)" }.joined(separator: "\n"))
    if !failures.isEmpty { exit(1) }
}

/// A loopback TCP endpoint free right now (bound, then released).
func freeEndpoint(_ context: Context) throws -> String {
    let socket = try context.socket(.router)
    defer { socket.close() }
    try socket.bind("tcp://127.0.0.1:*")
    return try socket.lastEndpoint
}
