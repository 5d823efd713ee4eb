import Foundation
@testable import Handoff
import Testing
import HandoffTestSupport

/// The two-node suite: a request goes out at once over a live connection, and waits for one only
/// when the DEALER refuses it (Node.fetch).
extension ContinuationTests {
    @Test("a continue over a new connection not yet up waits for it and is sent once more, reaching the originator exactly once")
    func requestWaitsForANewConnection() async throws {
        try await withTwoNodes { a, b in
            let originator = Recorder()
            await b.setContinuationHandler(forType: editContact) { _ in }
            let activity = try UserActivity(activityType: editContact)
            activity.userInfo = ["contactID": "c-42"]
            activity.delegate = originator
            try await activity.becomeCurrent(on: a)
            let found = try await discovered(activity.id, on: b)

            // Over the live connection: sent at once.
            _ = try await b.continueActivity(found)
            #expect(await eventually { originator.log.filter { $0.hasPrefix("wasContinued") }.count == 1 })

            // A new DEALER, its connection not up yet: with ZMQ_IMMEDIATE it refuses the request,
            // so the node waits for the connection and sends it again.
            for round in 2...4 {
                await b.dropConnection(to: found.continueEndpoint)
                let result = try await b.continueActivity(found)
                guard case .restored(let continued) = result else {
                    Issue.record("expected a restored activity, got \(result)")
                    return
                }
                #expect(continued.userInfo == ["contactID": "c-42"])
                // Exactly one request reached the originator each time: the refused send queued nothing.
                #expect(await eventually { originator.log.filter { $0.hasPrefix("wasContinued") }.count == round })
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(originator.log.filter { $0.hasPrefix("wasContinued") }.count == 4)
        }
    }
}
