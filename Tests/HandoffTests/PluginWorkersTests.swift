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
        let release = Release()
        // Were the second call to wait behind the first, nothing would end this test: the watchdog
        // lets the first go after ten seconds, and the second then ends after the release. Ordered,
        // not timed: a loaded machine can stall the process for seconds without a call waiting.
        let watchdog = Task {
            do { try await Task.sleep(for: .seconds(10)) } catch { return }
            release.letGo()
        }
        // The first call blocks its worker; the second, submitted at once, must not wait behind it.
        async let blocked: Void = workers.run { release.semaphore.wait() }
        async let quick: Int = workers.run { 42 }
        #expect(await quick == 42)
        let endedAfterTheRelease = release.happened
        #expect(!endedAfterTheRelease, "the second call ended only after the first was let go")
        watchdog.cancel()
        release.letGo()
        await blocked
        #expect(workers.waiting == 0)
    }

    @Test("past the limit, calls wait and are counted as waiting")
    func waitingIsCounted() async throws {
        let workers = PluginWorkers(limit: 2, name: "test worker")
        let release = DispatchSemaphore(value: 0)
        let calls = (0..<3).map { _ in Task { await workers.run { release.wait() } } }
        let deadline = ContinuousClock.now + .seconds(10)
        while workers.waiting != 1 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(workers.waiting == 1)
        #expect(workers.threadCount == 2)
        for _ in 0..<3 { release.signal() }
        for call in calls { await call.value }
        #expect(workers.waiting == 0)
    }

    /// What the blocked call waits on, let go once: by the test, or by its watchdog first.
    final class Release: Sendable {
        let semaphore = DispatchSemaphore(value: 0)
        private let done = Atomic(false)

        /// Whether it has been let go.
        var happened: Bool { done.load(ordering: .acquiring) }

        /// Lets the blocked call go, unless that was done already.
        func letGo() {
            if !done.exchange(true, ordering: .acquiringAndReleasing) { semaphore.signal() }
        }
    }
}
