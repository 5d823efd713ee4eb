import HandoffWire

/// Why something in Handoff did not work: a code to branch on and a message to show.
///
/// The first four codes are Apple's `NSUserActivity` errors, with their numbers in
/// ``Code/appleErrorCode``; the rest say more precisely what went wrong. On the wire, the code
/// travels as ``HandoffWire/WireErrorCode``, so an error raised by a remote node arrives intact.
public struct HandoffError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Open-ended: a newer peer may send a code this build does not name.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// The handoff failed for a reason not covered below (`NSUserActivityHandoffFailedError`).
        public static let handoffFailed = Code(wire: .handoffFailed)
        /// The originating node cannot be reached (`NSUserActivityConnectionUnavailableError`).
        public static let connectionUnavailable = Code(wire: .connectionUnavailable)
        /// The originating node did not answer in time (`NSUserActivityRemoteApplicationTimedOutError`).
        public static let remoteApplicationTimedOut = Code(wire: .remoteApplicationTimedOut)
        /// `userInfo` is over the size limit (`NSUserActivityHandoffUserInfoTooLargeError`).
        public static let userInfoTooLarge = Code(wire: .userInfoTooLarge)
        /// No current activity has that id (never advertised, resigned, or its node forgot it).
        public static let activityNotFound = Code(wire: .activityNotFound)
        /// The activity was invalidated by its originator.
        public static let activityInvalidated = Code(wire: .activityInvalidated)
        /// The activity's expiration date has passed.
        public static let activityExpired = Code(wire: .activityExpired)
        /// This node has no continuation handler for the activity's type, and it has no webpage URL.
        public static let noHandler = Code(wire: .noHandler)
        /// A key named in `requiredUserInfoKeys` has no value in `userInfo`.
        public static let missingRequiredUserInfoKey = Code(wire: .missingRequiredUserInfoKey)
        /// The activity type is not a reverse-DNS name.
        public static let invalidActivityType = Code(wire: .invalidActivityType)
        /// The activity may be continued once, and it already was.
        public static let alreadyContinued = Code(wire: .alreadyContinued)
        /// A peer sent bytes that are not a valid message.
        public static let malformedMessage = Code(wire: .malformedMessage)
        /// A peer speaks a protocol version this node does not.
        public static let unsupportedProtocolVersion = Code(wire: .unsupportedProtocolVersion)
        /// A message, or what it would carry, is over a size limit of the contract (``WireLimits``).
        public static let messageTooLarge = Code(wire: .messageTooLarge)
        /// The activity does not support continuation streams.
        public static let streamsNotSupported = Code(wire: .streamsNotSupported)
        /// The continuation stream was cancelled, here or by the peer.
        public static let streamCancelled = Code(wire: .streamCancelled)
        /// The stream's bytes do not match the checksum its writer sent: it was corrupted.
        public static let streamChecksumMismatch = Code(wire: .streamChecksumMismatch)
        /// The stream ended with fewer (or more) bytes than its writer sent.
        public static let streamTruncated = Code(wire: .streamTruncated)
        /// The peer broke a stream's rules: more chunks than the credit it was granted, a chunk
        /// larger than agreed, a gap in the offsets, or data on a direction the open excluded.
        public static let streamProtocolViolation = Code(wire: .streamProtocolViolation)
        /// The node already has as many open streams as it allows, in total or with that peer.
        public static let tooManyStreams = Code(wire: .tooManyStreams)
        /// A document activity's document cannot be taken: the local copy changed since it was
        /// taken, or is newer; or the originator's file no longer has the advertised hash.
        public static let documentConflict = Code(wire: .documentConflict)
        /// The peer of a stream went silent or disconnected: its process died or the network failed.
        public static let peerLost = Code(wire: .peerLost)
        /// A peer or key is not part of this node's account (not on its allow-list), or a peer
        /// refused this node's key at the CURVE handshake.
        public static let unauthorized = Code(wire: .unauthorized)
        /// The activity's team id is not one this node hands to the handler (or plugin) of that type.
        public static let teamMismatch = Code(wire: .teamMismatch)
        /// A message was seen before, or is too old to be believed.
        public static let replayedMessage = Code(wire: .replayedMessage)
        /// The node is not running (start it with ``Node/run()``), or is shutting down.
        public static let notRunning = Code(rawValue: 1000)
        /// The continuing side declined in its will-continue callback.
        public static let declined = Code(rawValue: 1001)
        /// The activity was invalidated here, and cannot become current again.
        public static let invalidatedLocally = Code(rawValue: 1002)
        /// A configuration value is unusable.
        public static let invalidConfiguration = Code(rawValue: 1003)
        /// A plugin file was refused: not a plugin, a wrong ABI, a broken descriptor, a type or name
        /// another plugin already has, or its init failed. ``HandoffError/details`` has its `file`
        /// and the `reason`.
        public static let pluginRefused = Code(rawValue: 1004)
        /// A call into a plugin returned a failure. ``HandoffError/details`` has the `plugin` and
        /// the `status` it returned (`HANDOFF_*`).
        public static let pluginFailed = Code(rawValue: 1005)

        init(wire: WireErrorCode) { rawValue = wire.rawValue }

        /// The code as it travels on the wire: one error.proto declares, else (a local code, 1000
        /// and up) `ERROR_CODE_HANDOFF_FAILED`, as a receiver would read it anyway.
        var wire: WireErrorCode { Self.declared(rawValue) ?? .handoffFailed }

        /// `rawValue` as an `ErrorCode` error.proto declares, or `nil` (swift-protobuf makes any
        /// other number `UNRECOGNIZED`).
        static func declared(_ rawValue: Int) -> WireErrorCode? {
            guard let code = WireErrorCode(rawValue: rawValue) else { return nil }
            if case .UNRECOGNIZED = code { return nil }
            return code
        }

        /// The matching `NSUserActivity` error number (4608–4611) for Apple's four, else `nil`.
        public var appleErrorCode: Int? {
            switch self {
            case .handoffFailed: 4608
            case .connectionUnavailable: 4609
            case .remoteApplicationTimedOut: 4610
            case .userInfoTooLarge: 4611
            default: nil
            }
        }

        public var description: String {
            switch self {
            case .handoffFailed: "handoff failed"
            case .connectionUnavailable: "connection unavailable"
            case .remoteApplicationTimedOut: "remote application timed out"
            case .userInfoTooLarge: "userInfo too large"
            case .activityNotFound: "activity not found"
            case .activityInvalidated: "activity invalidated"
            case .activityExpired: "activity expired"
            case .noHandler: "no handler"
            case .missingRequiredUserInfoKey: "missing required userInfo key"
            case .invalidActivityType: "invalid activity type"
            case .alreadyContinued: "already continued"
            case .malformedMessage: "malformed message"
            case .unsupportedProtocolVersion: "unsupported protocol version"
            case .streamsNotSupported: "streams not supported"
            case .streamCancelled: "stream cancelled"
            case .streamChecksumMismatch: "stream checksum mismatch"
            case .streamTruncated: "stream truncated"
            case .streamProtocolViolation: "stream protocol violation"
            case .tooManyStreams: "too many streams"
            case .documentConflict: "document conflict"
            case .peerLost: "peer lost"
            case .unauthorized: "unauthorized"
            case .teamMismatch: "team mismatch"
            case .replayedMessage: "replayed message"
            case .notRunning: "node not running"
            case .declined: "declined"
            case .invalidatedLocally: "invalidated"
            case .invalidConfiguration: "invalid configuration"
            case .pluginRefused: "plugin refused"
            case .pluginFailed: "plugin failed"
            default: "error \(rawValue)"
            }
        }
    }

    /// What kind of failure this is.
    public let code: Code
    /// What went wrong and, where it helps, what to do about it.
    public let message: String
    /// The activity type concerned, when there is one.
    public let activityType: String?
    /// What a program may want besides the message, by name: a plugin error's `file`, `reason`,
    /// `plugin` and `status`; an error from a peer's ``HandoffWire/WireError/details``.
    public let details: [String: String]
    /// The error underneath, when this one reports another (a continuation handler's own error,
    /// say), for code that wants its type and not only its text. Not compared, not hashed, and
    /// never sent to a peer.
    public let cause: (any Error)?

    public init(_ code: Code, _ message: String, activityType: String? = nil, details: [String: String] = [:], cause: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.activityType = activityType
        self.details = details
        self.cause = cause
    }

    /// A plugin file refused, for `reason`: the message names the file.
    public static func pluginRefused(file: String, reason: String, cause: (any Error)? = nil) -> HandoffError {
        HandoffError(.pluginRefused, "\(file): \(reason)", details: ["file": file, "reason": reason], cause: cause)
    }

    /// A call into `plugin` that returned `status` (not `HANDOFF_OK`) and `message` (maybe empty).
    public static func pluginFailed(plugin: String, status: Int32, message: String) -> HandoffError {
        HandoffError(
            .pluginFailed, "plugin \(plugin): \(message.isEmpty ? "failed with status \(status)" : message)",
            details: ["plugin": plugin, "status": "\(status)"])
    }

    public static func == (lhs: HandoffError, rhs: HandoffError) -> Bool {
        lhs.code == rhs.code && lhs.message == rhs.message && lhs.activityType == rhs.activityType && lhs.details == rhs.details
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
        hasher.combine(message)
        hasher.combine(activityType)
        hasher.combine(details)
    }

    public var description: String {
        if let activityType { "\(code) (\(activityType)): \(message)" } else { "\(code): \(message)" }
    }

    /// The error as sent to a peer.
    var wire: WireError {
        var error = WireError()
        error.code = code.wire
        error.message = message
        if let activityType { error.details["activity_type"] = activityType }
        return error
    }

    /// An error received from a peer (or from an agent over its control socket), its code,
    /// message and details as sent. A code this release does not know (a newer peer's) is read as
    /// ``Code/handoffFailed``, as error.proto says; its number stays in `details["code"]`.
    public init(wire: WireError, activityType: String? = nil) {
        var details = wire.details
        var code = Code(rawValue: wire.code.rawValue)
        if Code.declared(wire.code.rawValue) == nil {
            details["code"] = "\(wire.code.rawValue)"
            code = .handoffFailed
        }
        self.init(code, wire.message, activityType: activityType ?? wire.details["activity_type"], details: details)
    }
}
