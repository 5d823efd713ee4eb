import Foundation
import Glibc
import Handoff
import Synchronization
import Testing
import HandoffTestSupport

/// A `handoff advertise` process, once it says it advertises (reap it).
func startAdvertising(_ arguments: [String]) async throws -> Process {
    let process = Process()
    process.executableURL = buildFolder.appendingPathComponent("handoff")
    process.arguments = ["advertise"] + arguments + ["--log-level", "error"]
    // It ends with the test process (ParentWatch), whatever ends that.
    process.environment = ProcessInfo.processInfo.environment.merging([ParentWatch.variable: "1"]) { $1 }
    let output = Spawning.pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    let printed = Mutex("")
    try process.spawn()
    _ = PipeReader(output) { data in printed.withLock { $0 += String(decoding: data, as: UTF8.self) } }
    let ready = ContinuousClock.now + .seconds(20)
    while !printed.withLock({ $0.contains("advertising") }), process.isRunning, ContinuousClock.now < ready {
        try await Task.sleep(for: .milliseconds(10))
    }
    guard printed.withLock({ $0.contains("advertising") }) else {
        reap(process)
        throw ProcessFailure("handoff advertise \(arguments.joined(separator: " ")) never said it advertises")
    }
    return process
}

/// One JSON object from a line of output, or nil.
private func object(_ line: some StringProtocol) -> [String: Any]? {
    try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
}

@Suite("handoff advertise and continue: the whole activity from the command line", .exclusive)
struct ContinueStateCommandTests {
    @Test("an activity advertised with userInfo, keywords, a required key, an expiry and a webpage is listed by keyword with them and continued with --print-state: the state arrives whole, as text and as JSON")
    func stateFromTheCommandLine() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let type = "org.handoff.test.state"
        let userInfo = #"{"items": ["milk", "eggs"], "done": false, "count": 3, "ratio": 1.5, "where": {"shop": "corner"}}"#
        let before = Date()
        let advertiser = try await startAdvertising([
            "--type", type, "--title", "Shopping", "--user-info", userInfo, "--keyword", "groceries", "--keyword", "weekly",
            "--required-key", "items", "--expires", "120", "--webpage", "https://example.org/list", "--broker", frontend, backend,
        ])
        defer { reap(advertiser) }

        let found = try await runHandoff(["activities", "--keyword", "groceries", "--wait", "5", "--json", "--broker", frontend, backend, "--log-level", "error"])
        let listed = try #require(found.output.split(separator: "\n").compactMap(object).first { $0["type"] as? String == type }, "\(found.output)")
        #expect(listed["keywords"] as? [String] == ["groceries", "weekly"] && listed["webpageURL"] as? String == "https://example.org/list", "\(listed)")
        #expect(listed["expires"] as? String != nil, "\(listed)")
        let listedAsText = try await runHandoff(["activities", "--keyword", "weekly", "--broker", frontend, backend, "--log-level", "error"])
        #expect(listedAsText.output.contains("keywords: groceries, weekly  https://example.org/list  expires "), "\(listedAsText.output)")
        let other = try await runHandoff(["activities", "--keyword", "holidays", "--json", "--broker", frontend, backend, "--log-level", "error"])
        #expect(!other.output.contains(type), "\(other.output)")

        let asJSON = try await runHandoff(["continue", "--type", type, "--print-state", "--json", "--wait", "5", "--broker", frontend, backend, "--log-level", "error"])
        #expect(asJSON.status == 0, "\(asJSON.error)")
        let outcome = try #require(asJSON.output.split(separator: "\n").compactMap(object).first, "\(asJSON.output)")
        #expect(outcome["title"] as? String == "Shopping")
        let state = try #require(outcome["state"] as? [String: Any], "\(outcome)")
        let restored = try #require(state["userInfo"] as? [String: Any])
        #expect(restored["items"] as? [String] == ["milk", "eggs"])
        #expect(restored["done"] as? Bool == false && restored["count"] as? Int == 3 && restored["ratio"] as? Double == 1.5)
        #expect((restored["where"] as? [String: String]) == ["shop": "corner"])
        #expect(state["requiredUserInfoKeys"] as? [String] == ["items"])
        #expect(state["keywords"] as? [String] == ["groceries", "weekly"])
        #expect(state["webpageURL"] as? String == "https://example.org/list")
        let expires = try #require((state["expires"] as? String).flatMap { try? Date($0, strategy: JSONValueDates.format) }, "\(state)")
        #expect(expires.timeIntervalSince(before) > 110 && expires.timeIntervalSince(before) < 130, "expires \(expires)")
        #expect(state["version"] as? Int ?? 0 >= 1)

        let asText = try await runHandoff(["continue", "--type", type, "--print-state", "--broker", frontend, backend, "--log-level", "error"])
        #expect(asText.status == 0, "\(asText.error)")
        #expect(asText.output.contains(#"  userInfo {"count":3,"done":false,"items":["milk","eggs"],"ratio":1.5,"where":{"shop":"corner"}}"#), "\(asText.output)")
        #expect(asText.output.contains("  required keys: items") && asText.output.contains("  keywords: groceries, weekly"), "\(asText.output)")

        // Without --print-state nor a plugin for the type, the webpage is the way on, as before.
        let plain = try await runHandoff(["continue", "--type", type, "--json", "--broker", frontend, backend, "--log-level", "error"])
        #expect(plain.output.split(separator: "\n").compactMap(object).first?["webpageURL"] as? String == "https://example.org/list", "\(plain.output)")
        _ = broker
    }

    @Test("`handoff advertise --expires 1` withdraws its activity and ends by itself once it expires, with status 0")
    func advertiseEndsAtExpiry() async throws {
        let (broker, frontend, backend) = try await startBroker()
        let started = ContinuousClock.now
        let advertiser = try await startAdvertising(["--type", "org.handoff.test.expiring", "--expires", "1", "--broker", frontend, backend])
        defer { reap(advertiser) }
        while advertiser.isRunning, ContinuousClock.now - started < .seconds(20) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(!advertiser.isRunning, "still advertising 20 s after an expiry of 1 s")
        #expect(advertiser.isRunning || advertiser.terminationStatus == 0)
        let left = try await runHandoff(["activities", "--type", "org.handoff.test.expiring", "--json", "--broker", frontend, backend, "--log-level", "error"])
        #expect(!left.output.contains("org.handoff.test.expiring"), "still on the bus: \(left.output)")
        _ = broker
    }

    @Test("--print-state is refused with --save, --document-into and --agent, and --expires of 0 or less, before anything joins the bus")
    func refusedCombinations() async throws {
        for arguments in [["--save", "/tmp/x"], ["--document-into", "/tmp"], ["--agent", "tcp://127.0.0.1:1"]] {
            let refused = try await runHandoff(["continue", "--type", "a.b", "--print-state"] + arguments)
            #expect(refused.status == 64 && refused.error.contains("--print-state"), "\(arguments): \(refused.error)")
        }
        let expired = try await runHandoff(["advertise", "--type", "a.b", "--expires", "0"])
        #expect(expired.status == 64 && expired.error.contains("--expires"), "\(expired.error)")
    }
}

/// How the command prints a date (ISO 8601 with fractions of a second), to read one back.
private enum JSONValueDates {
    static let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}
