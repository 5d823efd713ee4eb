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
        var brokers: [Broker] = []
        for _ in 0..<20 {
            brokers.append(try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: context))
        }
        // Each thread says who it is as it starts; the test looks at these threads alone (other
        // tests' brokers come and go beside it: counting every broker thread of the process
        // failed a fresh-clone CI run, 22 where 21 were expected).
        let deadline = ContinuousClock.now + .seconds(10)
        while brokers.contains(where: { $0.threadID == nil }), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let threads = brokers.compactMap(\.threadID)
        #expect(Set(threads).count == 20, "threads \(threads)")
        #expect(threads.allSatisfy { threadName($0) == "handoff-broker" }, "\(threads.map(threadName))")

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
        for broker in brokers { await broker.stop() }
        #expect(brokers.allSatisfy { !$0.isRunning })
        // stop() returns once the thread has closed the sockets; it ends right after.
        let ended = ContinuousClock.now + .seconds(10)
        while threads.contains(where: { threadName($0) != nil }), ContinuousClock.now < ended { try await Task.sleep(for: .milliseconds(10)) }
        #expect(threads.allSatisfy { threadName($0) == nil }, "still running: \(threads.filter { threadName($0) != nil })")
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

/// The name of a thread of this process, `nil` once it has ended.
private func threadName(_ id: Int32) -> String? {
    (try? String(contentsOfFile: "/proc/self/task/\(id)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
}
