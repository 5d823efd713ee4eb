import Foundation

/// Reads what a child process writes into a pipe, on a thread of its own, until the pipe ends
/// (every writer closed it: the child exited), handing each chunk to `received`.
///
/// Not Foundation's `readabilityHandler`: on Linux it watches the descriptor with a dispatch
/// source, and a test that set the handler to `nil` and let its `Pipe` go closed the descriptor
/// before libdispatch had taken the cancelled source out of its epoll set. Its manager thread then
/// crashed in `_dispatch_event_loop_drain` (a bad pointer), or lost events on the descriptor's
/// reused number, timers among them (a `Task.sleep` that never ended, and the run hung): seen in
/// the suite with eight `.exclusive` tests at a time on one event loop, 2026-12-05, and before as
/// the one-loop pass's "libdispatch crash" of no known test. Here the thread holds the pipe, so its
/// descriptor is closed only once the thread has read its end; no dispatch source is involved.
public final class PipeReader: Sendable {
    public init(_ pipe: Pipe, received: @escaping @Sendable (Data) -> Void) {
        let thread = Thread {
            let handle = pipe.fileHandleForReading
            while true {
                // Blocks this thread (not a loop's, nor the pool's) until data comes or the pipe ends.
                let data = handle.availableData
                if data.isEmpty { return }
                received(data)
            }
        }
        thread.name = "pipe reader"
        thread.start()
    }
}
