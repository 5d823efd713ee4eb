extension Follower {
    /// Whether a bus message is dropped before it is decoded: one of this node's own
    /// advertisements or withdrawals, come back through a broker (every subscriber gets what it
    /// publishes), unless it answers a snapshot of this node's. The broker's reply counts it, so
    /// the snapshot must too (``SnapshotRequests``): dropped unread, a snapshot that held any of
    /// the node's own activities arrived short every time and was asked for four times more.
    ///
    /// `isOwnEcho` reads the envelope without decoding it (`WireOwnEcho`); it is asked last, and
    /// only when this node does not count its own activities.
    func dropsUnread(topic: some Collection<UInt8>, isOwnEcho: () -> Bool) -> Bool {
        !settings.includeOwnActivities && isOwnEcho() && !topic.starts(with: Topic.snapshotPrefixBytes)
    }
}
