import Foundation
@testable import Handoff
import HandoffWire
import Testing
import ZeroMQ
import HandoffTestSupport

/// A direct peer's answers to snapshot requests (wire.proto, "Snapshots"), over real sockets: in
/// slices of ``Advertiser/bulkSlice``, at most ``Advertiser/maxSnapshotAnswers`` under way.
@Suite("Direct snapshot answers over real sockets", .exclusive)
struct SnapshotAnswerTests {
    @Test("a direct peer answers a late joiner's snapshot of more activities than a slice in slices, over real sockets: it arrives whole, and the joiner is synchronized")
    func lateJoinerDirectInSlices() async throws {
        try await Node.withRunning(testConfiguration("node-a", interval: .seconds(60))) { a in
            let activities = try await viewContacts(2_500, currentOn: a)  // Advertiser.bulkSlice is 1,000
            var configuration = testConfiguration("late", peers: [a.busEndpoint!], interval: .seconds(60))
            configuration.maxKnownActivitiesPerNode = activities.count
            try await Node.withRunning(configuration) { late in
                #expect(await late.untilSynchronized(timeout: .seconds(5)))
                #expect(Set(await late.activities().map(\.id)) == Set(activities.map(\.id)), "the snapshot's three slices hold them all")
            }
        }
    }

    @Test("past the most answers under way, a snapshot request is answered at once with a reply alone that counts what matches; every other answer's reply counts exactly the advertisements it sent")
    func busyReplyAlone() async throws {
        try await Node.withRunning(testConfiguration("node-a", interval: .seconds(60))) { a in
            let activities = try await viewContacts(1_500, currentOn: a)  // an answer of two slices
            let context = try Context()
            let tap = try context.socket(.sub)
            try tap.set(.receiveHighWaterMark, 0)
            let topics = (0..<(Advertiser.maxSnapshotAnswers + 32)).map { _ in
                Topic.snapshot(token: Topic.newSnapshotToken(), typePrefix: "org.handoff.contacts.")
            }
            for topic in topics { try tap.subscribe(topic) }
            try tap.connect(a.busEndpoint!)
            var advertisements: [String: Int] = [:], replies: [String: Int] = [:]
            while replies.count < topics.count {
                guard let topic = try await tap.receive(timeout: .seconds(20))?.string else { break }
                let envelope = try WireEnvelope.decode(try await tap.receive().bytes)
                switch envelope.body {
                case .advertisement: advertisements[topic, default: 0] += 1
                case .snapshotReply(let reply): replies[topic] = Int(reply.count)
                default: Issue.record("a \(String(describing: envelope.body)) on a snapshot topic")
                }
            }
            tap.close()
            #expect(replies.count == topics.count, "\(replies.count) of \(topics.count) replies")
            let busy = topics.filter { advertisements[$0] == nil }
            #expect(!busy.isEmpty && topics.count - busy.count >= Advertiser.maxSnapshotAnswers, "\(busy.count) busy")
            #expect(busy.allSatisfy { replies[$0] == activities.count }, "a reply alone counts what matches")
            for topic in topics where advertisements[topic] != nil {
                #expect(advertisements[topic] == activities.count && replies[topic] == activities.count, "\(topic): \(advertisements[topic] ?? 0) sent, \(replies[topic] ?? -1) in the reply")
            }
        }
    }
}
