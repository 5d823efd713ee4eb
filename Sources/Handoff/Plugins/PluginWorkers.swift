import Foundation

/// The threads that run calls into plugins: a bounded set, started as calls need them and ended
/// when idle.
///
/// Plugin calls block (a stream handler for a whole transfer, waiting on flow control), so they
/// never run on Swift's cooperative pool; but a thread per call lets a peer that opens many streams
/// and never reads take the process to a thread each. Here at most `limit` calls run at once; the
/// rest wait in order. The node's stream limits (``Node/Configuration-swift.struct/maxStreamsPerPeer``)
/// keep one peer from holding every worker, and calls that wait make the node end stalled pairs
/// (``Node/Configuration-swift.struct/streamStallGrace``), whose blocked calls then return.
final class PluginWorkers: @unchecked Sendable {
    // Invariant for @unchecked Sendable: every stored var is touched only with `condition` locked.
    private let condition = NSCondition()
    private var queue: [@Sendable () -> Void] = []
    private var threads = 0
    private var idle = 0
    let limit: Int
    let name: String

    init(limit: Int, name: String) {
        self.limit = max(1, limit)
        self.name = name
    }

    /// Runs `body` on a worker and returns its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            submit { continuation.resume(returning: body()) }
        }
    }

    /// How many workers exist (for tests and logs).
    var threadCount: Int { condition.withLock { threads } }

    /// Calls waiting because every worker is busy (none idle, no more may start).
    var waiting: Int { condition.withLock { threads >= limit ? max(0, queue.count - idle) : 0 } }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        queue.append(job)
        // A new thread unless an idle one is there for every queued call: a signalled thread may
        // not have taken its call yet, and one signal wakes one thread.
        if queue.count > idle && threads < limit {
            threads += 1
            let thread = Thread { [self] in work() }
            thread.name = "\(name) \(threads)"
            thread.start()
        } else {
            condition.signal()
        }
        condition.unlock()
    }

    /// A worker idle this long ends: no thread outlives the work (nor keeps a process from exiting).
    static let idleLifetime: TimeInterval = 2

    private func work() {
        condition.lock()
        while true {
            while queue.isEmpty {
                idle += 1
                let signalled = condition.wait(until: Date(timeIntervalSinceNow: Self.idleLifetime))
                idle -= 1
                if !signalled && queue.isEmpty {
                    threads -= 1
                    condition.unlock()
                    return
                }
            }
            let job = queue.removeFirst()
            condition.unlock()
            job()
            condition.lock()
        }
    }
}
