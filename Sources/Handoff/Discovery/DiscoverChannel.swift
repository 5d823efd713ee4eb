import DequeModule
import Synchronization

/// One ``Node/discover(_:)`` stream's events on their way from the node, which yields them on its
/// loop, to the reader's task: a bounded queue of ``ActivityEvent``s with the reader's wait.
///
/// The stream handed out is still an `AsyncStream<ActivityEvent>` (the public API), made with
/// `AsyncStream(unfolding:)` over this channel. Why not `AsyncStream.makeStream`: its storage is
/// generic code compiled once in the Concurrency library, so every element costs runtime metadata
/// lookups and an unspecialized `removeFirst` of its waiting readers, about 7 % of the node's loop
/// thread in `handoff-bench adverts` (docs/performance.md). Here the queue is specialized for the
/// one element type, and a reader that finds events waiting takes one under the lock without
/// suspending.
///
/// The same contract as the buffered `AsyncStream` it replaces (`bufferingOldest(capacity)`):
/// an event that does not fit is dropped and reported so; after ``finish()`` the reader gets what
/// is queued, then `nil`; a cancelled reader gets `nil` at once; and the channel says once, through
/// ``onTermination(_:)``, that its reader is gone (cancelled, or every copy of the stream and its
/// iterators released), so that the node stops following for it.
final class DiscoverChannel: Sendable {
    /// What ``yield(_:)`` did with an event.
    enum Yielded: Equatable {
        /// Queued, or handed to the waiting reader.
        case enqueued
        /// The queue was full (``capacity``): the event is not delivered.
        case dropped
        /// The stream ended before it: not delivered.
        case terminated
    }

    private struct State {
        var queued = Deque<ActivityEvent>()
        /// Readers waiting for an event (one, unless copies of the stream are read at once).
        var waiting = Deque<UnsafeContinuation<ActivityEvent?, Never>>()
        /// No event is taken any more: finished by the node, or the reader is gone.
        var finished = false
        var onTermination: (@Sendable () -> Void)?
        var terminated = false
    }

    /// The most events queued for a reader that has not taken them.
    let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) {
        self.capacity = max(capacity, 1)
    }

    /// The reader's end: an `AsyncStream` whose elements are this channel's events.
    func stream() -> AsyncStream<ActivityEvent> {
        let reader = Reader(self)
        return AsyncStream(unfolding: { await reader.channel.next() }, onCancel: { reader.channel.terminate() })
    }

    /// Called once when the reader is gone, on whatever thread let it go; at once if it is gone
    /// already.
    func onTermination(_ body: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            guard !state.terminated else { return true }
            state.onTermination = body
            return false
        }
        if runNow { body() }
    }

    /// Hands `event` to the waiting reader, or queues it.
    @discardableResult
    func yield(_ event: ActivityEvent) -> Yielded {
        var yielded = Yielded.enqueued
        let reader = state.withLock { state -> UnsafeContinuation<ActivityEvent?, Never>? in
            if state.finished {
                yielded = .terminated
                return nil
            }
            if let reader = state.waiting.popFirst() { return reader }
            if state.queued.count >= capacity {
                yielded = .dropped
                return nil
            }
            state.queued.append(event)
            return nil
        }
        reader?.resume(returning: event)
        return yielded
    }

    /// Ends the stream after the events queued: no more are taken.
    func finish() {
        end(droppingQueued: false)
    }

    /// The reader's next event, or `nil` once the stream has ended and its queue is empty.
    private func next() async -> ActivityEvent? {
        enum Taken { case event(ActivityEvent), end, wait }
        let taken = state.withLock { state -> Taken in
            if let event = state.queued.popFirst() { return .event(event) }
            return state.finished ? .end : .wait
        }
        switch taken {
        case .event(let event): return event
        case .end: return nil
        case .wait:
            return await withUnsafeContinuation { reader in
                // Looked at again under the lock: an event or the end may have come since.
                let now = state.withLock { state -> ActivityEvent?? in
                    if let event = state.queued.popFirst() { return .some(event) }
                    if state.finished { return .some(nil) }
                    state.waiting.append(reader)
                    return .none
                }
                if let now { reader.resume(returning: now) }
            }
        }
    }

    /// The reader is gone (its task cancelled, or every copy of the stream released): the stream
    /// ends now, its queue dropped, and the channel says so once.
    fileprivate func terminate() {
        end(droppingQueued: true)
        let body = state.withLock { state -> (@Sendable () -> Void)? in
            guard !state.terminated else { return nil }
            state.terminated = true
            defer { state.onTermination = nil }
            return state.onTermination
        }
        body?()
    }

    /// No more events are taken; the readers waiting get the end.
    private func end(droppingQueued: Bool) {
        let readers = state.withLock { state -> Deque<UnsafeContinuation<ActivityEvent?, Never>> in
            state.finished = true
            if droppingQueued { state.queued.removeAll() }
            // Readers wait only on an empty queue: there is nothing left for them.
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for reader in readers { reader.resume(returning: nil) }
    }

    /// Held by the stream's closures only (the node holds the channel): when the last copy of the
    /// stream and its iterators is released, so is this, and the channel hears its reader is gone.
    private final class Reader: Sendable {
        let channel: DiscoverChannel

        init(_ channel: DiscoverChannel) {
            self.channel = channel
        }

        deinit { channel.terminate() }
    }
}
