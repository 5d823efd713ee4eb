import CZeroMQ

/// Waits on several sockets (and plain file descriptors) at once with `zmq_poll`, blocking the thread.
///
/// For an event loop on a thread that owns every socket it polls. Level-triggered: a socket that
/// stays readable is reported on every poll.
///
/// ```swift
/// var poller = Poller()
/// let commands = poller.add(control, .readable)
/// let data = poller.add(subscriber, .readable)
/// let ready = try poller.poll(timeout: .milliseconds(100))
/// if ready[data].contains(.readable) { ... }
/// ```
public struct Poller {
    private var sockets: [Socket?] = []
    private var items: [zmq_pollitem_t] = []

    public init() {}

    /// Adds a socket and the events to wait for; returns its index in ``poll(timeout:)``'s result.
    @discardableResult
    public mutating func add(_ socket: Socket, _ events: PollEvents) -> Int {
        sockets.append(socket)
        items.append(zmq_pollitem_t(socket: nil, fd: -1, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Adds a plain file descriptor (a pipe, a TCP socket) and the events to wait for.
    @discardableResult
    public mutating func add(fileDescriptor: Int32, _ events: PollEvents) -> Int {
        sockets.append(nil)
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: events.rawValue, revents: 0))
        return items.count - 1
    }

    /// Changes the events waited for at an index.
    public mutating func update(_ index: Int, _ events: PollEvents) {
        items[index].events = events.rawValue
    }

    /// Blocks until at least one item is ready, or `timeout` passes.
    ///
    /// - Parameter timeout: How long to wait at most; `nil` waits without limit, `.zero` just looks.
    /// - Returns: The ready events of every item, in the order they were added; all empty on timeout.
    /// - Throws: ``ZMQError`` — `notASocket` when a socket was closed, `contextTerminated`.
    public mutating func poll(timeout: Duration? = nil) throws(ZMQError) -> [PollEvents] {
        for index in items.indices {
            if let socket = sockets[index] {
                items[index].socket = try socket.open("zmq_poll")
            }
            items[index].revents = 0
        }
        let milliseconds: Int = timeout.map { duration in
            let (seconds, attoseconds) = duration.components
            return Int(seconds) * 1000 + Int((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        } ?? -1
        let count = items.count
        try items.withUnsafeMutableBufferPointer { (buffer) throws(ZMQError) in
            _ = try zmqCall("zmq_poll(\(count) items)") { zmq_poll(buffer.baseAddress, Int32(count), milliseconds) }
        }
        // A socket polled for reading and not readable had every whole message read: an empty receive.
        for index in items.indices where items[index].events & Int16(ZMQ_POLLIN) != 0 && items[index].revents & Int16(ZMQ_POLLIN) == 0 {
            sockets[index]?.emptyReceives &+= 1
        }
        return items.map { PollEvents(rawValue: $0.revents) }
    }
}
