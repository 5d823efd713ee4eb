import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Whether anything listens at a ZeroMQ endpoint, asked of the kernel with a plain connect: tells a
/// peer whose process is gone (its port or socket file refuses) from a link that is merely cut
/// (nothing answers, or no route), which libzmq's reconnect events do not tell apart.
///
/// Blocking (name resolution, up to `timeout` for the connect): run it on a worker thread.
enum EndpointProbe {
    enum Outcome: Equatable, Sendable {
        /// Something accepted the connection (closed again at once).
        case accepting
        /// The kernel answered that nothing listens there: the peer's process is gone.
        case refused(String)
        /// No answer either way within the timeout, no route, or an endpoint this does not probe.
        case unanswered(String)
    }

    static func probe(_ endpoint: String, timeout: Duration) -> Outcome {
        if endpoint.hasPrefix("ipc://") {
            return probeUnix(path: String(endpoint.dropFirst("ipc://".count)), timeout: timeout)
        }
        guard endpoint.hasPrefix("tcp://"), let (host, port) = hostAndPort(String(endpoint.dropFirst("tcp://".count))) else {
            return .unanswered("\(endpoint) is not a TCP or IPC endpoint")
        }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, port, &hints, &found)
        guard resolved == 0, let first = found else {
            return .unanswered("\(host) does not resolve: \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(first) }
        return connect(family: first.pointee.ai_family, address: first.pointee.ai_addr, length: first.pointee.ai_addrlen, timeout: timeout)
    }

    /// "host:port", "[v6]:port"; a ZeroMQ source address ("src;host:port") keeps its destination.
    static func hostAndPort(_ address: String) -> (String, String)? {
        let destination = address.split(separator: ";").last.map(String.init) ?? address
        guard let colon = destination.lastIndex(of: ":") else { return nil }
        var host = String(destination[..<colon])
        let port = String(destination[destination.index(after: colon)...])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, host != "*", !port.isEmpty else { return nil }
        return (host, port)
    }

    private static func probeUnix(path: String, timeout: Duration) -> Outcome {
        // An abstract socket ("@name") has no file; its name starts with a zero byte.
        let bytes = path.hasPrefix("@") ? [0] + Array(path.utf8.dropFirst()) : Array(path.utf8)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return .unanswered("the path is too long to probe") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (path.hasPrefix("@") ? 0 : 1))
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(family: AF_UNIX, address: $0, length: length, timeout: timeout)
            }
        }
    }

    private static func connect(family: Int32, address: UnsafePointer<sockaddr>, length: socklen_t, timeout: Duration) -> Outcome {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .unanswered("no socket to probe with: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var error: Int32 = 0
        if Glibc.connect(fd, address, length) != 0 {
            error = errno
            if error == EINPROGRESS {
                var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let ready = poll(&poller, 1, Int32(clamping: timeout.milliseconds))
                guard ready > 0 else { return .unanswered("no answer within \(timeout)") }
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            }
        }
        switch error {
        case 0: return .accepting
        // A port nobody listens on (TCP's reset), or a socket file that is gone or unbound.
        case ECONNREFUSED, ENOENT: return .refused(String(cString: strerror(error)))
        default: return .unanswered(String(cString: strerror(error)))
        }
    }
}
