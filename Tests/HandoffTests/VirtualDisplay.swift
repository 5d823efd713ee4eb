import Foundation
import HandoffTestSupport

/// An X server of its own (Xvfb) for a test, on a display number nobody uses; ended (and reaped)
/// by `stop`.
struct VirtualDisplay {
    let process: Process
    let name: String
    /// The xclip processes that own a selection (`-i` stays, serving pastes, until another client
    /// copies): reaped with the display.
    final class Owners: @unchecked Sendable {
        // Invariant for @unchecked Sendable: touched only under `lock`.
        private let lock = NSLock()
        private var processes: [Process] = []
        func add(_ process: Process) { lock.withLock { processes.append(process) } }
        func reapAll() { for process in lock.withLock({ processes }) { reap(process) } }
    }
    let owners = Owners()

    static let xvfb = ["/usr/bin/Xvfb"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let xclip = ["/usr/bin/xclip"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static func start() async throws -> VirtualDisplay {
        guard let xvfb else { throw ProcessFailure("Xvfb is not installed (apt-get install xvfb)") }
        for number in (90...199).shuffled() where !inUse(number) {
            removeLeftovers(number)
            let process = Process.watched(URL(fileURLWithPath: xvfb), [":\(number)", "-screen", "0", "640x480x24", "-nolisten", "tcp"])
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.spawn()
            if await eventually(within: .seconds(10), { FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") || !process.isRunning }), process.isRunning {
                return VirtualDisplay(process: process, name: ":\(number)")
            }
            reap(process)
        }
        throw ProcessFailure("no display number free for Xvfb")
    }

    func stop() {
        owners.reapAll()
        reap(process)
        // Killed, the server could not remove its lock and socket: left, they would use up the
        // display numbers run after run.
        if let number = Int(name.dropFirst()) { Self.removeLeftovers(number) }
    }

    /// Whether display `number` belongs to a running X server: its lock file names a live process.
    /// (A server killed -9 leaves its lock and socket behind.)
    static func inUse(_ number: Int) -> Bool {
        guard let lock = try? String(contentsOfFile: "/tmp/.X\(number)-lock", encoding: .ascii) else { return false }
        guard let pid = pid_t(lock.trimmingCharacters(in: .whitespacesAndNewlines)) else { return true }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// A dead server's lock and socket, removed so that a new server takes the number and its
    /// socket is not mistaken for the new one's.
    static func removeLeftovers(_ number: Int) {
        try? FileManager.default.removeItem(atPath: "/tmp/.X\(number)-lock")
        try? FileManager.default.removeItem(atPath: "/tmp/.X11-unix/X\(number)")
    }

    /// `xclip -i` in the foreground (`-quiet`), owning the selection until another client copies:
    /// returns once it has taken it.
    func copy(_ arguments: [String]) async throws {
        let process = Process.watched(URL(fileURLWithPath: Self.xclip!), ["-quiet"] + arguments)
        process.environment = ProcessInfo.processInfo.environment.merging(["DISPLAY": name]) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.spawn()
        owners.add(process)
        try await Task.sleep(for: .milliseconds(200))
    }

    /// Runs xclip on this display: its exit status and standard output.
    func xclip(_ arguments: [String], timeout: Duration = .seconds(30)) async throws -> (status: Int32, output: Data) {
        let process = Process.watched(URL(fileURLWithPath: Self.xclip!), arguments)
        process.environment = ProcessInfo.processInfo.environment.merging(["DISPLAY": name]) { $1 }
        return try await runCapturing(process, timeout: timeout, what: "xclip \(arguments.joined(separator: " ")) on \(name)")
    }

    /// Waits until this display's clipboard offers `target` (its owner lists it among its
    /// TARGETS): a paste's premise. That an agent on another host offered a copy on the bus says
    /// nothing of when this display's agent took the offer, which a loaded machine can delay.
    func untilClipboardOffers(_ target: String, within limit: Duration = .seconds(10)) async -> Bool {
        await eventually(within: limit) {
            let targets = try? await self.xclip(["-selection", "clipboard", "-t", "TARGETS", "-o"], timeout: .seconds(2))
            return targets.map { String(decoding: $0.output, as: UTF8.self).split(whereSeparator: \.isNewline).contains { $0 == target } } ?? false
        }
    }
}

/// Runs `process` with its standard output in a file (a pipe could fill and stall it), reaping it
/// if it has not finished within `timeout`: its exit status and output.
func runCapturing(_ process: Process, timeout: Duration, what: String) async throws -> (status: Int32, output: Data) {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent("output-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: output.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: output) }
    process.standardOutput = try FileHandle(forWritingTo: output)
    process.standardError = FileHandle.nullDevice
    try process.spawn()
    let deadline = ContinuousClock.now + timeout
    while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    if process.isRunning {
        reap(process)
        throw ProcessFailure("\(what) did not finish within \(timeout)")
    }
    return (process.terminationStatus, try Data(contentsOf: output))
}

/// Random bytes behind a PNG signature: what a clipboard takes for an image, and no compression
/// on the way can shrink.
func randomPNG(bytes count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    var generator = SystemRandomNumberGenerator()
    for index in stride(from: 0, to: count - count % 8, by: 8) {
        withUnsafeBytes(of: generator.next()) { random in for offset in 0..<8 { bytes[index + offset] = random[offset] } }
    }
    bytes.replaceSubrange(0..<8, with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
    return bytes
}
