import Foundation
@testable import Handoff
import Testing

@Suite("A node's timings and id are checked when it is made")
struct NodeTimingsTests {
    private func refusal(_ change: (inout Node.Configuration) -> Void) -> HandoffError? {
        var configuration = testConfiguration("timed")
        change(&configuration)
        return #expect(throws: HandoffError.self) { _ = try Node(configuration: configuration) }
    }

    @Test("a zero advertise interval, a lease no longer than it, a lease past the hour other nodes grant, an id past 128 bytes, and room for known activities below one frame are invalid configurations")
    func refusedTimings() throws {
        let spinning = refusal { $0.advertiseInterval = .zero }
        #expect(spinning?.code == .invalidConfiguration)
        let short = refusal { $0.lease = .seconds(1); $0.advertiseInterval = .seconds(2) }
        #expect(short?.code == .invalidConfiguration)
        let long = refusal { $0.lease = .seconds(7_200) }
        #expect(long?.code == .invalidConfiguration)
        #expect(long?.message.contains("at most 3600.0 seconds") == true, "\(long?.message ?? "")")
        let longID = refusal { $0.id = String(repeating: "n", count: WireLimits.maxNodeID + 1) }
        #expect(longID?.code == .invalidConfiguration)
        let tooSmall = refusal { $0.maxKnownActivityBytes = WireLimits.maxBusFrame - 1 }
        #expect(tooSmall?.code == .invalidConfiguration)
        var hour = testConfiguration("an hour")
        hour.lease = WireLimits.maxLease
        _ = try Node(configuration: hour)
    }

    @Test("rule: the node ticks at least every quarter of its shortest lease, stream idle timeout or continue timeout, and at least every 250 ms")
    func tickInterval() {
        var configuration = testConfiguration("ticking", interval: .milliseconds(200))  // lease 600 ms
        configuration.continueTimeout = .seconds(2)
        configuration.streamIdleTimeout = .seconds(5)
        #expect(configuration.tickInterval == .milliseconds(150))
        configuration.lease = .seconds(30)
        #expect(configuration.tickInterval == .milliseconds(250))
        configuration.continueTimeout = .milliseconds(400)
        #expect(configuration.tickInterval == .milliseconds(100))
        configuration.streamIdleTimeout = .milliseconds(200)
        #expect(configuration.tickInterval == .milliseconds(50))
    }
}
