import CZeroMQ
import Foundation

// Suspending sends and receives: a task waits for the socket's readiness instead of blocking a thread.
extension Socket {
    /// Suspends the task until the socket is ready for one of `events`.
    ///
    /// Follows libzmq's rule for the edge-triggered `ZMQ_FD`: re-read `ZMQ_EVENTS` after every
    /// wake-up, and wait again only when it shows nothing.
    ///
    /// - Parameter timeout: How long to wait at most; `nil` waits until ready.
    /// - Returns: The events the socket is ready for; empty when the timeout passed first.
    /// - Throws: ``ZMQError`` with `notASocket` when the socket is closed meanwhile;
    ///   `CancellationError` when the task is cancelled.
    nonisolated(nonsending)
    public func waitUntilReady(for events: PollEvents, timeout: Duration? = nil) async throws -> PollEvents {
        let limit = timeout.map(deadline(after:))
        while true {
            switch try await waitOnce(for: events, deadline: limit) {
            case .ready(let ready): return ready
            case .signalled: continue
            case .timedOut: return []
            }
        }
    }

    /// After a libzmq call (which processes pending commands and may drain `ZMQ_FD` without epoll
    /// seeing an edge), resumes the owner's other suspended tasks whose wait the socket now satisfies.
    /// Costs nothing when no other task waits.
    ///
    /// Called once per message, not per frame: after the last frame of a message (sent or
    /// received), and after any call that did not complete. Between the frames of one message the
    /// owner runs on without suspending (the rest of a received message is already there; a send of
    /// the next frame follows at once), so the check at the message's end covers what every frame's
    /// call processed, for a reading (a `poll` and a `getpid` in libzmq) per message instead of per
    /// frame.
    func wakeOtherWaiters() {
        guard suspendedWaits > 0, !isClosed else { return }
        _ = try? pendingEvents()
    }

    /// ``wakeOtherWaiters()`` after a send: skipped after a frame with more to follow, which the
    /// message's next frame checks for; and, on a socket that ``coalescesReadingsAfterSends``,
    /// done after a whole message at most once per ``sendReadingInterval``, with a recheck of the
    /// waiters asked for otherwise.
    ///
    /// A send processes libzmq's pending commands at most once per about a millisecond (libzmq
    /// throttles it by the CPU's cycle counter, `max_command_delay`), so nearly every reading after
    /// a send found the edge where it was; yet each reading is a `poll` and a `getpid`, and a
    /// node's publisher always has a waiter beside its sends (the task that reads subscriptions):
    /// on `handoff-bench adverts` that was two system calls per advertisement. Coalesced, a send
    /// reads at most once per interval; a send within the interval asks the watcher to resume the
    /// socket's waiters when the interval is up (once for all such sends), and each waiter,
    /// resumed, tries its own call again, which processes whatever a send left. So a waiter whose
    /// edge a send consumed wakes at most one interval late. (On every socket, continuation
    /// sockets too, it made a continue between two processes slower on the 2-core VM, 1.25-1.3x
    /// raw to as much as 1.5-1.7x in some runs: there a waiter waits for the reply to what was just
    /// sent, and the readings are kept.)
    func wakeOtherWaiters(afterSending sent: Bool, flags: Int32) {
        if sent && flags & ZMQ_SNDMORE != 0 { return }
        guard sent, coalescesReadingsAfterSends, suspendedWaits > 0, !isClosed, let readinessID else { return wakeOtherWaiters() }
        let now = monotonicNanoseconds()
        if now &- lastSendReading >= Self.sendReadingInterval {
            lastSendReading = now
            _ = try? pendingEvents()
        } else if recheckDue <= now {
            // Not already asked for since the last reading (a recheck asked for covers every send
            // before it is due).
            recheckDue = lastSendReading &+ Self.sendReadingInterval
            ReadinessWatcher.shared.recheck(readinessID, at: recheckDue)
        }
    }

    /// How often a sending owner reads `ZMQ_EVENTS` for its other waiters at most (nanoseconds):
    /// 10 ms, the most a coalescing socket's waiter may wake late. At 1 ms, the recheck's timed
    /// wake-up, once a millisecond on a node that continues activities back to back (each publishes
    /// its `continued` event), seemed to cost a continue between two processes about 2 % on the
    /// 2-core VM (1.28 to 1.30x raw, twelve alternated pairs).
    static let sendReadingInterval: UInt64 = 10_000_000

    /// The socket's registration with the readiness watcher, made on first use.
    private func readinessRegistration() throws(ZMQError) -> UInt64 {
        if let readinessID { return readinessID }
        let registration = ReadinessWatcher.shared.register(fd: try get(.fileDescriptor))
        readinessID = registration
        return registration
    }

    /// What one wait for readiness ended with.
    private enum WaitOutcome {
        /// `ZMQ_EVENTS` already showed these, without waiting.
        case ready(PollEvents)
        /// The watcher signalled the socket; `ZMQ_EVENTS` not read again.
        case signalled
        case timedOut
    }

    /// One wait for `events`: at once when `ZMQ_EVENTS` shows one, else after the next signal,
    /// without reading `ZMQ_EVENTS` again: ``waitUntilReady(for:timeout:)`` reads it on its next
    /// round, so no edge is ever slept through. (Receives do not come here: see
    /// ``receiveOrWait(deadline:_:)``.)
    nonisolated(nonsending)
    private func waitOnce(for events: PollEvents, deadline limit: UInt64?) async throws -> WaitOutcome {
        let watcher = ReadinessWatcher.shared
        let registration = try readinessRegistration()
        let generation = watcher.generation(of: registration)
        let ready = try pendingEvents().intersection(events)
        if !ready.isEmpty { return .ready(ready) }
        return try await suspend(registration, after: generation, deadline: limit, interest: events) ? .signalled : .timedOut
    }

    /// Suspends the task until the watcher signals the registration after `generation` (`true`) or
    /// `deadline` passes (`false`), counted in ``suspendedWaits`` meanwhile.
    ///
    /// - Throws: `CancellationError` when the task is cancelled; ``ZMQError`` with `notASocket` when
    ///   the socket is closed meanwhile.
    nonisolated(nonsending)
    private func suspend(_ registration: UInt64, after generation: UInt64, deadline limit: UInt64?, interest: PollEvents) async throws -> Bool {
        suspendedWaits += 1
        let outcome = await ReadinessWatcher.shared.wait(registration, after: generation, deadline: limit, interest: interest.rawValue)
        suspendedWaits -= 1
        switch outcome {
        case .signalled: return true
        case .timedOut: return false
        case .cancelled: throw CancellationError()
        case .unregistered: throw ZMQError(.notASocket, operation: "waiting on \(type) socket")
        }
    }

    /// Receives one frame, suspending the task (not the thread) until one arrives.
    nonisolated(nonsending)
    public func receive() async throws -> Frame {
        while true {
            if let message = try await receiveOrWait(deadline: nil, tryReceive) { return message }
        }
    }

    /// Receives the next whole message into `message`, replacing what it held, suspending the task
    /// (not the thread) until one arrives: the loop of a receiver that reads each message in place
    /// and lets it go (``ReceivedMessage/release()``) before the next, with nothing allocated.
    nonisolated(nonsending)
    public func receive(into message: ReceivedMessage) async throws {
        func attempt() throws(ZMQError) -> Void? { try tryReceive(into: message) ? () : nil }
        while true {
            if try await receiveOrWait(deadline: nil, attempt) != nil { return }
        }
    }

    /// Receives one frame, or `nil` when none arrives within `timeout`.
    nonisolated(nonsending)
    public func receive(timeout: Duration) async throws -> Frame? {
        let limit = deadline(after: timeout)
        while true {
            if let message = try await receiveOrWait(deadline: limit, tryReceive) { return message }
            // Past the deadline, one last look: a message that came in time is taken, though the
            // task its signal resumed ran late (a busy executor, a loaded pool or loop). Without it
            // a receive gave up on a message that was there (a one-loop pass, 2026-12-06).
            if limit <= monotonicNanoseconds() { return try tryReceive() }
        }
    }

    /// One try to receive, and when nothing is there, one wait for the next signal (or `deadline`).
    ///
    /// A non-blocking `zmq_msg_recv` that finds nothing has just processed every pending libzmq
    /// command (libzmq does so before it answers `EAGAIN`), which is all a `ZMQ_EVENTS` reading would
    /// do: so the wait uses the generation read before the try, with no `ZMQ_EVENTS` reading (a
    /// `poll` and a `getpid`) of its own. A command that arrives after the try signals `ZMQ_FD`,
    /// which bumps the generation, so none is slept through.
    nonisolated(nonsending)
    private func receiveOrWait<Received>(
        deadline limit: UInt64?, _ attempt: () throws(ZMQError) -> Received?
    ) async throws -> Received? {
        let registration = try readinessRegistration()
        let generation = ReadinessWatcher.shared.generation(of: registration)
        if let received = try attempt() { return received }
        _ = try await suspend(registration, after: generation, deadline: limit, interest: .readable)
        return nil
    }

    /// Receives every frame of the next multipart message, suspending the task as needed.
    nonisolated(nonsending)
    public func receiveMultipart() async throws -> [Frame] {
        var frames = [try await receive()]
        while frames.last!.hasMore { frames.append(try await receive()) }
        return frames
    }

    /// Receives the next multipart message if it has at most `maxFrames` frames; a longer one is
    /// read to its end and dropped frame by frame, so that no peer can make the receiver hold an
    /// endless message (libzmq's high-water mark counts whole messages, not frames).
    ///
    /// - Returns: The frames, or `nil` when the message had more than `maxFrames`.
    nonisolated(nonsending)
    public func receiveMultipart(maxFrames: Int) async throws -> [Frame]? {
        var frames = [try await receive()]
        while frames.last!.hasMore {
            let next = try await receive()
            guard frames.count < maxFrames else {
                var more = next.hasMore
                frames.removeAll()
                while more { more = try await receive().hasMore }
                return nil
            }
            frames.append(next)
        }
        return frames
    }

    /// Sends one frame, suspending the task while the socket cannot take it (high-water mark).
    nonisolated(nonsending)
    public func send(_ bytes: some ContiguousBytes, more: Bool = false) async throws {
        while try !trySend(bytes, more: more) {
            _ = try await waitUntilReady(for: .writable)
        }
    }

    /// Sends a frame without copying, suspending the task while the socket cannot take it.
    nonisolated(nonsending)
    public func send(_ message: Frame, more: Bool = false) async throws {
        while try !trySend(message, more: more) {
            _ = try await waitUntilReady(for: .writable)
        }
    }

    /// Sends every frame of a multipart message, suspending the task as needed.
    nonisolated(nonsending)
    public func send(multipart frames: [any ContiguousBytes]) async throws {
        for (index, frame) in frames.enumerated() {
            try await send(frame, more: index < frames.count - 1)
        }
    }

    /// Sends every frame of a multipart message without copying, suspending the task as needed.
    nonisolated(nonsending)
    public func send(multipart frames: [Frame]) async throws {
        for (index, frame) in frames.enumerated() {
            try await send(frame, more: index < frames.count - 1)
        }
    }
}
