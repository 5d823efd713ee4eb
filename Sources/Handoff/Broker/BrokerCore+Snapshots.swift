import Foundation
import HandoffWire
import ZeroMQ

/// Snapshot requests (wire.proto, "Snapshots"), answered in slices (``SnapshotAnswers``).
extension BrokerCore {
    /// A snapshot request on `topic`: taken to be answered slice by slice (`nil`), or answered at
    /// once with the `SnapshotReply` returned: a busy one, while ``SnapshotAnswers/maxUnderWay``
    /// answers are under way, or an empty one, with the cache off (nothing to answer from).
    mutating func beginSnapshot(topic: [UInt8], typePrefix: String, now: ContinuousClock.Instant) -> [UInt8]? {
        guard cacheEnabled else { return snapshotReply(typePrefix: typePrefix, topicSize: topic.count, sent: 0, sentBytes: 0) }
        if snapshotAnswers.begin(topic: topic, typePrefix: typePrefix, excludingSite: siteAsking(topic)) { return nil }
        let prefix = Array((Topic.activityPrefix + typePrefix).utf8)
        let cache = cache
        // At least one while anything is cached: a count of none (kept up to 100 ms) would make
        // the reply look whole to an asker whose activity was stored since.
        let promised = max(cache.count > 0 ? 1 : 0, snapshotAnswers.busyCount(of: typePrefix, now: now, everything: cache.count) {
            cache.liveCount(matching: prefix, now: now)
        })
        counted.snapshotsBusy += 1
        return snapshotReply(typePrefix: typePrefix, topicSize: topic.count, sent: 0, sentBytes: 0, promised: promised)
    }

    /// What a dropped answer sent before its asker went away, counted as a whole one's reply counts it.
    mutating func countSent(_ answer: SnapshotAnswers.Answer) {
        counted.snapshotAdvertisements += answer.sent
        counted.messagesOut += answer.sent
        counted.bytesOut += answer.sentBytes
    }

    /// Whether answers are under way (the loop goes on with them without waiting).
    var snapshotsUnderWay: Bool { !snapshotAnswers.isEmpty }

    /// The answers' next slice, in the order they were asked: each live advertisement handed to
    /// `send` with its answer's topic, as it is cached now (a withdrawal since has taken it out);
    /// an answer's `SnapshotReply` after its last. `send` returns false for a message its socket
    /// refused, which the reply does not count. `counted` is handed the counters with an answer
    /// counted, just before its reply goes to `send`: an asker that has the reply finds it counted.
    mutating func snapshotSlice<Failure: Error>(
        now: ContinuousClock.Instant, send: (_ topic: [UInt8], _ envelope: [UInt8]) throws(Failure) -> Bool,
        counted: (Broker.Counters) -> Void = { _ in }
    ) throws(Failure) {
        var messages = snapshotAnswers.sliceSize, slots = snapshotAnswers.slotsPerSlice
        while !snapshotAnswers.isEmpty, messages > 0, slots > 0 {
            var answer = snapshotAnswers.first
            let from = answer.cursor
            let next = try cache.forEachLive(
                matching: answer.activityTopicPrefix, from: from, looking: slots, now: now, excludingSite: answer.excludingSite
            ) { entry throws(Failure) -> Bool in
                let envelope = entry.frames.afterFirstFrame
                messages -= 1
                if try send(answer.topic, envelope) {
                    answer.sent += 1
                    answer.sentBytes += answer.topic.count + envelope.count
                }
                return messages > 0
            }
            slots -= (next ?? cache.slots.end) - from
            if let next {
                answer.cursor = next
                snapshotAnswers.first = answer
                continue
            }
            _ = snapshotAnswers.finishFirst()
            messages -= 1
            let reply = snapshotReply(typePrefix: answer.typePrefix, topicSize: answer.topic.count, sent: answer.sent, sentBytes: answer.sentBytes)
            counted(counters)
            _ = try send(answer.topic, reply)
        }
    }
}
