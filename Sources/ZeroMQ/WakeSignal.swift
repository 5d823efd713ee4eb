import CZeroMQ
import Glibc

/// A file descriptor another thread can make readable: the way to wake a thread blocked in
/// ``Poller/poll(timeout:)`` (add ``fileDescriptor`` to the poller), as libzmq wakes its own threads.
///
/// An eventfd: signals before the drain add up to one readable state, so a flood of them costs
/// one wake-up.
public final class WakeSignal: Sendable {
    public let fileDescriptor: Int32

    public init() {
        fileDescriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(fileDescriptor >= 0, "eventfd failed: errno \(errno)")
    }

    deinit { Glibc.close(fileDescriptor) }

    /// Makes the descriptor readable until the next ``drain()``. Safe from any thread.
    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(fileDescriptor, &one, 8)
    }

    /// Takes the signals so far (the descriptor is no longer readable).
    public func drain() {
        var count: UInt64 = 0
        _ = Glibc.read(fileDescriptor, &count, 8)
    }
}
