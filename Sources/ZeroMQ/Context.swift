import CZeroMQ
import Glibc
import Synchronization

/// A libzmq context: the owner of I/O threads and the factory of sockets.
///
/// A context may be shared by every thread and task of a process. Each ``Socket`` keeps its context
/// alive, so the context is terminated only after its last socket has been closed.
///
/// Sockets made by a context have linger 0 unless set otherwise (`ZMQ_BLOCKY` is off): closing a
/// socket never blocks the process on a peer that has gone away. Set ``SocketOption/linger`` on a
/// socket whose last messages must be flushed before it closes.
public final class Context: @unchecked Sendable {
    // Invariant for @unchecked Sendable: libzmq documents contexts as thread-safe, `handle` never
    // changes after init, and zmq_ctx_term runs only in deinit, when no socket refers to it any more.
    let handle: UnsafeMutableRawPointer
    /// The context's ZAP handler, while anyone uses it (see ``ZAPHandler/shared(for:)``).
    let zapHandler = Mutex(ZAPHandlerSlot())

    /// Creates a context.
    ///
    /// - Parameters:
    ///   - ioThreads: Background I/O threads. One moves about a gigabyte a second; raise it only for
    ///     more traffic than that.
    ///   - maxSockets: The most sockets the context may have open, or `nil` for libzmq's default (1023).
    ///   - ioThreadScheduling: How Linux schedules the I/O threads (``IOThreadScheduling``).
    /// - Throws: ``ZMQError`` when libzmq cannot create the context or rejects an option.
    public init(ioThreads: Int = 1, maxSockets: Int? = nil, ioThreadScheduling: IOThreadScheduling = .normal) throws(ZMQError) {
        guard let handle = zmq_ctx_new() else { throw ZMQError.last("zmq_ctx_new()") }
        self.handle = handle
        try set(ZMQ_IO_THREADS, Int32(ioThreads), "ZMQ_IO_THREADS")
        if let maxSockets { try set(ZMQ_MAX_SOCKETS, Int32(maxSockets), "ZMQ_MAX_SOCKETS") }
        try set(ZMQ_BLOCKY, 0, "ZMQ_BLOCKY")
        if ioThreadScheduling == .batch { try set(ZMQ_THREAD_SCHED_POLICY, Self.schedBatch, "ZMQ_THREAD_SCHED_POLICY") }
    }

    deinit {
        if !terminated.load(ordering: .acquiring) {
            while zmq_ctx_term(handle) == -1 && zmq_errno() == EINTR {}
        }
    }

    private let terminated = Atomic(false)

    /// Linux's `SCHED_BATCH` (sched.h declares it only for _GNU_SOURCE, which Swift's Glibc lacks).
    private static let schedBatch: Int32 = 3

    /// Terminates the context now, waiting until every socket's queued messages are sent (up to each
    /// socket's linger), so that a process can exit knowing its last messages left.
    ///
    /// Every socket of the context must be closed first, or this waits for them.
    public func terminate() {
        guard !terminated.exchange(true, ordering: .acquiringAndReleasing) else { return }
        while zmq_ctx_term(handle) == -1 && zmq_errno() == EINTR {}
    }

    private func set(_ option: Int32, _ value: Int32, _ name: String) throws(ZMQError) {
        try zmqCall("zmq_ctx_set(\(name), \(value))") { zmq_ctx_set(handle, option, value) }
    }

    /// Makes every blocking call on this context's sockets, now and later, fail with
    /// ``ZMQError/Code/contextTerminated``. Sockets must still be closed by their owners.
    public func shutdown() {
        zmq_ctx_shutdown(handle)
    }

    /// Opens a socket of the given type.
    ///
    /// - Throws: ``ZMQError`` (``ZMQError/Code/contextTerminated`` after ``shutdown()``,
    ///   ``ZMQError/Code/tooManyOpenFiles`` past the socket limit).
    public func socket(_ type: SocketType) throws(ZMQError) -> Socket {
        try Socket(context: self, type: type)
    }
}

/// Facts about the libzmq this process runs with.
public enum ZeroMQLibrary {
    /// The libzmq version, e.g. (4, 3, 4).
    public static var version: (major: Int, minor: Int, patch: Int) {
        var major: Int32 = 0, minor: Int32 = 0, patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return (Int(major), Int(minor), Int(patch))
    }

    /// Whether libzmq was built with a capability: "curve", "ipc", "pgm", "tipc", "norm", "gssapi", "draft".
    public static func has(_ capability: String) -> Bool {
        zmq_has(capability) == 1
    }
}

/// How Linux schedules a context's I/O threads.
public enum IOThreadScheduling: Sendable {
    /// As every other thread (`SCHED_OTHER`).
    case normal
    /// `SCHED_BATCH`: an I/O thread woken by a socket's owner does not preempt it, but runs when
    /// the owner waits or its time slice ends. For a process whose one busy thread forwards
    /// messages (a broker): otherwise each message the owner sends wakes the I/O thread, which,
    /// sharing its CPU, takes over for one message and sleeps again, two task switches a message;
    /// batched, it sends what queued meanwhile at once. (`handoff-bench broker-capacity`, broker on
    /// one CPU: 6.0 against 3.6 µs of CPU per message.) When the owner is idle the I/O thread runs
    /// at once, as before.
    case batch
}
