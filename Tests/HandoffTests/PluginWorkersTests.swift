import Foundation
import Testing
@testable import Handoff
import HandoffTestSupport

@Suite("Plugin workers", .exclusive)
struct PluginWorkersTests {
    @Test("calls submitted back to back each get a worker, even when one idle thread was there for both")
    func backToBackCallsAllRun() async throws {
        let workers = PluginWorkers(limit: 4, name: "test worker")
        // One thread, now idle.
        await workers.run {}
        try await Task.sleep(for: .milliseconds(50))
        let release = DispatchSemaphore(value: 0)
        // The first call blocks its worker; the second, submitted at once, must not wait behind it.
        async let blocked: Void = workers.run { release.wait() }
        async let quick: Int = workers.run { 42 }
        let started = ContinuousClock.now
        #expect(await quick == 42)
        #expect(ContinuousClock.now - started < .seconds(1))
        release.signal()
        await blocked
        #expect(workers.waiting == 0)
    }

    @Test("past the limit, calls wait and are counted as waiting")
    func waitingIsCounted() async throws {
        let workers = PluginWorkers(limit: 2, name: "test worker")
        let release = DispatchSemaphore(value: 0)
        let calls = (0..<3).map { _ in Task { await workers.run { release.wait() } } }
        let deadline = ContinuousClock.now + .seconds(2)
        while workers.waiting != 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(workers.waiting == 1)
        #expect(workers.threadCount == 2)
        for _ in 0..<3 { release.signal() }
        for call in calls { await call.value }
        #expect(workers.waiting == 0)
    }
}
