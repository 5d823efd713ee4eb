import CZeroMQ

/// Runs libzmq's built-in proxy between two sockets on the calling thread.
///
/// Typical uses: XSUB ⇄ XPUB (a pub/sub broker), ROUTER ⇄ DEALER (a request broker). Every
/// message either way is also copied to `capture`, when given. The proxy returns when `control`
/// receives `TERMINATE`, or with `contextTerminated` when the context shuts down.
///
/// The calling thread must own all of the sockets.
///
/// - Parameters:
///   - frontend: The socket clients connect to.
///   - backend: The socket services connect to.
///   - capture: Receives a copy of every message (a PUB, PUSH, DEALER or PAIR socket).
///   - control: Accepts `PAUSE`, `RESUME`, `TERMINATE` and `STATISTICS` commands.
/// - Throws: ``ZMQError``; `contextTerminated` is the normal end without a control socket.
public func proxy(frontend: Socket, backend: Socket, capture: Socket? = nil, control: Socket? = nil) throws(ZMQError) {
    let front = try frontend.open("zmq_proxy_steerable")
    let back = try backend.open("zmq_proxy_steerable")
    let captureHandle = try capture?.open("zmq_proxy_steerable")
    let controlHandle = try control?.open("zmq_proxy_steerable")
    try zmqCall("zmq_proxy_steerable(\(frontend.type) ⇄ \(backend.type))") {
        zmq_proxy_steerable(front, back, captureHandle, controlHandle)
    }
}
