@testable import Handoff
import Testing

@Suite("A node's run")
struct NodeRunTests {
    @Test("rule: once a node says it runs, what it starts runs, though its caller reaches it before its loops begin (a continue's DEALER had no reader then, and every continue to that originator timed out)")
    func jobsAreTakenOnceRunning() async throws {
        // The caller `untilRunning` resumes races the node's own hops into its loops: several
        // nodes, so that a caller that comes first is seen (it was in about one run of eight
        // of a continue test on a busy machine).
        for round in 0..<20 {
            let node = try Node(configuration: testConfiguration("jobs-\(round)"))
            let running = Task { try await node.run() }
            await node.untilRunning()
            let (ran, ranSignal) = AsyncStream<Bool>.makeStream()
            await node.spawn { ranSignal.yield(true) }
            let giveUp = Task {
                try? await Task.sleep(for: .seconds(5))
                ranSignal.yield(false)
            }
            var outcome = ran.makeAsyncIterator()
            let jobRan = await outcome.next()
            giveUp.cancel()
            running.cancel()
            _ = try? await running.value
            #expect(jobRan == true, "round \(round): a job spawned as the node said it runs never ran")
            if jobRan != true { return }
        }
    }
}
