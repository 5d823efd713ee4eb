import Foundation
import Handoff
import Synchronization

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
///
/// `Process.run()` also lists /proc/self/fd in a way that can crash the test process once it holds
/// more than about 1,360 descriptors (``OpenDescriptors``). A test that holds so many (2,000
/// DEALERs, ``ContinueFloodTests``) runs alone among the `.exclusive` tests and holds them inside
/// ``withManyDescriptors(_:)``: no process starts meanwhile. The simulator's runs, which go on beside
/// every test, wait for it to end (``Process/spawnWhenFewDescriptors()``); any other start is
/// refused with an error that says why, not left to crash the whole run at random.
enum Spawning {
    /// Held while a process is started or a pipe made; counts the tests inside
    /// ``withManyDescriptors(_:)``.
    fileprivate static let lock = Mutex(0)

    /// The most descriptors open at which a process is started: glibc reads /proc/self/fd 32 KiB
    /// at a time, 24 bytes an entry for numbers of up to four digits, so some 1,360 entries fill it.
    static let descriptorLimit = 1_200

    struct TooManyDescriptors: Error, CustomStringConvertible {
        /// The descriptors open, or `nil` when a test said it holds many.
        let open: Int?
        var description: String {
            "not starting a process " + (open.map { "with \($0) descriptors open (over \(Spawning.descriptorLimit))" } ?? "while a test holds thousands of descriptors")
                + ": Foundation's Process.run() can crash reading /proc/self/fd then (swift-corelibs-foundation#5472)"
        }
    }

    /// A pipe for a child's standard input, output or error.
    static func pipe() -> Pipe {
        lock.withLock { _ in Pipe() }
    }

    /// Why a process may not start now, with `manyHeld` tests inside ``withManyDescriptors(_:)``;
    /// `nil` when it may.
    fileprivate static func refusal(manyHeld: Int) -> TooManyDescriptors? {
        if manyHeld > 0 { return TooManyDescriptors(open: nil) }
        if let open = OpenDescriptors.count(), open > descriptorLimit { return TooManyDescriptors(open: open) }
        return nil
    }

    /// Returns once no test holds many descriptors and this process holds few: a start right after
    /// is likely to be taken (``Process/spawnWhenFewDescriptors()`` waits until one is).
    static func untilFewDescriptors() async throws {
        while lock.withLock({ refusal(manyHeld: $0) }) != nil {
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Runs `body`, which opens more than ``descriptorLimit`` descriptors, with no process started
    /// meanwhile: one being started when it is called has been by the time it returns.
    static func withManyDescriptors<Result>(_ body: () async throws -> Result) async rethrows -> Result {
        lock.withLock { $0 += 1 }
        defer { lock.withLock { $0 -= 1 } }
        return try await body()
    }
}

extension Process {
    /// `run()`, with no other process of the tests started meanwhile (``Spawning``); refused while
    /// this process holds too many descriptors.
    func spawn() throws {
        try Spawning.lock.withLock { (manyHeld: inout Int) throws in
            if let refusal = Spawning.refusal(manyHeld: manyHeld) { throw refusal }
            try run()
        }
    }

    /// ``spawn()``, after waiting (a task's sleep, no thread held) while this process holds too
    /// many descriptors, for at most `patience`: for the tests that run beside the `.exclusive` ones.
    func spawnWhenFewDescriptors(patience: Duration = .seconds(120)) async throws {
        let deadline = ContinuousClock.now + patience
        while true {
            do {
                return try spawn()
            } catch is Spawning.TooManyDescriptors where ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}
