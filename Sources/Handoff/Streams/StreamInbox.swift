import DequeModule
import Synchronization

/// What arrives on one direction of a stream, queued for the one task that reads it: the node
/// yields (a chunk, the end, a failure) and finishes; the reader takes them in order.
///
/// It replaces an `AsyncStream<StreamEvent>`, which did the same through the standard library's
/// generic code: unspecialized across the module boundary, every chunk's yield and next looked up
/// generic metadata and removed from a generic deque (11 % of a reading loop's samples over a
/// 2 GiB stream between processes, about 5 µs a chunk; docs/performance.md). This one is a
/// concrete type: a lock around a deque and the reader's continuation.
///
/// Bounded by the stream's credit: the writer sends at most a window of chunks beyond what the
/// reader took (``StreamPair/arrival(offset:count:)`` rejects more), and the end and a failure
/// come once each.
final class StreamInbox: Sendable {
    private struct State {
        var events = Deque<StreamEvent>()
        /// The reader, suspended until something arrives.
        var waiter: UnsafeContinuation<StreamEvent?, Never>?
        /// No more events are taken: the node finished the stream (what is queued is still read).
        var finished = false
        /// The reading task was cancelled: its reads end at once, queued events and all.
        var cancelled = false

        /// What a read finds: the first queued event, the end, or nothing yet.
        mutating func take() -> Taken {
            if cancelled { return .ended }
            if let event = events.popFirst() { return .event(event) }
            return finished ? .ended : .wait
        }
    }

    private enum Taken {
        case event(StreamEvent)
        case ended
        case wait
    }

    private let state = Mutex(State())

    /// Queues `event` for the reader, or hands it over to the reader waiting for it. After
    /// ``finish()``, or once the reader was cancelled, the event is dropped.
    func yield(_ event: StreamEvent) {
        let waiter = state.withLock { state -> UnsafeContinuation<StreamEvent?, Never>? in
            guard !state.finished, !state.cancelled else { return nil }
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.events.append(event)
            return nil
        }
        waiter?.resume(returning: event)
    }

    /// No more events: the reader reads what is queued, then its next read returns `nil`.
    func finish() {
        let waiter = state.withLock { state -> UnsafeContinuation<StreamEvent?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// The next event; `nil` once the stream finished and everything queued was read, or when
    /// the reading task is cancelled. One reader at a time.
    func next(isolation actor: isolated (any Actor)? = #isolation) async -> StreamEvent? {
        // A queued event is taken without suspending, and without a cancellation handler.
        switch state.withLock({ $0.take() }) {
        case .event(let event): return event
        case .ended: return nil
        case .wait: break
        }
        return await withTaskCancellationHandler {
            await withUnsafeContinuation(isolation: actor) { (continuation: UnsafeContinuation<StreamEvent?, Never>) in
                let taken = state.withLock { state -> Taken in
                    let taken = state.take()
                    if case .wait = taken { state.waiter = continuation }
                    return taken
                }
                switch taken {
                case .event(let event): continuation.resume(returning: event)
                case .ended: continuation.resume(returning: nil)
                case .wait: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> UnsafeContinuation<StreamEvent?, Never>? in
                state.cancelled = true
                state.events.removeAll()
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}
