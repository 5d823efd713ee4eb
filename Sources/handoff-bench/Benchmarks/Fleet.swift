import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

// `handoff-bench fleet`: a real `handoff broker` process, one publishing socket with many current
// activities, and many simulated nodes joining one after another — each a SUB socket in this
// process speaking the wire contract as wire.proto ("Snapshots") tells a third party to: subscribe
// to "A:" + prefix, then to its own snapshot topic, and read until the SnapshotReply. Every joiner
// stays connected to the end, so whatever the broker sends to anyone is counted.

/// A process's CPU time (user + system) so far, from /proc/PID/stat (the broker's, the agent's).
func cpuSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime 14 and stime 15 (1-based), so 11 and 12 here.
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A snapshot topic of a fresh random token, as wire.proto ("Snapshots") describes it.
func snapshotTopic(typePrefix: String) -> String {
    let digits = Array("0123456789abcdef")
    return "S:" + String((0..<32).map { _ in digits.randomElement()! }) + "/" + typePrefix
}

/// What one simulated joiner received on its snapshot topic.
struct JoinedSnapshot {
    var advertisements = 0
    var promised = -1
}

/// Reads a joiner's messages until its SnapshotReply (blocking, with the socket's receive timeout).
func readSnapshot(_ socket: Socket, topic: [UInt8]) throws -> JoinedSnapshot {
    var snapshot = JoinedSnapshot()
    while true {
        let frames = try socket.receiveMultipart()
        guard frames.count == 2, frames[0].bytes == topic else { continue }
        // A SnapshotReply is far smaller than an advertisement: decode only small envelopes.
        if frames[1].count < 160, let envelope = try? WireEnvelope.decode(frames[1].data),
           case .snapshotReply(let reply) = envelope.body {
            snapshot.promised = Int(reply.count)
            return snapshot
        }
        snapshot.advertisements += 1
    }
}

/// Makes `count` valid advertisements of ten types under `typePrefix`, `perOrigin` from each
/// simulated node (a fresh id each), each with a title padded by `titleBytes`, and hands each to
/// `body` as its topic and envelope: what the fleet and broker-capacity benchmarks publish.
func simulatedAdvertisements(
    _ count: Int, perOrigin: Int, typePrefix: String, publisher: String, titleBytes: Int = 0, publicKey: [UInt8] = [],
    _ body: (_ topic: [UInt8], _ envelope: [UInt8]) throws -> Void
) throws {
    var origin = WireNodeRef()
    origin.name = publisher
    origin.publicKey = Data(publicKey)
    origin.host = ProcessInfo.processInfo.hostName
    var sequence = UInt64(Date().timeIntervalSince1970 * 1_000_000)
    for index in 0..<count {
        if index % max(1, perOrigin) == 0 { origin.nodeID = UUID().uuidString }
        var advertisement = WireAdvertisement()
        advertisement.activityID = UUID().uuidString
        advertisement.activityType = "\(typePrefix)type-\(index % 10)"
        advertisement.title = "activity \(index)" + String(repeating: "x", count: titleBytes)
        advertisement.origin = origin
        advertisement.continueEndpoint = "tcp://127.0.0.1:1"
        advertisement.version = 1
        advertisement.leaseMs = 600_000
        sequence += 1
        let envelope: [UInt8] = try WireEnvelope(body: .advertisement(advertisement), sender: origin, sequence: sequence).serializedBytes()
        try body(Array("A:\(advertisement.activityType)".utf8), envelope)
    }
}

/// Publishes `count` advertisements (ten types under `org.fleet.`), `perOrigin` from each simulated
/// node, each with a title of `titleBytes`.
private func publishActivities(_ count: Int, perOrigin: Int, titleBytes: Int = 0, on publisher: Socket) throws {
    try simulatedAdvertisements(count, perOrigin: perOrigin, typePrefix: "org.fleet.", publisher: "fleet publisher", titleBytes: titleBytes) {
        try publisher.send($0, more: true)
        try publisher.send($1)
    }
}

func benchFleet(joiners: Int, activities: Int, flood: Int) throws {
    let context = try Context(maxSockets: joiners + 64)
    let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
    let broker = try startHandoff(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"], output: FileHandle.nullDevice)
    defer { kill(broker.processIdentifier, SIGKILL); broker.waitUntilExit() }
    let pid = broker.processIdentifier

    // One publisher, once the broker has subscribed its frontend (its cache sees everything).
    let publisher = try context.socket(.xpub)
    try publisher.set(.sendHighWaterMark, 0)
    try publisher.set(.receiveTimeout, 10_000)
    try publisher.connect(frontend)
    while try publisher.receive().bytes != [1] {}
    // Ten activities per simulated node (the broker keeps at most 1,000 of one node).
    try publishActivities(activities, perOrigin: 10, on: publisher)

    func join(_ typePrefix: String) throws -> (Socket, JoinedSnapshot) {
        let socket = try context.socket(.sub)
        try socket.set(.receiveHighWaterMark, 0)
        try socket.set(.receiveTimeout, 30_000)
        let topic = snapshotTopic(typePrefix: typePrefix)
        try socket.subscribe("A:" + typePrefix)
        try socket.subscribe(topic)
        try socket.connect(backend)
        return (socket, try readSnapshot(socket, topic: Array(topic.utf8)))
    }
    // Until the broker holds them all: a probe's snapshot says so.
    let deadline = ContinuousClock.now + .seconds(60)
    while true {
        let (probe, snapshot) = try join("org.fleet.")
        probe.close()
        if snapshot.promised == activities { break }
        guard ContinuousClock.now < deadline else {
            throw HandoffError(.handoffFailed, "the broker cached \(snapshot.promised) of \(activities) activities")
        }
        Thread.sleep(forTimeInterval: 0.05)
    }

    let residentBefore = ProcessSampler.read(pid)?.resident ?? 0
    let cpuBefore = cpuSeconds(pid)
    let started = ContinuousClock.now
    var sockets: [Socket] = []
    var joinTimes: [Double] = []
    var snapshotMessages = 0, short = 0
    for _ in 0..<joiners {
        let joinStarted = ContinuousClock.now
        let (socket, snapshot) = try join("org.fleet.")
        joinTimes.append(seconds(ContinuousClock.now - joinStarted))
        snapshotMessages += snapshot.advertisements + 1
        if snapshot.advertisements != activities || snapshot.promised != activities { short += 1 }
        sockets.append(socket)
    }
    let elapsed = seconds(ContinuousClock.now - started)
    let cpu = cpuSeconds(pid) - cpuBefore
    let residentAfter = ProcessSampler.read(pid)?.resident ?? 0
    // Whatever else reached anyone: every joiner stayed subscribed to "A:org.fleet." throughout.
    Thread.sleep(forTimeInterval: 0.5)
    var extra = 0
    for socket in sockets {
        while let frame = try socket.tryReceive() {
            if !frame.hasMore { extra += 1 }
        }
    }
    let delivered = snapshotMessages + extra
    let ideal = joiners * (activities + 1)
    let ratio = Double(delivered) / Double(ideal)

    print("Fleet: \(joiners) simulated nodes join one after another while \(activities) activities are current (a real `handoff broker`)")
    row("messages delivered to joiners", "\(delivered)", "ideal \(ideal): each joiner each activity once, plus its SnapshotReply")
    row("of which not in a joiner's own snapshot", "\(extra)")
    row("joiners with a short snapshot", "\(short)")
    row("time until the last joiner has everything", String(format: "%.2f s", elapsed),
        String(format: "per joiner p50 %.1f ms, p99 %.1f ms", percentile(joinTimes, 0.5) * 1000, percentile(joinTimes, 0.99) * 1000))
    row("broker RSS after", String(format: "%.1f MiB", Double(residentAfter) / 1_048_576),
        String(format: "%.1f MiB before the joiners", Double(residentBefore) / 1_048_576))
    row("broker CPU while they joined", String(format: "%.2f s", cpu), String(format: "%.0f %% of one core", 100 * cpu / elapsed))
    compare("fleet: messages to \(joiners) joiners × \(activities)", handoff: "\(delivered)", baseline: "ideal", "\(ideal)",
            ratio: String(format: "%.3f x", ratio), target: "≤ 1.05 x", met: ratio <= 1.05 && short == 0)
    for socket in sockets { socket.close() }

    // One node floods: 10,000 new activities with 4 KiB titles. The broker's quota (1,000 per
    // node) bounds what it keeps and what anyone receives.
    // A real agent on the bus, to see what the flood costs a node (its own quota: 1,000 per node).
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-fleet-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder.appendingPathComponent("plugins"), withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let agent = try startHandoff(["agent", "--name", "watcher", "--broker", frontend, backend,
                                  "--plugins", folder.appendingPathComponent("plugins").path, "--data", folder.path,
                                  "--exit-with-parent", "--log-level", "error"], output: FileHandle.nullDevice)
    defer { kill(agent.processIdentifier, SIGKILL); agent.waitUntilExit() }
    Thread.sleep(forTimeInterval: 3)
    let agentBefore = ProcessSampler.read(agent.processIdentifier)?.resident ?? 0
    let floodResidentBefore = ProcessSampler.read(pid)?.resident ?? 0
    let flooder = try context.socket(.xpub)
    try flooder.set(.sendHighWaterMark, 0)
    try flooder.set(.receiveTimeout, 10_000)
    try flooder.connect(frontend)
    while try flooder.receive().bytes != [1] {}
    try publishActivities(flood, perOrigin: flood, titleBytes: 4096, on: flooder)
    Thread.sleep(forTimeInterval: 1)
    let (probe, floodSnapshot) = try join("org.fleet.")
    probe.close()
    let floodResidentAfter = ProcessSampler.read(pid)?.resident ?? 0
    Thread.sleep(forTimeInterval: 1)
    let agentAfter = ProcessSampler.read(agent.processIdentifier)?.resident ?? 0
    print("")
    print("Flood: one node advertises \(flood) new activities of 4 KiB each (broker quota: 1,000 per node)")
    row("broker RSS growth", String(format: "%+.1f MiB", Double(floodResidentAfter - floodResidentBefore) / 1_048_576),
        String(format: "%.1f MiB before", Double(floodResidentBefore) / 1_048_576))
    row("agent RSS growth", String(format: "%+.1f MiB", Double(agentAfter - agentBefore) / 1_048_576),
        String(format: "%.1f MiB before, knowing the %d activities", Double(agentBefore) / 1_048_576, activities))
    row("activities a joiner's snapshot holds", "\(floodSnapshot.promised)", "\(activities) before the flood, so \(floodSnapshot.promised - activities) of the flood")
    flooder.close()
    publisher.close()
}
