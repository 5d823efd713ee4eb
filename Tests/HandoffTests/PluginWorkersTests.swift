import Foundation
import Synchronization
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
        let released = Released()
        // Were the second call to wait behind the first, nothing would end this test: the watchdog
        // lets the first go after ten seconds, and the second then ends after the release. Ordered,
        // not timed: a loaded machine can stall the process for seconds without a call waiting.
        let watchdog = Task {
            do { try await Task.sleep(for: .seconds(10)) } catch { return }
            if !released.flag.exchange(true, ordering: .acquiringAndReleasing) { release.signal() }
        }
        // The first call blocks its worker; the second, submitted at once, must not wait behind it.
        async let blocked: Void = workers.run { release.wait() }
        async let quick: Int = workers.run { 42 }
        #expect(await quick == 42)
        let endedAfterTheRelease = released.flag.load(ordering: .acquiring)
        #expect(!endedAfterTheRelease, "the second call ended only after the first was let go")
        watchdog.cancel()
        if !released.flag.exchange(true, ordering: .acquiringAndReleasing) { release.signal() }
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

    /// Whether the blocked call has been let go.
    final class Released: Sendable {
        let flag = Atomic(false)
    }
}
