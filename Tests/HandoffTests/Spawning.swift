import Foundation

/// Every process the tests start is started here, one at a time, and every pipe given to one is
/// made here, under the same lock: so no pipe, and no socket pair of Foundation's, is ever opened
/// while another process is being started.
///
/// Foundation's `Process.run()` on Linux emulates close-on-exec for the child: it lists the
/// descriptors open (/proc/self/fd), has the child close those, and then spawns. A descriptor
/// another thread opens in between is inherited. Measured here (a program holding 600
/// descriptors, as the test process does, with one thread starting `sleep 3` with a pipe every 5 ms
/// and another starting `true` with a pipe and reading it to its end, 600 times): one read waited
/// 3 s, for the `sleep` that held the write end of `true`'s pipe. In the suite the long-lived process
/// is another test's broker or agent, and what waits is a `readDataToEndOfFile` or Foundation's
/// wait for the exit (which watches a socket pair each child inherits), on one of Swift's two pool
/// threads, until that other test ends its process: two tests doing so to each other stop the whole
/// test process. CI's one-loop pass hung so on 2026-12-05 (exit 124, its output ending 13 minutes
/// before, two tests that start processes started and never ended).
///
/// Descriptors opened elsewhere (a node's sockets) can still be inherited for the life of a child;
/// none is an end of a pipe or a socket pair that a test waits on.
enum Spawning {
    fileprivate static let lock = NSLock()

    /// A pipe for a child's standard input, output or error.
    static func pipe() -> Pipe {
        lock.withLock { Pipe() }
    }
}

extension Process {
    /// `run()`, with no other process of the tests started meanwhile (``Spawning``).
    func spawn() throws {
        try Spawning.lock.withLock { try run() }
    }
}
