import CZeroMQ
import Glibc

/// An error reported by libzmq, with the errno it set and the text `zmq_strerror` gives for it.
///
/// `code` is open-ended: libzmq may report any errno. The common ones have named constants.
public struct ZMQError: Error, Hashable, Sendable, CustomStringConvertible {
    /// An errno value as libzmq reports it.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// The operation would block (non-blocking call, or a send/receive timeout expired).
        public static let wouldBlock = Code(rawValue: EAGAIN)
        /// A blocking call was interrupted by a signal.
        public static let interrupted = Code(rawValue: EINTR)
        /// The context was terminated or shut down.
        public static let contextTerminated = Code(rawValue: CZMQ_ETERM)
        /// The socket is closed, or the handle is not a socket.
        public static let notASocket = Code(rawValue: ENOTSOCK)
        /// The operation is not valid in the socket's current state (e.g. REQ sending twice).
        public static let invalidState = Code(rawValue: CZMQ_EFSM)
        /// An invalid argument: a malformed endpoint, a bad option value.
        public static let invalidArgument = Code(rawValue: EINVAL)
        /// The endpoint's transport is not supported.
        public static let protocolNotSupported = Code(rawValue: EPROTONOSUPPORT)
        /// The address is already in use.
        public static let addressInUse = Code(rawValue: EADDRINUSE)
        /// The address is not local to this machine.
        public static let addressNotAvailable = Code(rawValue: EADDRNOTAVAIL)
        /// No such endpoint (unbind/disconnect of something never bound/connected, unknown inproc name).
        public static let noSuchEndpoint = Code(rawValue: ENOENT)
        /// The peer cannot be reached (ROUTER with ROUTER_MANDATORY and an unknown routing id).
        public static let hostUnreachable = Code(rawValue: EHOSTUNREACH)
        /// The socket type does not support this operation.
        public static let notSupported = Code(rawValue: ENOTSUP)
        /// No I/O thread is available.
        public static let noThread = Code(rawValue: CZMQ_EMTHREAD)
        /// The transport protocol is not compatible with the socket type.
        public static let incompatibleProtocol = Code(rawValue: CZMQ_ENOCOMPATPROTO)
        /// Too many open files or sockets.
        public static let tooManyOpenFiles = Code(rawValue: EMFILE)

        public var description: String { String(cString: zmq_strerror(rawValue)) }
    }

    /// What went wrong, as an errno value.
    public let code: Code
    /// The libzmq call that failed and what it was given, e.g. `zmq_bind("tcp://x:1")`.
    public let operation: String

    public init(_ code: Code, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// The text of `zmq_strerror` for this error.
    public var message: String { code.description }

    public var description: String {
        "\(operation) failed: \(message) (errno \(code.rawValue))"
    }

    /// The error libzmq reports for the calling thread right now.
    static func last(_ operation: @autoclosure () -> String) -> ZMQError {
        ZMQError(Code(rawValue: zmq_errno()), operation: operation())
    }
}

/// Runs one libzmq call that returns -1 on failure, retrying when a signal interrupted it.
///
/// Reads errno right after the call, before anything else can change it.
@inline(__always)
@discardableResult
func zmqCall(
    _ operation: @autoclosure () -> String,
    _ body: () -> Int32
) throws(ZMQError) -> Int32 {
    while true {
        let rc = body()
        if rc != -1 { return rc }
        let error = zmq_errno()
        if error == EINTR { continue }
        throw ZMQError(ZMQError.Code(rawValue: error), operation: operation())
    }
}
