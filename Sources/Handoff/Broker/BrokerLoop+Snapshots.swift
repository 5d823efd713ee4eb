import ZeroMQ

extension BrokerLoop {
    /// One slice of the snapshot answers under way: live cached advertisements under their askers'
    /// snapshot topics (each in its origin's own envelope), an answer's `SnapshotReply` after its last.
    func answerSnapshotSlice(now: ContinuousClock.Instant) throws(ZMQError) {
        // One topic frame per answer, not per message (an answer's topic is one array throughout).
        var topicFrame: (topic: [UInt8], frame: Frame)?
        // Each answer's counts published before its reply is sent, as every message's are
        // (publishCounters): whoever has its reply (a test, an operator's script) finds it counted.
        try core.snapshotSlice(now: now, send: { topic, envelope throws(ZMQError) -> Bool in
            if topicFrame?.topic != topic { topicFrame = (topic, Frame(topic)) }
            return try send([topicFrame!.frame, Frame(envelope)], to: backend)
        }, counted: { counters in publish(counters) })
        publishCounters()
    }
}
