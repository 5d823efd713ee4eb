import Foundation
import Testing
import ZeroMQ

@testable import Handoff

/// The broker runs as an actor on the process's event loops, as a node does: no thread of its own.
@Suite("Broker loop")
struct BrokerLoopTests {
    @Test("twenty brokers start no thread of their own, forward, and stop")
    func noThreadPerBroker() async throws {
        let context = try Context()
        // One broker first, so that the context's I/O thread and the loops exist before counting.
        let first = try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context)
        let before = threadCount()
        var brokers: [Broker] = []
        for _ in 0..<20 {
            brokers.append(try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context))
        }
        // A thread per broker (the old design) would show 20 more; allow for Swift's timer threads.
        #expect(threadCount() - before < 5, "threads before \(before), after \(threadCount())")

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

/// Threads of this process now.
private func threadCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? 0
}
