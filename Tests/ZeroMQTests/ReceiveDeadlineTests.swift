import Dispatch
import Foundation
import Synchronization
import Testing
@testable import ZeroMQ
import HandoffTestSupport

/// A serial executor on a dispatch queue that the test can hold: jobs enqueued meanwhile wait, as
/// they wait on a loaded pool or a busy loop.
private final class HeldExecutor: SerialExecutor, @unchecked Sendable {
    // Invariant for @unchecked Sendable: `queue` is a serial DispatchQueue, which is thread-safe.
    let queue = DispatchQueue(label: "held executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }
}

/// Receives on a socket of its own, on the held executor.
private actor Receiver {
    private let executor: HeldExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    private let pull: Socket
    /// When the receive with the deadline began (its deadline counts from here), for the test to
    /// act only once it has.
    nonisolated let waitingSince = Mutex<ContinuousClock.Instant?>(nil)

    init(executor: HeldExecutor, context: Context, endpoint: String) throws {
        self.executor = executor
        pull = try context.socket(.pull)
        try pull.bind(endpoint)
    }

    /// A first message (the connection is up), then a receive of `timeout` that starts waiting.
    func receive(within timeout: Duration) async throws -> String? {
        _ = try await pull.receive(timeout: .seconds(5))
        waitingSince.withLock { $0 = .now }
        return try await pull.receive(timeout: timeout).map { String(decoding: $0.data, as: UTF8.self) }
    }
}

@Suite("A receive's deadline", .exclusive)
struct ReceiveDeadlineTests {
    @Test("a message that arrives before the deadline is received, though the waiting task runs only after it (its executor held meanwhile)")
    func messageInTimeTaskLate() async throws {
        // Sent in time, by the test's own reading, on some try: a loaded machine can run the test's
        // task so late that its send misses the deadline, when nothing (rightly) is received.
        for attempt in 1...5 {
            let outcome = try await receiveWhileHeld(timeout: .milliseconds(300))
            guard outcome.sentInTime else { continue }
            #expect(outcome.received == "in time", "try \(attempt)")
            return
        }
        Issue.record("in 5 tries the test never sent its message within the receive's deadline")
    }

    /// The receive waits; the executor is held, the message sent (inproc: in the receiver's pipe when
    /// the send returns) and the executor let go only past the deadline: the task that the message's
    /// signal resumed runs after its deadline.
    private func receiveWhileHeld(timeout: Duration) async throws -> (sentInTime: Bool, received: String?) {
        let context = try Context()
        let executor = HeldExecutor()
        let endpoint = "inproc://receive-deadline-\(UUID().uuidString)"
        let receiver = try Receiver(executor: executor, context: context, endpoint: endpoint)
        let push = try context.socket(.push)
        try push.connect(endpoint)
        try await push.send(Array("connected".utf8))
        let receiving = Task { try await receiver.receive(within: timeout) }
        var started: ContinuousClock.Instant?
        while started == nil {
            try await Task.sleep(for: .milliseconds(5))
            started = receiver.waitingSince.withLock { $0 }
        }
        // Time for the receive to find nothing and suspend, then hold its executor.
        try await Task.sleep(for: .milliseconds(20))
        let held = DispatchSemaphore(value: 0)
        executor.queue.async { held.wait() }
        try await push.send(Array("in time".utf8))
        let sentInTime = ContinuousClock.now < started! + timeout
        try await Task.sleep(until: started! + timeout + .milliseconds(300))
        held.signal()
        return (sentInTime, try await receiving.value)
    }
}
