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
