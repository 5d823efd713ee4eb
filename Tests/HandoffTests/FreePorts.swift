import Foundation
import Synchronization
import ZeroMQ

/// A loopback port nobody listens on right now.
func freePort() throws -> String {
    try freePorts(1)[0]
}

/// `count` loopback endpoints on distinct free ports, for processes started later.
///
/// Below the kernel's ephemeral range (`ip_local_port_range`: 32768 and up by default). A port of
/// that range found free and let go could be taken before the process bound it by anything that
/// binds port 0 or connects out (each outgoing connection takes an ephemeral port), and was: a
/// broker of MetricsTests, "Address already in use", in a one-loop pass (2026-12-06). Below it
/// only a bind naming the port takes one: each is bound here to check that it is free, and none
/// is handed out twice in this process.
func freePorts(_ count: Int) throws -> [String] {
    let context = try Context()
    var sockets: [Socket] = []
    defer { for socket in sockets { socket.close() } }
    let ephemeralStart = ephemeralPortRangeStart()
    let ports = max(1_024, ephemeralStart - 12_000)..<ephemeralStart
    var endpoints: [String] = []
    for _ in 0..<10_000 where endpoints.count < count {
        let port = Int.random(in: ports)
        guard portsHandedOut.withLock({ $0.insert(port).inserted }) else { continue }
        let socket = try context.socket(.rep)
        let endpoint = "tcp://127.0.0.1:\(port)"
        do { try socket.bind(endpoint) } catch { socket.close(); continue }  // another's: tried once only
        sockets.append(socket)
        endpoints.append(endpoint)
    }
    guard endpoints.count == count else { throw ProcessFailure("no \(count) free ports in \(ports)") }
    return endpoints
}

/// The ports ``freePorts(_:)`` handed out (or found taken) in this process.
private let portsHandedOut = Mutex<Set<Int>>([])

/// The first port of the kernel's ephemeral range (32768 where it cannot be read).
private func ephemeralPortRangeStart() -> Int {
    let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
    let start = range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32_768
    return start > 2_048 ? start : 32_768
}
