import Foundation
import Testing
import ZeroMQ
@testable import Handoff
import HandoffTestSupport

/// `handoff monitor` on a broker's capture (`--capture`), as an operator watches it: the bus's
/// messages, and the subscriptions the broker's subscribers make, which the capture copies too.
@Suite("`handoff monitor` on a broker's capture", .exclusive)
struct MonitorCaptureTests {
    @Test("a monitor on the capture shows subscribers' subscriptions as such (JSON and text), not as malformed messages")
    func subscriptionsShown() async throws {
        let context = try Context()
        var configuration = Broker.Configuration.ephemeral()
        configuration.capture = "tcp://127.0.0.1:*"
        let broker = try Broker.start(configuration, context: context)
        let capture = try #require(broker.captureEndpoint)

        for json in [true, false] {
            let printed = Spawning.pipe()
            let monitor = try startHandoff(
                ["monitor", "--bus", capture, "--count", "1", "--seconds", "10"] + (json ? ["--json"] : []), standardOutput: printed.fileHandleForWriting)
            defer { reap(monitor) }
            // The monitor's own subscription reaches the capture some time after it starts: a
            // subscriber with a topic of its own every 100 ms, until the monitor has shown one.
            var subscribers: [Socket] = []
            defer { for subscriber in subscribers { subscriber.close() } }
            while monitor.isRunning, subscribers.count < 50 {
                let subscriber = try context.socket(.sub)
                try subscriber.subscribe("A:org.capture.\(subscribers.count).")
                try subscriber.connect(broker.backendEndpoint)
                subscribers.append(subscriber)
                try await Task.sleep(for: .milliseconds(100))
            }
            monitor.waitUntilExit()
            try printed.fileHandleForWriting.close()
            let output = String(decoding: printed.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(monitor.terminationStatus == 0)
            #expect(!output.contains("malformed"), "\(output)")
            if json {
                let line = try #require(output.split(separator: "\n").first { $0.hasPrefix("{") }, "\(output)")
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                #expect(object["event"] as? String == "subscription", "\(line)")
                #expect((object["topic"] as? String)?.hasPrefix("A:org.capture.") == true, "\(line)")
            } else {
                #expect(output.contains("sub    A:org.capture."), "\(output)")
            }
        }
        await broker.stop()
    }
}
