import Foundation
import Testing
import ZeroMQ

@testable import Handoff
import HandoffTestSupport

/// The broker forwards on a thread of its own (BrokerLoop: zmq_poll, as zmq_proxy does), which
/// ends with it.
@Suite("Broker loop", .exclusive)
struct BrokerLoopTests {
    @Test("each broker forwards on one thread of its own, and the thread ends when the broker stops")
    func oneThreadPerBroker() async throws {
        let context = try Context()
        // One broker first, so that the context's I/O thread and the loops exist before counting.
        let first = try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        // Its thread names itself once it runs: count only after (seen counted before, once in scripts/test's
        // one-loop pass: 0 before, 21 after).
        let named = ContinuousClock.now + .seconds(2)
        while brokerThreads() < 1, ContinuousClock.now < named { try await Task.sleep(for: .milliseconds(10)) }
        // A broker of a test just before may still be ending its thread: wait for it to go, or it
        // is counted before and gone after (seen in a fresh-clone CI run: before 2, after 21).
        let settled = ContinuousClock.now + .seconds(5)
        while brokerThreads() > 1, ContinuousClock.now < settled { try await Task.sleep(for: .milliseconds(10)) }
        let before = brokerThreads()
        var brokers: [Broker] = []
        for _ in 0..<20 {
            brokers.append(try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context))
        }
        // Each thread names itself as it starts.
        let deadline = ContinuousClock.now + .seconds(10)
        while brokerThreads() < before + 20, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(brokerThreads() == before + 20, "broker threads before \(before), after \(brokerThreads())")

        // Every one forwards.
        for broker in brokers.prefix(3) {
            let subscriber = try context.socket(.sub)
            try subscriber.connect(broker.backendEndpoint)
            try subscriber.subscribe("X")
            let publisher = try context.socket(.pub)
            try publisher.connect(broker.frontendEndpoint)
            var received: [Frame]?
            let deadline = ContinuousClock.now + .seconds(5)
            while received == nil, ContinuousClock.now < deadline {
                _ = try publisher.trySend(Array("X".utf8), more: true)
                _ = try publisher.trySend(Array("payload".utf8))
                if let frame = try await subscriber.receive(timeout: .milliseconds(50)) {
                    received = [frame]
                    while received!.last!.hasMore { received!.append(try await subscriber.receive()) }
                }
            }
            #expect(received?.map(\.bytes) == [Array("X".utf8), Array("payload".utf8)])
            subscriber.close()
            publisher.close()
        }
        for broker in brokers + [first] { await broker.stop() }
        #expect(brokers.allSatisfy { !$0.isRunning })
        // stop() returns once the thread has closed the sockets; it ends right after.
        let ended = ContinuousClock.now + .seconds(10)
        while brokerThreads() > before - 1, ContinuousClock.now < ended { try await Task.sleep(for: .milliseconds(10)) }
        #expect(brokerThreads() <= before - 1)
    }

    @Test("a context shut down under the broker ends it, and run() reports contextTerminated")
    func contextShutdown() async throws {
        let context = try Context()
        let broker = try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        let running = Task { try await broker.run() }
        try await Task.sleep(for: .milliseconds(50))
        #expect(broker.isRunning)
        context.shutdown()
        let outcome = await running.result
        #expect(!broker.isRunning)
        #expect(throws: ZMQError.self) { try outcome.get() }
        if case .failure(let error as ZMQError) = outcome { #expect(error.code == .contextTerminated) }
    }
}

/// Broker threads of this process now (other tests' brokers included).
private func brokerThreads() -> Int {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.filter {
        (try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8))?.hasPrefix("handoff-broker") == true
    }.count
}
