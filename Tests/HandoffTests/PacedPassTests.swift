import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
import HandoffTestSupport

@testable import Handoff

/// The pacer of a node's passes over every activity, over real sockets: `AdvertiserTests` checks
/// the slices on the machine alone; here a node's publisher meets a broker's subscribe-all.
@Suite("A node's pass over every activity, paced on its socket", .exclusive)
struct PacedPassTests {
    @Test("a broker's subscribe-all gets every one of a node's 2,500 activities exactly once over real sockets: all three slices of the pass go out, not only the first")
    func subscribeAllInSlices() async throws {
        let context = try Context()
        // A stand-in broker: its frontend (an XSUB the node publishes to) and a backend for the
        // node's subscriber to connect to.
        let frontend = try context.socket(.xsub)
        try frontend.bind("tcp://127.0.0.1:*")
        let backend = try context.socket(.xpub)
        try backend.bind("tcp://127.0.0.1:*")
        defer { frontend.close(); backend.close() }
        var configuration = Node.Configuration(name: "paced", bus: .broker(frontend: try frontend.lastEndpoint, backend: try backend.lastEndpoint))
        // No refresh of its own within the test, and no pass for a presence later than its lease
        // (the node's rule when it stalled: a one-loop pass beside three busy processes held it so,
        // and an activity came twice): the only pass is the one the subscribe-all asks for.
        configuration.refreshInterval = .seconds(600)
        configuration.advertiseInterval = .seconds(120)
        let count = 2 * Advertiser.bulkSlice + Advertiser.bulkSlice / 2
        let heard = try await Node.withRunning(configuration, context: context) { node in
            let activities = try (0..<count).map { index in
                let activity = try UserActivity(activityType: "org.handoff.test.paced")
                activity.title = "paced \(index)"
                return activity
            }
            // No subscriber yet: the publisher drops these, as it does before a broker connects.
            try await node.becomeCurrent(activities)
            try await Task.sleep(for: .milliseconds(200))
            try await frontend.send([UInt8(1)])
            var heard: [String: Int] = [:]
            // Until every activity came, then a while longer for any that would come twice.
            var deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                if heard.count == count { deadline = min(deadline, .now + .milliseconds(300)) }
                guard let frames = try await receiveMessage(frontend, timeout: .milliseconds(100)), frames.count == 2,
                      frames[0].bytes.starts(with: Array("A:".utf8)),
                      let envelope = try? WireEnvelope.decode(frames[1].data),
                      case .advertisement(let advertisement) = envelope.body else { continue }
                heard[advertisement.activityID, default: 0] += 1
            }
            return heard
        }
        #expect(heard.count == count, "\(heard.count) of \(count) activities arrived")
        let twice = heard.values.count { $0 > 1 }
        #expect(twice == 0, "\(twice) of \(count) activities came more than once in one pass")
        // The pace itself is not asserted here: in a debug build a slice of 1,000 takes longer to
        // send than the 10 ms pace, so the wire looks the same with the pace at zero (measured).
        // The slices' timing is AdvertiserTests' (on the machine, with time passed in).
    }
}
