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
    /// CPU seconds each end's process spent on the transfer, every thread of it (its loops and
    /// libzmq's I/O thread: TCP's copies are most of a stream's CPU at both ends).
    var originatorCPU: Double = 0
    var continuerCPU: Double = 0
}

/// Where the two processes of a comparison run: wherever the scheduler puts their threads (as
/// deployments run by default), or each process held to one CPU of its own (docs/operations.md,
/// "Latency on small VMs"), the serving end on CPU 1 and the asking end on CPU 0.
enum Placement {
    case free, onePerProcess

    static let taskset = "/usr/bin/taskset"

    /// Whether each process can have a CPU of its own here: two CPUs, and taskset to ask for it.
    static var canPin: Bool {
        ProcessInfo.processInfo.activeProcessorCount >= 2 && FileManager.default.isExecutableFile(atPath: taskset)
    }

    var serving: Int? { self == .onePerProcess ? 1 : nil }
    var asking: Int? { self == .onePerProcess ? 0 : nil }
}

/// A child process of this executable, speaking in lines on its standard output.
final class Child {
    let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private var buffered = Data()
    /// The subcommand it runs, for messages.
    let role: String

    /// This executable (or `executable`) with `arguments`; on CPU `cpu` alone (every thread of it)
    /// when given.
    init(_ arguments: [String], cpu: Int? = nil, executable: URL? = nil) throws {
        let executable = executable ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        role = arguments.first ?? "child"
        if let cpu {
            // taskset sets the affinity before exec, so every thread the child makes inherits it.
            process.executableURL = URL(fileURLWithPath: Placement.taskset)
            process.arguments = ["-c", "\(cpu)", executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.standardOutput = output
        process.standardInput = input
        // A benchmark killed midway leaves no role behind (ParentWatch).
        process.environment = ProcessInfo.processInfo.environment.merging([ParentWatch.variable: "1"]) { $1 }
        try process.run()
    }

    /// The next line that starts with `prefix`, split into words; throws when the child ends
    /// first, or stops it and throws when nothing comes within `timeout` (a run never hangs).
    func line(startingWith prefix: String, within timeout: Duration = .seconds(300)) throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
                buffered = Data(buffered[buffered.index(after: newline)...])
                if line.hasPrefix(prefix) { return line.split(separator: " ").map(String.init) }
                continue
            }
            var readable = pollfd(fd: output.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
            let remaining = ContinuousClock.now.duration(to: deadline)
            let milliseconds = Int32(clamping: max(0, remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
            if poll(&readable, 1, milliseconds) == 0 {
                process.terminate()
                throw HandoffError(.remoteApplicationTimedOut, "\(role) said no \(prefix) within \(timeout); stopped it")
            }
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else {
                throw HandoffError(.handoffFailed, "\(role) ended before saying \(prefix)")
            }
            buffered.append(chunk)
        }
    }

    /// Closes the child's standard input: the signal to report and exit.
    func closeInput() { try? input.fileHandleForWriting.close() }

    /// Writes a line to the child's standard input (a step of a role that takes its steps so).
    func send(_ line: String) throws { try input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8)) }

    func wait() { process.waitUntilExit() }
}

/// Streams `total` bytes between two processes (an originator and a continuer, direct bus on
/// loopback); returns the time to read everything and each end's peak resident memory.
func streamBetweenProcesses(total: Int, options: Options, continuerArguments: [String] = [], within timeout: Duration = .seconds(300),
                            placement: Placement = .free) throws -> ProcessStreamRun {
    let originator = try Child(["stream-originator", "--size-bytes", "\(total)"] + options.childArguments, cpu: placement.serving)
    let ready = try originator.line(startingWith: "READY")  // READY endpoint id
    let continuer = try Child(["stream-continuer", "--peer", ready[1], "--id", ready[2], "--size-bytes", "\(total)"] + options.childArguments + continuerArguments,
                              cpu: placement.asking)
    let done = try continuer.line(startingWith: "DONE", within: timeout)  // DONE seconds bytes peak resumes duplicates cpu
    continuer.wait()
    originator.closeInput()
    let report = try originator.line(startingWith: "PEAK")  // PEAK bytes resumes resent cpu
    originator.wait()
    guard Int(done[2]) == total else { throw HandoffError(.streamTruncated, "the continuer read \(done[2]) of \(total) bytes") }
    return ProcessStreamRun(seconds: Double(done[1]) ?? -1, originatorPeak: Int(report[1]) ?? 0, continuerPeak: Int(done[3]) ?? 0,
                            originatorCPU: Double(report[4]) ?? 0, continuerCPU: Double(done[6]) ?? 0)
}

/// The raw libzmq transfer in a process of its own: returns its seconds and the process's peak memory.
func rawStreamInProcess(total: Int, options: Options) throws -> (seconds: Double, peak: Int) {
    let child = try Child(["raw-stream", "--size-bytes", "\(total)", "--window", "\(options.window)"])
    let done = try child.line(startingWith: "DONE")
    child.wait()
    return (Double(done[1]) ?? -1, Int(done[2]) ?? 0)
}

/// `slow-reader`: a stream between two processes whose reader is slow enough that the transfer
/// lasts `--seconds` (65 by default: longer than every timeout in the node's configuration); it
/// must arrive whole. Prints the outcome, the time and both ends' peak memory.
func benchSlowReader(options: Options, seconds target: Duration) throws {
    let total = options.sizeMiB << 20
    let chunks = max(1, total / options.chunk)
    let pause = target / chunks
    let defaults = Node.Configuration(name: "defaults", bus: .direct(listen: "tcp://127.0.0.1:*", peers: []))
    print("Slow reader: \(options.sizeMiB) MiB in \(chunks) chunks of \(options.chunk / 1024) KiB between two processes; the reader pauses \(pause) after each, for about \(target) in all")
    print("Timeouts in the configuration: continue \(defaults.continueTimeout), stream idle \(defaults.streamIdleTimeout), resume window \(defaults.streamResumeWindow)")
    let run = try streamBetweenProcesses(total: total, options: options, continuerArguments: ["--pause-ms", "\(Int(seconds(pause) * 1000))"],
                                         within: target + .seconds(120))
    row("", "seconds", "originator / continuer peak")
    row("arrived whole, CRC-32C checked", String(format: "%.1f", run.seconds), "\(mebibytes(run.originatorPeak)) / \(mebibytes(run.continuerPeak))")
    let longest = max(defaults.continueTimeout, defaults.streamIdleTimeout, defaults.streamResumeWindow)
    compare("slow reader, \(options.sizeMiB) MiB", handoff: String(format: "%.1f s, whole", run.seconds), baseline: "longest timeout",
            "\(longest)", ratio: "", target: "outlasts it", met: run.seconds > seconds(longest))
}

/// The raw libzmq transfer with each end in a process of its own, as Handoff's ends are: returns
/// the fetching end's seconds (first request to last byte) and each end's peak memory.
/// With `checksum`, both ends checksum the bytes as Handoff's do (`--checksum-raw`).
func rawStreamBetweenProcesses(total: Int, options: Options, placement: Placement = .free, checksum: Bool = false) throws -> ProcessStreamRun {
    let checking = checksum ? ["--checksum-raw"] : []
    let server = try Child(["raw-stream-server", "--size-bytes", "\(total)"] + checking, cpu: placement.serving)
    let ready = try server.line(startingWith: "READY")  // READY endpoint
    let client = try Child(["raw-stream-client", "--peer", ready[1], "--size-bytes", "\(total)", "--window", "\(options.window)"] + checking,
                           cpu: placement.asking)
    let done = try client.line(startingWith: "DONE")  // DONE seconds peak cpu
    client.wait()
    let report = try server.line(startingWith: "PEAK")  // PEAK bytes cpu
    server.wait()
    guard let seconds = Double(done[1]), seconds > 0 else { throw HandoffError(.streamTruncated, "the raw transfer between processes failed") }
    return ProcessStreamRun(seconds: seconds, originatorPeak: Int(report[1]) ?? 0, continuerPeak: Int(done[2]) ?? 0,
                            originatorCPU: Double(report[2]) ?? 0, continuerCPU: Double(done[3]) ?? 0)
}

/// `raw-stream-server`: binds a raw ROUTER (`--listen HOST`, loopback by default), says `READY
/// endpoint`, serves `--size-bytes` in chunks on request (`--checksum-raw`: copied and checksummed
/// as a Handoff writer does), then says `PEAK bytes cpu-seconds` (its CPU while serving).
func runRawStreamServer(_ arguments: [String]) {
    let options = Options(arguments)
    let total = intOption("--size-bytes", 0, in: arguments)
    let server = bindAndAnnounce(host: stringOption("--listen", in: arguments) ?? "127.0.0.1") { raw_stream_bind($0, $1, $2) }
    let cpu = processCPUSeconds()
    raw_stream_serve(server, UInt64(total), options.chunk, arguments.contains("--checksum-raw") ? 1 : 0)
    tell("PEAK \(peakResidentBytes()) \(processCPUSeconds() - cpu)")
}

/// Binds a raw baseline's serving end at `tcp://host:*` with `bind` (a C `raw_*_bind`) and says
/// `READY endpoint`; says `FAILED …` and exits when the bind fails.
func bindAndAnnounce(host: String, _ bind: (String, UnsafeMutablePointer<CChar>, Int) -> OpaquePointer?) -> OpaquePointer {
    var endpoint = [CChar](repeating: 0, count: 256)
    guard let server = endpoint.withUnsafeMutableBufferPointer({ bind("tcp://\(host):*", $0.baseAddress!, $0.count) }) else {
        tell("FAILED cannot bind tcp://\(host):*")
        exit(1)
    }
    tell("READY \(cText(endpoint))")
    return server
}

/// The text of a NUL-terminated C buffer (an endpoint a C baseline wrote).
func cText(_ characters: [CChar]) -> String {
    String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// `raw-stream-client`: fetches `--size-bytes` from the raw server at `--peer` (`--checksum-raw`:
/// checksumming every byte, as a Handoff reader does); says `DONE seconds peak cpu-seconds`.
func runRawStreamClient(_ arguments: [String]) {
    let options = Options(arguments)
    let total = intOption("--size-bytes", 0, in: arguments)
    let cpu = processCPUSeconds()
    let elapsed = raw_stream_fetch(stringOption("--peer", in: arguments) ?? "", UInt64(total), options.chunk, Int32(options.window),
                                   arguments.contains("--checksum-raw") ? 1 : 0)
    tell("DONE \(elapsed) \(peakResidentBytes()) \(processCPUSeconds() - cpu)")
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
    configuration.streamChecksum = options.checksum
    return configuration
}

/// `stream-originator`: advertises a streaming activity, writes `--size-bytes` to whoever opens its
/// streams, and reports its peak memory, resumes, bytes sent twice and the CPU it spent from the
/// stream's open on, once its standard input closes.
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
        await untilStandardInputCloses()
        let counters = await node.streamCounters
        let cpu = processCPUSeconds() - (writer.cpuAtOpen ?? processCPUSeconds())
        tell("PEAK \(peakResidentBytes()) \(counters.resumed) \(counters.bytesResent) \(cpu)")  // PEAK bytes resumes bytes-sent-again cpu-seconds
    }
}

/// `stream-continuer`: continues the activity `--id` from the node at `--peer`, reads its stream
/// to the end, and reports the time, the bytes, its peak memory, resumes, duplicate bytes and the CPU
/// it spent on the stream.
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
        // The span covers every process of the run (the originator's too): the FIFO's path is in
        // the environment both inherit from the benchmark.
        MeasuredSpan.begin()
        let started = ContinuousClock.now
        let cpu = processCPUSeconds()
        let streams = try await node.openStreams(for: continued, direction: .fromOriginator)
        var received = 0
        // A slow reader (`--pause-ms`): it waits this long after each chunk, granting no credit meanwhile.
        let pause = Duration.milliseconds(intOption("--pause-ms", 0, in: arguments))
        // Every byte, once the end's length and checksum checked out (the iteration throws otherwise).
        for try await chunk in streams.input {
            received += chunk.count
            if pause > .zero { try await Task.sleep(for: pause) }
        }
        let elapsed = seconds(ContinuousClock.now - started)
        MeasuredSpan.end()
        let counters = await node.streamCounters
        tell("DONE \(elapsed) \(received) \(peakResidentBytes()) \(counters.resumed) \(counters.duplicateBytesDropped) \(processCPUSeconds() - cpu)")
    }
}

/// `raw-stream`: the raw libzmq DEALER/ROUTER transfer alone in this process.
func runRawStream(_ arguments: [String]) {
    let options = Options(arguments)
    let total = intOption("--size-bytes", 0, in: arguments)
    let elapsed = raw_dealer_router_transfer(UInt64(total), options.chunk, Int32(options.window), 0)
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

/// Returns once the parent closes this process's standard input: a child's signal to report and
/// exit. The blocking reads run on a thread of their own: a detached task would run them on an
/// event loop (they are the global executor here) and keep that loop from everything else for the
/// whole run, so that the measured process ran on one loop instead of two.
func untilStandardInputCloses() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let thread = Thread {
            while FileHandle.standardInput.availableData.count > 0 {}
            continuation.resume()
        }
        thread.name = "stdin"
        thread.start()
    }
}

/// Writes a line to standard output at once (unbuffered: the parent waits for it).
func tell(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
