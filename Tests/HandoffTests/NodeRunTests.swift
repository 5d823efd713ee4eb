@testable import Handoff
import Synchronization
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
                try? await Task.sleep(for: .seconds(20))
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

    @Test("rule: a job cancelled because its node stops finds the node's stopping flag up (a stream reader it dropped told the peer \"the reader stopped\" before the shutdown notice could say \"shut down\")")
    func jobsSeeTheNodeStopping() async throws {
        // Each job waits to be cancelled and then reads the flag, as a dropped iterator's word
        // does on the node. Raised on the node's actor once its loop of jobs ends, the flag was
        // down for some of them in every run (two of two); a handler outside the node's task group
        // raises it after the runtime cancels the group's children (in a bare program of the same
        // shape, 12 children in 2,000 saw it down), too rarely for this test to see.
        let late = Counter()
        for round in 0..<40 {
            let node = try Node(configuration: testConfiguration("stopping-\(round)"))
            let running = Task { try await node.run() }
            await node.untilRunning()
            let (started, startedSignal) = AsyncStream<Void>.makeStream()
            for _ in 0..<10 {
                await node.spawn {
                    startedSignal.yield()
                    try? await Task.sleep(for: .seconds(60))
                    if !node.stopping.isRaised { late.add() }
                }
            }
            var starts = started.makeAsyncIterator()
            for _ in 0..<10 { await starts.next() }
            running.cancel()
            _ = try? await running.value
        }
        #expect(late.value == 0, "\(late.value) of 400 jobs saw their node's cancellation before its stopping flag")
    }
}

/// A count several tasks add to.
private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
