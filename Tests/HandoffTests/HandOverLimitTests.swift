import Foundation
import Synchronization
import Testing
@testable import Handoff

/// An originator's delegate that does not return from was-continued until released.
private final class StuckDelegate: UserActivityDelegate, Sendable {
    let released = Atomic<Bool>(false)
    let waiting = Atomic<Int>(0)

    func userActivityWasContinued(_ activity: UserActivity, by node: NodeInfo) async {
        waiting.add(1, ordering: .relaxed)
        defer { waiting.subtract(1, ordering: .relaxed) }
        while !released.load(ordering: .relaxed), !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
    }
}

@Suite("Continue requests waiting on the application's delegate, bounded")
struct HandOverLimitTests {
    @Test("a peer continuing faster than the delegate returns: past maxHandOversWaiting requests are refused at once (remoteApplicationTimedOut), and answered again once the delegate returns")
    func boundedWhileTheDelegateIsStuck() async throws {
        // The continues wait 10 s for their answers, not the tests' 5 s: what is tested is a refusal
        // at once, and CI's one-loop pass of e221b2e held a continue's answer past 2 s (then the
        // tests' timeout).
        try await withTwoNodes(configureB: { $0.continueTimeout = .seconds(10) }) { a, b in
            let type = "org.handoff.test.stuck"
            await b.setContinuationHandler(forType: type) { _ in }
            let stuck = StuckDelegate()
            let activity = try UserActivity(activityType: type)
            activity.title = "stuck"
            activity.delegate = stuck
            try await activity.becomeCurrent(on: a)
            let found = try await discovered(activity.id, on: b)

            // Each continue is answered before was-continued is called, which then waits.
            for round in 0..<ContinuationServer.maxHandOversWaiting {
                let result = try await b.continueActivity(found)
                guard case .restored = result else {
                    Issue.record("round \(round): \(result)")
                    return
                }
            }
            #expect(await eventually { stuck.waiting.load(ordering: .relaxed) == ContinuationServer.maxHandOversWaiting })
            let refused = await #expect(throws: HandoffError.self) { try await b.continueActivity(found) }
            #expect(refused?.code == .remoteApplicationTimedOut)
            #expect(refused?.message.contains("waiting on its application's delegate") == true, "\(String(describing: refused))")
            #expect(stuck.waiting.load(ordering: .relaxed) == ContinuationServer.maxHandOversWaiting, "the refused request did not reach the delegate")

            stuck.released.store(true, ordering: .relaxed)
            #expect(await eventually { stuck.waiting.load(ordering: .relaxed) == 0 })
            guard case .restored = try await b.continueActivity(found) else {
                Issue.record("not answered once the delegate returned")
                return
            }
        }
    }
}
