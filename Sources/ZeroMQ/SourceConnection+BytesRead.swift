import Glibc

extension SourceConnection {
    /// How many bytes libzmq has read so far off the TCP connection `descriptor` names now: what
    /// the kernel received from the peer (`tcpi_bytes_received`), less what still waits in its
    /// receive queue (`SIOCINQ`). `nil` for a connection that is not TCP (IPC) or no longer open.
    /// Two system calls.
    public static func bytesRead(descriptor: Int32) -> Int? {
        // The kernel's struct tcp_info (linux/tcp.h): `tcpi_bytes_received` is the 8 bytes at 128,
        // since Linux 4.1; the kernel only ever adds fields at its end. glibc's own declaration
        // (netinet/tcp.h) stops before it, so the struct is read as bytes.
        var info = [UInt8](repeating: 0, count: 256)
        var length = socklen_t(info.count)
        let status = info.withUnsafeMutableBytes { getsockopt(descriptor, Int32(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length) }
        guard status == 0, length >= Self.bytesReceivedOffset + 8 else { return nil }
        let received = info.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: Int(Self.bytesReceivedOffset), as: UInt64.self) }
        var unread: Int32 = 0
        guard ioctl(descriptor, UInt(FIONREAD), &unread) == 0 else { return nil }
        return Int(clamping: received) - Int(unread)
    }

    /// Where `tcpi_bytes_received` lies in the kernel's struct tcp_info.
    private static let bytesReceivedOffset: socklen_t = 128
}
