import Foundation
import HandoffWire
import SwiftProtobuf
import Testing
import ZeroMQ
@testable import Handoff

/// A node's table of other nodes' activities bounded in memory (``Node/Configuration-swift.struct/maxKnownActivityBytes``)
/// against a peer that lies, over real sockets. (KnownActivitiesTests checks the rule with no socket.)
@Suite("Known activities bounded in bytes, over real sockets")
struct KnownActivityBytesTests {
    @Test("a direct peer advertising activities of nearly a whole frame each cannot make a node keep more than maxKnownActivityBytes of them: the rest are ignored and counted as over quota")
    func largestFramesBounded() async throws {
        let context = try Context()
        let liar = try context.socket(.xpub)
        defer { liar.close() }
        try liar.set(.sendHighWaterMark, 0)
        try liar.bind("tcp://127.0.0.1:*")
        var configuration = testConfiguration("target", peers: [try liar.lastEndpoint], interval: .seconds(60))
        configuration.maxKnownActivityBytes = 1 << 20
        try await Node.withRunning(configuration) { node in
            let events = await node.discover(.type(prefix: "org.handoff.large."))
            // Its subscription reached the liar: from here on nothing it publishes is lost.
            while let frame = try await liar.receive(timeout: .seconds(5)), !frame.bytes.starts(with: [1] + Array("A:org.handoff.large.".utf8)) {}
            var sender = WireNodeRef()
            sender.nodeID = "liar"
            sender.name = "liar"
            let title = String(repeating: "t", count: 60 << 10)
            for index in 1...40 {
                var advertisement = WireAdvertisement()
                advertisement.activityID = "large-\(index)"
                advertisement.activityType = "org.handoff.large.view"
                advertisement.title = title
                advertisement.origin = sender
                advertisement.version = 1
                advertisement.leaseMs = 60_000
                let envelope: [UInt8] = try WireEnvelope(body: .advertisement(advertisement), sender: sender, sequence: UInt64(index)).serializedBytes()
                #expect(envelope.count < WireLimits.maxBusFrame)
                try await liar.send(Array("A:org.handoff.large.view".utf8), more: true)
                try await liar.send(envelope)
            }
            let settled = await eventually(within: .seconds(10)) {
                let kept = await node.activities().count, ignored = await node.securityCounters.overQuotaIgnored
                return kept > 0 && ignored == 40 - kept
            }
            #expect(settled)
            let kept = await node.activities()
            #expect((14...16).contains(kept.count), "\(kept.count) kept of 40")
            #expect(kept.reduce(0) { $0 + $1.footprint } <= 1 << 20)
            withExtendedLifetime(events) {}
        }
    }
}
