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

    init(executor: HeldExecutor, context: Context) throws {
        self.executor = executor
        pull = try context.socket(.pull)
        try pull.bind("tcp://127.0.0.1:*")
    }

    func endpoint() throws -> String { try pull.lastEndpoint }

    /// A first message (the connection is up), then a receive of `timeout` that starts waiting.
    func receive(within timeout: Duration) async throws -> String? {
        _ = try await pull.receive(timeout: .seconds(5))
        return try await pull.receive(timeout: timeout).map { String(decoding: $0.data, as: UTF8.self) }
    }
}

@Suite("A receive's deadline", .exclusive)
struct ReceiveDeadlineTests {
    @Test("a message that arrives before the deadline is received, though the waiting task runs only after it (its executor held meanwhile)")
    func messageInTimeTaskLate() async throws {
        let context = try Context()
        let executor = HeldExecutor()
        let receiver = try Receiver(executor: executor, context: context)
        let push = try context.socket(.push)
        try push.connect(try await receiver.endpoint())
        try await push.send(Array("connected".utf8))
        let receiving = Task { try await receiver.receive(within: .milliseconds(300)) }
        // The receive waits; then the executor is held, the message sent well within the 300 ms,
        // and the executor let go only after them: the task that the message's signal resumed
        // runs past its deadline.
        try await Task.sleep(for: .milliseconds(50))
        let held = DispatchSemaphore(value: 0)
        executor.queue.async { held.wait() }
        try await push.send(Array("in time".utf8))
        try await Task.sleep(for: .milliseconds(600))
        held.signal()
        #expect(try await receiving.value == "in time")
    }
}
