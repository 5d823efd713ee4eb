import Foundation
import Glibc

/// A plain TCP connection to a `tcp://IPv4:port` endpoint, for tests that speak ZMTP bytes by hand
/// (a hostile or non-CURVE peer). Returns the connected descriptor; the caller closes it.
func connectRawTCP(to endpoint: String) throws -> Int32 {
    let parts = endpoint.dropFirst("tcp://".count).split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]) else { throw ProcessFailure("not a tcp endpoint: \(endpoint)") }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw ProcessFailure("socket: errno \(errno)") }
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
        throw ProcessFailure("connect to \(endpoint): errno \(error)")
    }
    return fd
}
