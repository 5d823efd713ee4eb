import CRawBaselines
import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

// `handoff-bench broker-capacity`: what a broker forwards on one CPU, measured from outside. The
// broker (the real `handoff broker`, or a raw libzmq XSUB/XPUB zmq_proxy in the same run) is held
// to CPU 0; a publisher and one or more subscribers, plain C on libzmq (bus_clients.c), each a
// process of its own on the other CPUs. The publisher sends the same valid advertisements (many
// origins, their real envelopes) as fast as the broker takes them; each subscriber reports when its
// first and last arrived. Capacity is what the slowest subscriber received per second; CPU per
// message is the broker process's CPU time (/proc) over the flood divided by the messages.

/// The advertisements a publisher sends: `count` from `origins` nodes, ten types, as records of a
/// little-endian length and a topic, then a length and an envelope (bus_publish reads them); with
/// `publicKey`, each names it as its sender's and its origin's (a CURVE client's).
func capacityRecords(count: Int, origins: Int, publicKey: [UInt8] = []) throws -> [UInt8] {
    var records: [UInt8] = []
    func append(_ bytes: [UInt8]) {
        withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { records.append(contentsOf: $0) }
        records.append(contentsOf: bytes)
    }
    try simulatedAdvertisements(
        count, perOrigin: count / max(1, origins), typePrefix: "org.capacity.", publisher: "capacity publisher", publicKey: publicKey
    ) {
        append($0)
        append($1)
    }
    return records
}

/// CPU seconds the threads of a process now alive have run, to the nanosecond (``threadReadings(of:)``:
/// a flood of 50,000 messages at 1 µs each is 5 of /proc's 10 ms ticks), and the minor page faults
/// they took (a flood that fills a broker's cache, or receive buffers that are never reused). Of
/// each, libzmq's I/O threads' (named `ZMQbg/IO/n`): what a broker's own thread spends is the rest.
func threadUsage(_ pid: Int32) -> (cpu: Double, ioCPU: Double, faults: Int, ioFaults: Int) {
    var (all, io, faults, ioFaults) = (0, 0, 0, 0)
    for thread in threadReadings(of: "\(pid)") {
        all += thread.cpuNanoseconds
        faults += thread.minorFaults
        if thread.name.hasPrefix("ZMQbg/IO") {
            io += thread.cpuNanoseconds
            ioFaults += thread.minorFaults
        }
    }
    return (Double(all) / 1e9, Double(io) / 1e9, faults, ioFaults)
}

/// One flood through one broker: what each subscriber received and when, and the broker's CPU.
struct CapacityTrial {
    var messages: Int
    /// Messages per second at the slowest subscriber.
    var perSecond: Double
    /// Broker CPU microseconds per message published.
    var cpuPerMessage: Double
    /// Of it, libzmq's I/O thread's.
    var ioCPUPerMessage: Double = 0
    /// Minor page faults per message: the broker's own threads', libzmq's I/O thread's.
    var faultsPerMessage = (own: 0.0, io: 0.0)
    /// Messages some subscriber did not get.
    var lost: Int
}

/// A broker under test in a process of its own, held to `cpu`; `arguments` are added to a
/// `handoff broker`'s.
func startCapacityBroker(raw: Bool, cpu: Int?, arguments: [String] = [], curve: CapacityCurve? = nil) throws -> (child: Child, frontend: String, backend: String) {
    if raw {
        let child = try Child(["raw-proxy"] + (curve?.rawProxyArguments ?? []), cpu: cpu)
        let ready = try child.line(startingWith: "READY")
        return (child, ready[1], ready[2])
    }
    let context = try Context()
    let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
    let child = try Child(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"] + arguments + (curve?.brokerArguments ?? []), cpu: cpu,
                          executable: benchFolder().appendingPathComponent("handoff"))
    return (child, frontend, backend)
}

///
/// - Parameters:
///   - brokerArguments: Added to a `handoff broker`'s arguments.
///   - beforeFlood: Runs once the subscribers are ready, before the publisher starts.
func capacityTrial(
    raw: Bool, records: URL, count: Int, subscribers: Int, brokerArguments: [String] = [], curve: CapacityCurve? = nil,
    beforeFlood: () throws -> Void = {}
) throws -> CapacityTrial {
    let cores = ProcessInfo.processInfo.activeProcessorCount
    let pin = Placement.canPin
    // The broker alone on CPU 0; the clients share the others.
    func clientCPU(_ index: Int) -> Int? { pin ? 1 + index % max(1, cores - 1) : nil }
    let broker = try startCapacityBroker(raw: raw, cpu: pin ? 0 : nil, arguments: brokerArguments, curve: curve)
    let clientArguments = curve?.clientArguments ?? []
    defer {
        kill(broker.child.process.processIdentifier, SIGTERM)
        broker.child.closeInput()
        broker.child.wait()
    }
    let readers = try (0..<subscribers).map { index in
        try Child(["capacity-subscriber", "--backend", broker.backend, "--expected", "\(count)"] + clientArguments, cpu: clientCPU(index + 1))
    }
    for reader in readers { _ = try reader.line(startingWith: "READY") }
    // A SUB's subscription reaches the broker (and, through a raw proxy, the publisher) shortly
    // after it connects: leave it that moment.
    Thread.sleep(forTimeInterval: 0.5)
    try beforeFlood()
    let pid = broker.child.process.processIdentifier
    let before = threadUsage(pid)
    let publisher = try Child(["capacity-publisher", "--frontend", broker.frontend, "--records", records.path] + clientArguments, cpu: clientCPU(0))
    let sent = try publisher.line(startingWith: "SENT")
    guard Int(sent[1]) == count else { throw HandoffError(.handoffFailed, "the publisher said \(sent.joined(separator: " "))") }
    var slowest = Double.infinity, lost = 0
    for reader in readers {
        let got = try reader.line(startingWith: "RECEIVED", within: .seconds(120))  // RECEIVED n seconds
        let received = Int(got[1]) ?? 0, seconds = Double(got[2]) ?? 0
        lost = max(lost, count - received)
        slowest = min(slowest, seconds > 0 ? Double(received) / seconds : 0)
        reader.wait()
    }
    publisher.wait()
    // The subscribers end at the last message (or 2 s after it, when some were lost).
    let after = threadUsage(pid)
    let (cpu, io) = (after.cpu - before.cpu, after.ioCPU - before.ioCPU)
    let ioFaults = after.ioFaults - before.ioFaults, ownFaults = after.faults - before.faults - ioFaults
    return CapacityTrial(
        messages: count, perSecond: slowest, cpuPerMessage: cpu / Double(count) * 1e6, ioCPUPerMessage: io / Double(count) * 1e6,
        faultsPerMessage: (Double(ownFaults) / Double(count), Double(ioFaults) / Double(count)), lost: lost)
}

func benchBrokerCapacity(count: Int, origins: Int, trials: Int, fanouts: [Int], memoryCount: Int, memoryOrigins: Int, curve useCurve: Bool = false) throws {
    let curve = useCurve ? try CapacityCurve.make() : nil
    defer { curve?.remove() }
    let recordBytes = try capacityRecords(count: count, origins: origins, publicKey: curve?.client.publicKey.bytes ?? [])
    let records = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-capacity-\(getpid()).bin")
    try Data(recordBytes).write(to: records)
    defer { try? FileManager.default.removeItem(at: records) }
    let floor = brokerFloor(recordBytes, trials: trials)
    let freshFloor = try brokerFloorInFreshProcesses(records: records, trials: trials)
    let over = curve == nil ? "" : " every connection over CURVE (the raw proxy checks no key; the broker its account and every sender);"
    print("broker capacity: \(count) advertisements from \(origins) origins, \(trials) trials each (median);\(over)",
          Placement.canPin ? "the broker alone on CPU 0, C clients on the other CPUs" : "unpinned (taskset or a second CPU missing)")
    for subscribers in fanouts {
        var medians: [Bool: CapacityTrial] = [:]
        for raw in [true, false] {
            var runs: [CapacityTrial] = []
            for _ in 0..<trials { runs.append(try capacityTrial(raw: raw, records: records, count: count, subscribers: subscribers, curve: curve)) }
            let median = runs.sorted { $0.perSecond < $1.perSecond }[runs.count / 2]
            medians[raw] = median
            let range = runs.map(\.perSecond).sorted()
            print(String(format: "  %@, %d subscriber%@: %8.0f msg/s (%.0f–%.0f), broker CPU %5.2f µs/msg (libzmq's I/O thread %.2f, the rest %.2f)%@",
                         raw ? "raw zmq_proxy " : "Handoff broker", subscribers, subscribers == 1 ? " " : "s",
                         median.perSecond, range.first ?? 0, range.last ?? 0, median.cpuPerMessage,
                         median.ioCPUPerMessage, median.cpuPerMessage - median.ioCPUPerMessage,
                         median.lost > 0 ? ", \(median.lost) lost" : ""))
        }
        if subscribers == fanouts.first, let raw = medians[true] {
            print(String(format: "  the broker's floor (the contract's steps on one thread, no socket): %.2f µs/msg, %.1f× the raw proxy's CPU per message",
                         floor, floor / raw.cpuPerMessage))
            print(String(format: "  the same in a fresh process on CPU 0, its memory new as a fresh broker's: %.2f µs/msg, %.1f× the raw proxy's",
                         freshFloor, freshFloor / raw.cpuPerMessage))
            // A broker does what the raw proxy does with each message and the contract's steps too.
            let bound = raw.cpuPerMessage + freshFloor
            if let handoff = medians[false] {
                print(String(format: "  what no broker keeping the contract goes below here: the raw proxy's CPU + that floor = %.2f µs/msg (%.1f× the raw proxy's); this broker %.2f, %@",
                             bound, bound / raw.cpuPerMessage, handoff.cpuPerMessage, aboveOrBelow(handoff.cpuPerMessage, bound)))
                // Where the difference lies: the broker's own thread does the proxy's calls and the
                // contract's steps; libzmq's I/O thread does the same work in both processes.
                let (ownThread, rawThread) = (handoff.cpuPerMessage - handoff.ioCPUPerMessage, raw.cpuPerMessage - raw.ioCPUPerMessage)
                print(String(format: "  by thread: the broker's own %.2f against the raw proxy's %.2f + the floor = %.2f, %@; libzmq's I/O thread %.2f against %.2f, %@",
                             ownThread, rawThread, rawThread + freshFloor, aboveOrBelow(ownThread, rawThread + freshFloor),
                             handoff.ioCPUPerMessage, raw.ioCPUPerMessage, aboveOrBelow(handoff.ioCPUPerMessage, raw.ioCPUPerMessage)))
                print(String(format: "  page faults a message (memory touched for the first time): the broker's own threads %.3f, its I/O thread %.3f; the raw proxy's %.3f and %.3f",
                             handoff.faultsPerMessage.own, handoff.faultsPerMessage.io, raw.faultsPerMessage.own, raw.faultsPerMessage.io))
            }
        }
        if let raw = medians[true], let handoff = medians[false] {
            let capacity = handoff.perSecond / raw.perSecond, cpu = handoff.cpuPerMessage / raw.cpuPerMessage
            print(String(format: "  %d subscriber%@: capacity %.0f %% of the raw proxy's (target ≥ 50 %%), CPU per message %.1f× (target ≤ 2×)",
                         subscribers, subscribers == 1 ? "" : "s", capacity * 100, cpu))
            let plural = subscribers == 1 ? "" : "s"
            compare("broker capacity, \(subscribers) subscriber\(plural)", handoff: String(format: "%.0f msg/s", handoff.perSecond),
                    baseline: "raw zmq_proxy", String(format: "%.0f msg/s", raw.perSecond), ratio: String(format: "%.2f", capacity),
                    target: "≥ 0.50", met: capacity >= 0.5)
            compare("broker CPU per message, \(subscribers) subscriber\(plural)", handoff: String(format: "%.2f µs", handoff.cpuPerMessage),
                    baseline: "raw zmq_proxy", String(format: "%.2f µs", raw.cpuPerMessage), ratio: String(format: "%.1f×", cpu),
                    target: "≤ 2×", met: cpu <= 2)
        }
    }
    if memoryCount > 0 {
        let memory = try brokerMemoryPerActivity(count: memoryCount, origins: memoryOrigins)
        let beyond = memory.perActivity - memory.envelope
        print(String(format: "memory: %d activities cached, broker RSS %.1f → %.1f MiB: %.0f bytes per activity, %.0f of them the envelope, %.0f beyond it (target ≤ 1024)",
                     memoryCount, Double(memory.empty) / 1_048_576, Double(memory.full) / 1_048_576, memory.perActivity, memory.envelope, beyond))
        compare("broker memory per cached activity beyond its envelope", handoff: String(format: "%.0f B", beyond),
                baseline: "its envelope", String(format: "%.0f B", memory.envelope), ratio: String(format: "%.1f×", memory.perActivity / memory.envelope),
                target: "≤ 1024 B", met: beyond <= 1024)
    }
}

/// How far `value` is from `reference`, in words: "12 % above it", "3 % below it".
private func aboveOrBelow(_ value: Double, _ reference: Double) -> String {
    let percent = (value / reference - 1) * 100
    return String(format: "%.0f %% %@ it", abs(percent), percent < 0 ? "below" : "above")
}

/// The floor as a fresh broker meets it: each trial a process of its own held to CPU 0 (the
/// broker's), where in this process later trials reuse the memory the first one freed. Median.
func brokerFloorInFreshProcesses(records: URL, trials: Int) throws -> Double {
    var runs: [Double] = []
    for _ in 0..<max(1, trials) {
        let child = try Child(["broker-floor", "--records", records.path], cpu: Placement.canPin ? 0 : nil)
        let line = try child.line(startingWith: "FLOOR")
        child.wait()
        runs.append(Double(line[1]) ?? 0)
    }
    return runs.sorted()[runs.count / 2]
}

/// The records' messages as frames: (topic, envelope) pairs.
private func capacityMessages(_ records: [UInt8]) -> [[Frame]] {
    var messages: [[Frame]] = []
    var at = 0
    func next() -> [UInt8] {
        let length = Int(records[at]) | Int(records[at + 1]) << 8 | Int(records[at + 2]) << 16 | Int(records[at + 3]) << 24
        defer { at += 4 + length }
        return Array(records[at + 4..<at + 4 + length])
    }
    while at < records.count { messages.append([Frame(next()), Frame(next())]) }
    return messages
}

/// The broker's floor, as `advert-floor` measures the whole path's: what the contract asks of a
/// broker per message, on one thread with no socket — read the envelope's fields
/// (``WireBusFields``: sender, id, version, lease), count the activity against its origin's
/// quota (no peer may grow a broker's memory without bound), keep a copy of its topic and envelope
/// under the activity id, note when its lease ends (the cache forgets it then), count it — over
/// the same messages, each step in the plainest form that does it. Returns microseconds per
/// message (the median of `trials`).
func brokerFloor(_ records: [UInt8], trials: Int) -> Double {
    let messages = capacityMessages(records)
    var runs: [Double] = []
    for _ in 0..<max(1, trials) {
        // Room for every entry from the start, as the broker's cache grows without hashing an id
        // again (SlotIndex): a dictionary that doubles would rehash every key it holds each time.
        var cache: [String: JoinedFrames] = Dictionary(minimumCapacity: messages.count)
        var perOrigin: [String: Int] = Dictionary(minimumCapacity: 1_024)
        // Every lease in a flood ends later than the one before: a list in that order is the least
        // an expiry schedule can be (the broker's heap compares each new one with one parent).
        var leaseEnds: [(end: UInt64, id: String)] = []
        leaseEnds.reserveCapacity(messages.count)
        var counted = 0
        // The quota the measured broker keeps (its default), an origin's count raised and read in
        // one lookup.
        let quota = Broker.Configuration().maxActivitiesPerOrigin
        func incremented(_ count: inout Int) -> Int {
            count += 1
            return count
        }
        let started = ContinuousClock.now
        let now = DispatchTime.now().uptimeNanoseconds
        for frames in messages {
            // The fields read where they lie (the broker's reader, the least that checks what the
            // contract checks); the id and origin made values, as a plain dictionary keys them.
            let advertisement: (activityID: String, origin: String, leaseMs: UInt32)? = frames[1].withUnsafeBytes { envelope in
                guard case .advertisement(let id, let origin, _, let leaseMs, _) = (try? WireBusFields.read(envelope))?.body else { return nil }
                return (WireBusFields.string(id, in: envelope), WireBusFields.string(origin.id, in: envelope), leaseMs)
            }
            counted += frames[0].count + frames[1].count
            guard let (activityID, origin, leaseMs) = advertisement else { continue }
            guard incremented(&perOrigin[origin, default: 0]) <= quota else { continue }
            // Kept as a copy, as the broker must: a frame as received pins libzmq's 8 KiB buffer.
            cache[activityID] = frames.joined()
            leaseEnds.append((now + UInt64(leaseMs) * 1_000_000, activityID))
        }
        runs.append(seconds(ContinuousClock.now - started) * 1e6 / Double(messages.count))
        precondition(cache.count == messages.count && leaseEnds.count == messages.count && counted > 0)
    }
    return runs.sorted()[runs.count / 2]
}

/// Resident memory of a process now, in bytes (VmRSS).
func residentBytes(_ pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") else { return 0 }
    return kib * 1024
}

/// Memory per cached activity: a `handoff broker` (no subscriber) before and after `count`
/// advertisements from `origins` nodes, idle; what it grew by per activity, and how much of that
/// is the envelope's own bytes.
func brokerMemoryPerActivity(count: Int, origins: Int) throws -> (perActivity: Double, envelope: Double, empty: Int, full: Int) {
    let recordsBytes = try capacityRecords(count: count, origins: origins)
    let records = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-memory-\(getpid()).bin")
    try Data(recordsBytes).write(to: records)
    defer { try? FileManager.default.removeItem(at: records) }
    let envelopeBytes = capacityMessages(recordsBytes).reduce(0) { $0 + $1[1].count }
    let broker = try startCapacityBroker(raw: false, cpu: nil)
    defer {
        kill(broker.child.process.processIdentifier, SIGTERM)
        broker.child.wait()
    }
    let pid = broker.child.process.processIdentifier
    Thread.sleep(forTimeInterval: 0.5)
    let empty = residentBytes(pid)
    let publisher = try Child(["capacity-publisher", "--frontend", broker.frontend, "--records", records.path])
    _ = try publisher.line(startingWith: "SENT")
    publisher.wait()
    // Until the broker has taken everything in: its CPU time stops growing.
    var last = -1.0
    while cpuSeconds(pid) != last {
        last = cpuSeconds(pid)
        Thread.sleep(forTimeInterval: 0.5)
    }
    let full = residentBytes(pid)
    return (Double(full - empty) / Double(count), Double(envelopeBytes) / Double(count), empty, full)
}

