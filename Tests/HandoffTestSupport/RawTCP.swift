import Foundation
import Glibc

/// Why a raw TCP step of a test failed.
public struct RawTCPFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A plain TCP connection to a `tcp://IPv4:port` endpoint, for tests that speak ZMTP bytes by hand
/// (a hostile or non-CURVE peer). Returns the connected descriptor; the caller closes it.
public func connectRawTCP(to endpoint: String) throws -> Int32 {
    let parts = endpoint.dropFirst("tcp://".count).split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]) else { throw RawTCPFailure("not a tcp endpoint: \(endpoint)") }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw RawTCPFailure("socket: errno \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr(String(parts[0]))
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        let error = errno
        close(fd)
        throw RawTCPFailure("connect to \(endpoint): errno \(error)")
    }
    return fd
}

/// The whole ZMTP 3.0 greeting of a client of `mechanism` ("NULL", "CURVE"): signature, version
/// 3.0, the mechanism's name padded to 20 bytes, as-server 0, filler. A client of another mechanism
/// than a server's that sends it at once makes the server see the mismatch
/// (ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) and hang up.
public func zmtpGreeting(mechanism: String) -> [UInt8] {
    let name = Array(mechanism.utf8.prefix(20))
    return [0xFF, 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 3, 0] + name + [UInt8](repeating: 0, count: 20 - name.count)
        + [0] + [UInt8](repeating: 0, count: 31)
}

/// Sends all of `bytes` on a raw connection.
public func sendRaw(_ bytes: [UInt8], on fd: Int32) throws {
    guard send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else { throw RawTCPFailure("send: errno \(errno)") }
}

/// ZMTP 3.0's READY command of a NULL peer, claiming to be a socket of `type` ("PUB", "DEALER").
public func zmtpReady(as type: String) -> [UInt8] {
    let name = Array("Socket-Type".utf8), value = Array(type.utf8)
    let body = [5] + Array("READY".utf8) + [UInt8(name.count)] + name + withUnsafeBytes(of: UInt32(value.count).bigEndian, Array.init) + value
    return [0x04, UInt8(body.count)] + body
}

/// Sends frames of 200 bytes on a raw ZMTP connection, each marked "more" (one message that never
/// ends), until `limit` bytes are sent or a send fails (the connection gone, or nothing taken for
/// the socket's send timeout); returns how many were sent. With `bytesPerSecond`, no faster: at
/// loopback's own speed the limit can be reached while a loaded machine delays the receiver's
/// periodic check (a node's one loop in the suite's one-loop pass), which then says nothing of
/// the rule.
public func sendFramesOfOneMessage(on fd: Int32, upTo limit: Int, bytesPerSecond: Int? = nil) -> Int {
    let frame: [UInt8] = [0x01, 200] + [UInt8](repeating: 0x02, count: 200)
    let chunk = [UInt8]((0..<5_000).map { _ in frame }.joined())
    let started = ContinuousClock.now
    var sent = 0
    while sent < limit {
        if let bytesPerSecond {
            let due = started + .seconds(Double(sent) / Double(bytesPerSecond))
            if due > .now { Thread.sleep(forTimeInterval: Double((due - .now) / .milliseconds(1)) / 1_000) }
        }
        // (Each chunk whole, a partial send's rest next: the stream stays frame after frame.)
        let offset = sent % chunk.count
        let written = chunk.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        guard written > 0 else { break }
        sent += written
    }
    return sent
}

/// ``sendFramesOfOneMessage(on:upTo:)`` on a thread of its own, as a peer in a process of its own
/// sends: its sends block (up to the send timeout once the other end stops taking them), and a
/// task of the test's would hold one of the cooperative pool's threads, which every test running
/// beside it shares, all that time.
public func sendFramesOfOneMessageOnThread(on fd: Int32, upTo limit: Int, bytesPerSecond: Int? = nil) async -> Int {
    await withCheckedContinuation { sent in
        let thread = Thread { sent.resume(returning: sendFramesOfOneMessage(on: fd, upTo: limit, bytesPerSecond: bytesPerSecond)) }
        thread.name = "endless message"
        thread.start()
    }
}

/// Whether the other end has ended a raw connection (its end, or a reset, read after whatever
/// it sent before), waiting up to `timeout`.
public func rawConnectionEnded(_ fd: Int32, within timeout: Duration) async throws -> Bool {
    var buffer = [UInt8](repeating: 0, count: 4_096)
    let deadline = ContinuousClock.now + timeout
    while true {
        var read = 0
        repeat { read = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)) } while read > 0
        if read == 0 || errno != EAGAIN { return true }
        if ContinuousClock.now >= deadline { return false }
        try await Task.sleep(for: .milliseconds(100))
    }
}

/// A send timeout on a raw connection, so that a peer that stops reading ends a send.
public func setRawSendTimeout(_ fd: Int32, seconds: Int) {
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
}

/// A plain TCP listener on loopback, for tests whose node connects to a peer that speaks ZMTP
/// bytes by hand (a hostile originator or direct peer). Closed by ``close()``.
public struct RawTCPListener: Sendable {
    public let descriptor: Int32
    /// The `tcp://127.0.0.1:port` endpoint it listens at.
    public let endpoint: String

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw RawTCPFailure("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            let error = errno
            Glibc.close(fd)
            throw RawTCPFailure("bind or listen on loopback: errno \(error)")
        }
        descriptor = fd
        endpoint = "tcp://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
    }

    /// The next connection made to it (a blocking descriptor, which the caller closes), waiting up
    /// to `timeout`.
    public func accept(within timeout: Duration) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while true {
            let fd = Glibc.accept(descriptor, nil, nil)
            if fd >= 0 { return fd }
            guard errno == EAGAIN || errno == EWOULDBLOCK else { throw RawTCPFailure("accept: errno \(errno)") }
            guard ContinuousClock.now < deadline else { throw RawTCPFailure("nothing connected to \(endpoint) within \(timeout)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    public func close() { Glibc.close(descriptor) }
}
