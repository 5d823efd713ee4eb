import CRawBaselines
import Foundation
import Handoff

// Peak memory of a stream's two ends: each end is its own process (this executable, started again
// with a hidden subcommand), which reports its own peak resident memory (VmHWM) when done.

/// What one run of a stream between two processes measured.
struct ProcessStreamRun {
    var seconds: Double
    var originatorPeak: Int
    var continuerPeak: Int
}

/// A child process of this executable, speaking in lines on its standard output.
final class Child {
    let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private var buffered = Data()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = arguments
        process.standardOutput = output
        process.standardInput = input
        try process.run()
    }

    /// The next line that starts with `prefix`, split into words; throws when the child ends first.
    func line(startingWith prefix: String) throws -> [String] {
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
                buffered = Data(buffered[buffered.index(after: newline)...])
                if line.hasPrefix(prefix) { return line.split(separator: " ").map(String.init) }
                continue
            }
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else {
                throw HandoffError(.handoffFailed, "\(process.arguments?.first ?? "child") ended before saying \(prefix)")
            }
            buffered.append(chunk)
        }
    }

    /// Closes the child's standard input: the signal to report and exit.
    func closeInput() { try? input.fileHandleForWriting.close() }

    func wait() { process.waitUntilExit() }
}

/// Streams `total` bytes between two processes (an originator and a continuer, direct bus on
/// loopback); returns the time to read everything and each end's peak resident memory.
func streamBetweenProcesses(total: Int, options: Options) throws -> ProcessStreamRun {
    let originator = try Child(["stream-originator", "--size-bytes", "\(total)", "--window", "\(options.window)"])
    let ready = try originator.line(startingWith: "READY")  // READY endpoint id
    let continuer = try Child(["stream-continuer", "--peer", ready[1], "--id", ready[2], "--size-bytes", "\(total)", "--window", "\(options.window)"])
    let done = try continuer.line(startingWith: "DONE")  // DONE seconds bytes peak
    continuer.wait()
    originator.closeInput()
    let report = try originator.line(startingWith: "PEAK")  // PEAK bytes
    originator.wait()
    guard Int(done[2]) == total else { throw HandoffError(.streamTruncated, "the continuer read \(done[2]) of \(total) bytes") }
    return ProcessStreamRun(seconds: Double(done[1]) ?? -1, originatorPeak: Int(report[1]) ?? 0, continuerPeak: Int(done[3]) ?? 0)
}

/// The raw libzmq transfer in a process of its own: returns its seconds and the process's peak memory.
func rawStreamInProcess(total: Int, options: Options) throws -> (seconds: Double, peak: Int) {
    let child = try Child(["raw-stream", "--size-bytes", "\(total)", "--window", "\(options.window)"])
    let done = try child.line(startingWith: "DONE")
    child.wait()
    return (Double(done[1]) ?? -1, Int(done[2]) ?? 0)
}

/// A node for one end of a stream between processes; `--listen HOST` binds it there instead of
/// loopback (deploy/netns/stream-link.sh runs the two ends in two network namespaces).
func streamConfiguration(_ name: String, peers: [String], options: Options, arguments: [String] = []) -> Node.Configuration {
    let host = stringOption("--listen", in: arguments) ?? "127.0.0.1"
    var configuration = Node.Configuration(
        name: name, bus: .direct(listen: "tcp://\(host):*", peers: peers), continuationEndpoint: "tcp://\(host):*")
    if host != "127.0.0.1" { configuration.allowInsecure = true }
    configuration.streamWindow = options.window
    configuration.streamChunkSize = options.chunk
    return configuration
}

/// `stream-originator`: advertises a streaming activity, writes `--size-bytes` to whoever opens its
/// streams, and reports its peak memory, resumes and bytes sent twice once its standard input closes.
func runStreamOriginator(_ arguments: [String]) async throws {
    let options = Options(arguments)
    let total = intOption("--size-bytes", 0, in: arguments)
    try await Node.withRunning(streamConfiguration("originator", peers: [], options: options, arguments: arguments)) { node in
        let writer = Writer(total: total, chunk: options.chunk)
        let activity = try UserActivity(activityType: "org.handoff.bench.bulk")
        activity.supportsContinuationStreams = true
        activity.delegate = writer
        try await activity.becomeCurrent(on: node)
        tell("READY \(node.busEndpoint!) \(activity.id)")
        // Until the parent closes our standard input (the continuer has read everything).
        while FileHandle.standardInput.availableData.count > 0 {}
        let counters = await node.streamCounters
        tell("PEAK \(peakResidentBytes()) \(counters.resumed) \(counters.bytesResent)")  // PEAK bytes resumes bytes-sent-again
    }
}

/// `stream-continuer`: continues the activity `--id` from the node at `--peer`, reads its stream
/// to the end, and reports the time, the bytes and its peak memory.
func runStreamContinuer(_ arguments: [String]) async throws {
    let options = Options(arguments)
    guard let peer = stringOption("--peer", in: arguments), let id = stringOption("--id", in: arguments) else {
        throw HandoffError(.invalidConfiguration, "stream-continuer needs --peer and --id")
    }
    try await Node.withRunning(streamConfiguration("continuer", peers: [peer], options: options, arguments: arguments)) { node in
        await node.setContinuationHandler(forType: "org.handoff.bench.bulk") { _ in }
        let found = try await waitFor(id, on: node)
        guard case .restored(let continued) = try await node.continueActivity(found) else {
            throw HandoffError(.handoffFailed, "not restored")
        }
        let started = ContinuousClock.now
        let streams = try await node.openStreams(for: continued, direction: .fromOriginator)
        var received = 0
        // Every byte, once the end's length and CRC-32C checked out (the iteration throws otherwise).
        for try await chunk in streams.input { received += chunk.count }
        let elapsed = seconds(ContinuousClock.now - started)
        let counters = await node.streamCounters
        tell("DONE \(elapsed) \(received) \(peakResidentBytes()) \(counters.resumed) \(counters.duplicateBytesDropped)")
    }
}

/// `raw-stream`: the raw libzmq DEALER/ROUTER transfer alone in this process.
func runRawStream(_ arguments: [String]) {
    let options = Options(arguments)
    let total = intOption("--size-bytes", 0, in: arguments)
    let elapsed = raw_dealer_router_transfer(UInt64(total), options.chunk, Int32(options.window))
    tell("DONE \(elapsed) \(peakResidentBytes())")
}

func intOption(_ name: String, _ fallback: Int, in arguments: [String]) -> Int {
    stringOption(name, in: arguments).flatMap { Int($0) } ?? fallback
}

func stringOption(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func mebibytes(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }

/// Writes a line to standard output at once (unbuffered: the parent waits for it).
func tell(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
