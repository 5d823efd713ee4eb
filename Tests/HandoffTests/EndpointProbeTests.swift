import Foundation
import Glibc
import Testing
import ZeroMQ

@testable import Handoff
import HandoffTestSupport

/// The kernel's answer to "does anything listen there", which tells a dead originator (refused) from
/// a cut link (unanswered), against real sockets.
@Suite("Probing an endpoint: gone, alive, or out of reach", .exclusive)
struct EndpointProbeTests {
    @Test("a listening TCP port accepts; the same port once closed refuses; a port that drops connections (a cut link) is unanswered, not refused")
    func tcp() async throws {
        let context = try Context()
        let router = try context.socket(.router)
        try router.bind("tcp://127.0.0.1:*")
        let endpoint = try router.lastEndpoint
        #expect(EndpointProbe.probe(endpoint, timeout: .seconds(1)) == .accepting)
        try router.unbind(endpoint)
        router.close()
        // libzmq closes the listener on its I/O thread, a moment later.
        let closing = ContinuousClock.now
        while EndpointProbe.probe(endpoint, timeout: .seconds(1)) == .accepting, ContinuousClock.now - closing < .seconds(10) {
            try await Task.sleep(for: .milliseconds(10))
        }
        guard case .refused = EndpointProbe.probe(endpoint, timeout: .seconds(1)) else {
            Issue.record("a closed port was not refused: \(EndpointProbe.probe(endpoint, timeout: .seconds(1)))")
            return
        }
        // A listener whose accept queue is full: the kernel drops further SYNs, as a cut link
        // does. Nothing answers, and that is never read as a refusal.
        let (listener, port) = try fullListener()
        defer { close(listener.fd); listener.clients.forEach { close($0) } }
        let outcome = EndpointProbe.probe("tcp://127.0.0.1:\(port)", timeout: .milliseconds(300))
        guard case .unanswered = outcome else {
            Issue.record("a listener that never answers was read as \(outcome)")
            return
        }
    }

    /// A loopback listener with a backlog of 0, filled by connections it never accepts.
    func fullListener() throws -> (listener: (fd: Int32, clients: [Int32]), port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        try #require(bound && listen(fd, 0) == 0)
        var clients: [Int32] = []
        for _ in 0..<3 {
            let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) } }
            clients.append(client)
        }
        usleep(100_000)
        return ((fd, clients), UInt16(bigEndian: address.sin_port))
    }

    @Test("an IPC socket file that is bound accepts; one that is gone refuses")
    func ipc() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(getpid()).sock").path
        let context = try Context()
        let router = try context.socket(.router)
        try router.bind("ipc://\(path)")
        #expect(EndpointProbe.probe("ipc://\(path)", timeout: .seconds(1)) == .accepting)
        router.close()
        try? FileManager.default.removeItem(atPath: path)
        guard case .refused = EndpointProbe.probe("ipc://\(path)", timeout: .seconds(1)) else {
            Issue.record("a vanished socket file was not refused")
            return
        }
    }

    @Test("host and port are read from every TCP endpoint form a continuation endpoint can have")
    func addresses() {
        #expect(EndpointProbe.hostAndPort("127.0.0.1:5555")! == ("127.0.0.1", "5555"))
        #expect(EndpointProbe.hostAndPort("[::1]:5555")! == ("::1", "5555"))
        #expect(EndpointProbe.hostAndPort("eth0;desk.example:5555")! == ("desk.example", "5555"))
        #expect(EndpointProbe.hostAndPort("*:5555") == nil)
        #expect(EndpointProbe.hostAndPort("no-port") == nil)
        #expect(EndpointProbe.probe("inproc://x", timeout: .seconds(1)) != .accepting)
    }
}
