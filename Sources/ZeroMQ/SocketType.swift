import CZeroMQ

/// The kind of a ZeroMQ socket, which fixes its messaging pattern.
public struct SocketType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Publisher: sends to every matching subscriber, never receives.
    public static let pub = SocketType(rawValue: ZMQ_PUB)
    /// Subscriber: receives what matches its subscriptions.
    public static let sub = SocketType(rawValue: ZMQ_SUB)
    /// Extended publisher: also receives subscription messages (a proxy's backend).
    public static let xpub = SocketType(rawValue: ZMQ_XPUB)
    /// Extended subscriber: subscribes by sending messages (a proxy's frontend).
    public static let xsub = SocketType(rawValue: ZMQ_XSUB)
    /// Request: strict send, receive, send, receive.
    public static let req = SocketType(rawValue: ZMQ_REQ)
    /// Reply: strict receive, send, receive, send.
    public static let rep = SocketType(rawValue: ZMQ_REP)
    /// Asynchronous request: load-balances outgoing, fair-queues incoming, any order.
    public static let dealer = SocketType(rawValue: ZMQ_DEALER)
    /// Asynchronous reply: prefixes each incoming message with the sender's routing id.
    public static let router = SocketType(rawValue: ZMQ_ROUTER)
    /// Exclusive pair of two sockets.
    public static let pair = SocketType(rawValue: ZMQ_PAIR)
    /// Pipeline producer.
    public static let push = SocketType(rawValue: ZMQ_PUSH)
    /// Pipeline consumer.
    public static let pull = SocketType(rawValue: ZMQ_PULL)
    /// Raw TCP.
    public static let stream = SocketType(rawValue: ZMQ_STREAM)

    public var description: String {
        switch self {
        case .pub: "PUB"
        case .sub: "SUB"
        case .xpub: "XPUB"
        case .xsub: "XSUB"
        case .req: "REQ"
        case .rep: "REP"
        case .dealer: "DEALER"
        case .router: "ROUTER"
        case .pair: "PAIR"
        case .push: "PUSH"
        case .pull: "PULL"
        case .stream: "STREAM"
        default: "socket type \(rawValue)"
        }
    }
}
