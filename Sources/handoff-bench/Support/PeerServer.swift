import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A NATS or Redis server the benchmark starts on a free loopback port and stops when done.
final class PeerServer {
    let name: String
    let port: Int32
    private let process: Process
    private let log: URL

    /// Starts `name` (nats-server or redis-server) on 127.0.0.1 and waits until it accepts
    /// connections. Returns `nil`, with a line saying why, when the server is not installed or does
    /// not come up: the benchmark goes on without it.
    static func start(_ name: String) -> PeerServer? {
        let candidates = ["/usr/sbin/\(name)", "/usr/bin/\(name)", "/usr/local/bin/\(name)"]
        guard let executable = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            print("  (\(name) is not installed: `apt-get install \(name)`, or run scripts/bench; skipped)")
            return nil
        }
        guard let port = freeLoopbackPort() else {
            print("  (no free loopback port for \(name); skipped)")
            return nil
        }
        let arguments: [String] = switch name {
        case "nats-server": ["-a", "127.0.0.1", "-p", "\(port)"]
        // No persistence, and no output-buffer limit for subscribers: the default (32 MB) drops a
        // subscriber that falls behind a fast publisher, which would end the benchmark, not slow it.
        default: ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                  "--client-output-buffer-limit", "pubsub 0 0 0"]
        }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-bench-\(name)-\(getpid()).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = try? FileHandle(forWritingTo: log)
        process.standardError = process.standardOutput
        do {
            try process.run()
        } catch {
            print("  (\(name) did not start: \(error); skipped)")
            return nil
        }
        let server = PeerServer(name: name, port: port, process: process, log: log)
        let deadline = Date().addingTimeInterval(10)
        while !accepts(port: port) {
            guard process.isRunning, Date() < deadline else {
                let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                print("  (\(name) did not accept connections on 127.0.0.1:\(port) within 10 s; skipped) \(said.suffix(300))")
                server.stop()
                return nil
            }
            usleep(20_000)
        }
        return server
    }

    private init(name: String, port: Int32, process: Process, log: URL) {
        self.name = name
        self.port = port
        self.process = process
        self.log = log
    }

    /// Stops the server and waits for it to exit.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: log)
    }

    deinit { stop() }
}

/// 127.0.0.1:`port` as a socket address.
func loopbackAddress(port: Int32) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return address
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
func freeLoopbackPort() -> Int32? {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
            bind(descriptor, raw, length) == 0 && getsockname(descriptor, raw, &length) == 0
        }
    }
    return bound ? Int32(UInt16(bigEndian: address.sin_port)) : nil
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func accepts(port: Int32) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = loopbackAddress(port: port)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// This process's peak resident memory so far (VmHWM), in bytes; 0 where /proc does not say.
func peakResidentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
    let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
    return kilobytes * 1024
}
