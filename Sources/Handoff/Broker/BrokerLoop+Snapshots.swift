import ZeroMQ

extension BrokerLoop {
    /// Publishes every live cached advertisement of `typePrefix` under one subscriber's snapshot
    /// topic (each in its origin's own envelope), then the `SnapshotReply` that ends it. Past the
    /// broker's snapshot budget (half its thread's time: ``SnapshotBudget``), the reply alone,
    /// with its count: the follower asks again after its backoff.
    func answerSnapshot(topic: [UInt8], typePrefix: String) throws(ZMQError) {
        let topicFrame = Frame(topic)
        let started = ContinuousClock.now
        guard core.answersSnapshotInFull(now: started) else {
            try send([topicFrame, Frame(core.busySnapshotReply(typePrefix: typePrefix, topic: topic, now: started))], to: backend)
            publishCounters()
            return
        }
        var sent = 0, sentBytes = 0
        for envelope in core.snapshot(typePrefix: typePrefix, topic: topic, now: started) {
            guard try send([topicFrame, Frame(envelope)], to: backend) else { continue }
            sent += 1
            sentBytes += topic.count + envelope.count
        }
        let reply = core.snapshotReply(typePrefix: typePrefix, topicSize: topic.count, sent: sent, sentBytes: sentBytes)
        try send([topicFrame, Frame(reply)], to: backend)
        let ended = ContinuousClock.now
        core.snapshotAnswered(cost: ended - started, now: ended)
        publishCounters()
    }
}
