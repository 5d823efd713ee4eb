import Dispatch
import Foundation
import Synchronization

/// A ZAP handler (ZeroMQ RFC 27): the one place a context asks whether a peer may connect.
///
/// Without a ZAP handler, a CURVE server accepts every client that knows the server's public key.
/// With one bound in the context, libzmq asks it about every handshake on every socket of that
/// context that has a ZAP domain (``SocketOption/zapDomain``) or uses CURVE, and refuses the peer
/// at the handshake unless the handler answers "200".
///
/// A context has at most one handler (it owns `inproc://zeromq.zap.01`), so ``shared(for:)`` gives
/// every user of a context the same one; each registers a ``Policy`` for its own ZAP domain. A
/// request for a domain with no policy is refused. The handler runs on a thread of its own, so it
/// answers even while the sockets' owners are busy; it stops when the last reference to it goes
/// away, or when the context is terminated.
///
/// ```swift
/// let zap = try ZAPHandler.shared(for: context)
/// zap.setPolicy(forDomain: "accounts") { request in
///     allowed.contains(request.publicKey!) ? .allow(userID: request.publicKey!.z85) : .deny("unknown key")
/// }
/// try server.set(.zapDomain, "accounts")
/// ```
public final class ZAPHandler: Sendable {
    /// Where libzmq sends its requests, in every context.
    public static let endpoint = "inproc://zeromq.zap.01"

    /// One handshake to decide.
    public struct Request: Sendable, Hashable {
        /// The ZAP domain of the socket the peer connects to.
        public var domain: String
        /// The peer's address, e.g. `127.0.0.1`.
        public var address: String
        /// The mechanism: `NULL`, `PLAIN` or `CURVE`.
        public var mechanism: String
        /// The client's long-term public key (CURVE only).
        public var publicKey: CurveKey?
    }

    /// The answer to a ``Request``.
    public enum Verdict: Sendable, Hashable {
        /// Let the peer in; `userID` becomes the "User-Id" property of every frame it sends.
        case allow(userID: String)
        /// Refuse the handshake, saying why (the peer sees an authentication failure).
        case deny(String)
    }

    /// Decides a request. Runs on the handler's thread: keep it quick and do not block.
    public typealias Policy = @Sendable (Request) -> Verdict

    /// What the handler decided since it started.
    public struct Counters: Sendable, Hashable {
        /// Handshakes allowed.
        public var allowed = 0
        /// Handshakes refused (by a policy, or for a domain without one).
        public var refused = 0
        /// Requests that were not valid ZAP 1.0 (answered "500"; should never happen).
        public var malformed = 0

        public init() {}
    }

    private let context: Context
    private let controlEndpoint: String
    private let state: State

    /// The context's handler, started on first use.
    ///
    /// - Throws: ``ZMQError`` when the handler's sockets cannot be made (e.g. the context was terminated).
    public static func shared(for context: Context) throws(ZMQError) -> ZAPHandler {
        try context.zapHandler.withLock { (slot) throws(ZMQError) -> ZAPHandler in
            if let handler = slot.handler { return handler }
            let handler = try ZAPHandler(context: context)
            slot.handler = handler
            return handler
        }
    }

    private init(context: Context) throws(ZMQError) {
        self.context = context
        controlEndpoint = "inproc://handoff-zap-control-\(UUID().uuidString)"
        state = State()
        let ready = DispatchSemaphore(value: 0)
        let startup = Mutex<ZMQError?>(nil)
        let state = self.state
        let controlEndpoint = self.controlEndpoint
        state.exited.enter()
        let thread = Thread {
            defer { state.exited.leave() }
            let server: Socket
            let control: Socket
            do throws(ZMQError) {
                server = try context.socket(.rep)
                try server.set(.linger, 0)
                try server.bind(Self.endpoint)
                control = try context.socket(.pair)
                try control.set(.linger, 0)
                try control.bind(controlEndpoint)
            } catch {
                startup.withLock { $0 = error }
                ready.signal()
                return
            }
            ready.signal()
            Self.serve(server, control: control, state: state)
            // Unbind first: an inproc endpoint is released at once by zmq_unbind, but only later (on
            // libzmq's reaper thread) by zmq_close, and a handler started next must bind it again.
            try? server.unbind(Self.endpoint)
            server.close()
            control.close()
        }
        thread.name = "handoff-zap"
        thread.start()
        ready.wait()
        if let error = startup.withLock({ $0 }) {
            state.exited.wait()
            throw error
        }
    }

    deinit {
        // Tell the thread to stop, over a PAIR made and closed right here, and wait for it.
        if let control = try? context.socket(.pair) {
            try? control.set(.linger, 1_000)
            if (try? control.connect(controlEndpoint)) != nil {
                _ = try? control.trySend(Array("STOP".utf8))
            }
            control.close()
        }
        state.exited.wait()
    }

    /// Sets (or replaces) the policy for `domain`.
    public func setPolicy(forDomain domain: String, _ policy: @escaping Policy) {
        state.policies.withLock { $0[domain] = policy }
    }

    /// Removes the policy for `domain`: its handshakes are refused from now on.
    public func removePolicy(forDomain domain: String) {
        state.policies.withLock { $0[domain] = nil }
    }

    /// Counters over every domain.
    public var counters: Counters {
        state.counters.withLock { $0.values.reduce(into: Counters()) { total, each in
            total.allowed += each.allowed
            total.refused += each.refused
            total.malformed += each.malformed
        } }
    }

    /// Counters of one domain.
    public func counters(forDomain domain: String) -> Counters {
        state.counters.withLock { $0[domain] ?? Counters() }
    }

    // MARK: The thread

    private final class State: Sendable {
        let policies = Mutex<[String: Policy]>([:])
        let counters = Mutex<[String: Counters]>([:])
        let exited = DispatchGroup()
    }

    private static func serve(_ server: Socket, control: Socket, state: State) {
        var poller = Poller()
        let serverIndex = poller.add(server, .readable)
        let controlIndex = poller.add(control, .readable)
        while true {
            guard let ready = try? poller.poll() else { return }  // context terminated
            if ready[controlIndex].contains(.readable) { return }
            guard ready[serverIndex].contains(.readable) else { continue }
            while let frames = try? receiveRequest(server) {
                let reply = answer(frames, state: state)
                do {
                    try server.send(multipart: reply.map { Array($0.utf8) as [UInt8] } as [any ContiguousBytes])
                } catch {
                    return
                }
            }
        }
    }

    /// One whole request, or `nil` when none is waiting.
    private static func receiveRequest(_ server: Socket) throws(ZMQError) -> [Frame]? {
        guard let first = try server.tryReceive() else { return nil }
        var frames = [first]
        while frames.last!.hasMore { frames.append(try server.receive()) }
        return frames
    }

    /// The reply frames (version, request id, status code, status text, user id, metadata).
    private static func answer(_ frames: [Frame], state: State) -> [String] {
        // version, request id, domain, address, routing id, mechanism, credentials...
        guard frames.count >= 6, frames[0].string == "1.0" else {
            state.counters.withLock { $0["", default: Counters()].malformed += 1 }
            return ["1.0", frames.count > 1 ? frames[1].string ?? "" : "", "500", "malformed ZAP request", "", ""]
        }
        let requestID = frames[1].string ?? ""
        let mechanism = frames[5].string ?? ""
        var publicKey: CurveKey?
        if mechanism == "CURVE", frames.count >= 7 {
            publicKey = try? CurveKey(bytes: frames[6].bytes)
        }
        let request = Request(
            domain: frames[2].string ?? "", address: frames[3].string ?? "",
            mechanism: mechanism, publicKey: publicKey)
        let policy = state.policies.withLock { $0[request.domain] }
        let verdict = policy?(request) ?? .deny("no policy for ZAP domain \"\(request.domain)\"")
        switch verdict {
        case .allow(let userID):
            state.counters.withLock { $0[request.domain, default: Counters()].allowed += 1 }
            return ["1.0", requestID, "200", "OK", userID, ""]
        case .deny(let reason):
            state.counters.withLock { $0[request.domain, default: Counters()].refused += 1 }
            return ["1.0", requestID, "400", reason, "", ""]
        }
    }
}

/// The slot a context keeps its ZAP handler in: weak, so the handler stops when its last user
/// lets go of it.
final class ZAPHandlerSlot {
    weak var handler: ZAPHandler?
}
