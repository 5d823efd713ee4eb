import Glibc

/// The remote end of a connection a bound socket accepted, asked of the kernel by its file
/// descriptor (the value of an `accepted` monitor event).
///
/// libzmq's monitor events (version 1, the only version without the draft API) name the *local*
/// endpoint of a bound socket, never the peer: a handshake that fails at a server says
/// `tcp://0.0.0.0:5555`, whoever knocked. The descriptor is the one handle on the peer they carry,
/// and only while the connection is open: libzmq closes it right after reporting the
/// disconnection, and the kernel hands the number to the next connection.
enum PeerAddress {
    /// The peer's address as ZAP names peers — the IP address alone (`192.0.2.7`, `2001:db8::7`),
    /// without the port, which changes at every reconnection — or, for IPC, the peer process;
    /// `nil` when the descriptor is no longer a connected socket.
    static func of(descriptor: Int32) -> String? {
        guard let (storage, _) = socketName(of: descriptor) else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return text(of: storage, family: AF_INET, at: MemoryLayout<sockaddr_in>.offset(of: \.sin_addr)!, length: INET_ADDRSTRLEN)
        case AF_INET6:
            return text(of: storage, family: AF_INET6, at: MemoryLayout<sockaddr_in6>.offset(of: \.sin6_addr)!, length: INET6_ADDRSTRLEN)
        case AF_UNIX:
            // An IPC peer has no address; its process is what tells one peer from another.
            guard let credentials = credentials(of: descriptor) else { return "ipc" }
            return "ipc (pid \(credentials.pid), uid \(credentials.uid))"
        default:
            return nil
        }
    }

    /// The kernel's name for the peer of `descriptor` (`getpeername`) and its length; `nil` when
    /// the descriptor is no longer a connected socket.
    static func socketName(of descriptor: Int32) -> (sockaddr_storage, socklen_t)? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        return status == 0 ? (storage, length) : nil
    }

    /// The process at the other end of an IPC connection (`SO_PEERCRED`).
    static func credentials(of descriptor: Int32) -> PeerCredentials? {
        var credentials = PeerCredentials()
        var size = socklen_t(MemoryLayout<PeerCredentials>.size)
        return getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0 ? credentials : nil
    }

    /// The text of the IP address at byte `offset` of a socket address.
    private static func text(of storage: sockaddr_storage, family: Int32, at offset: Int, length: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(length))
        let converted = withUnsafeBytes(of: storage) { inet_ntop(family, $0.baseAddress! + offset, &buffer, socklen_t(length)) }
        guard converted != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// `struct ucred` (SO_PEERCRED), which Glibc declares only under `_GNU_SOURCE`.
struct PeerCredentials {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
