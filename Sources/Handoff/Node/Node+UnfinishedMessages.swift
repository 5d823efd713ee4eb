import Logging
import ZeroMQ

/// Carries out ``UnfinishedMessageBound`` for the connections this node reads from, as a broker
/// does for its own: those it accepted (at its continuation ROUTER, and in direct mode at its
/// publisher: any member may connect there), and those it made (its DEALERs to originators, whose
/// endpoints any member may advertise; its bus subscribers, to direct peers or brokers). libzmq
/// keeps every frame of a message until its last arrives.
extension Node {
    /// The most a connection hands the node between two whole messages: 8 MiB, as at a broker, or
    /// four of the largest frame the continuation sockets take (a stream chunk of a larger
    /// ``Configuration-swift.struct/streamChunkSize``, with its envelope), whichever is more. A
    /// continuing node's idle DEALER, which sends only ZMTP heartbeats (about 16 bytes a second,
    /// 80 over CURVE), would reach it after more than a day.
    static func unfinishedMessageBound(_ limits: ContinuationLimits) -> Int {
        max(8 << 20, 4 * Int(limits.maxMessageSize))
    }

    /// Checks the connections when due, for the node's life, and cuts those past the bound (if the
    /// descriptor still names the connection watched), each counted and logged (rate-limited).
    func cutUnfinishedMessages() async {
        while !Task.isCancelled {
            let now = ContinuousClock.now
            let read = [sockets.server, sockets.publisher] + sockets.subscribers + sockets.clients.values.map(\.socket)
            for cut in sockets.unfinishedMessages.cutIfDue(now: now, sockets: read) {
                observability.securityCounters.unfinishedMessagesCut += 1
                logRateLimited("cut off a connection of this node's with \(cut.address ?? "unknown"): it handed the node \(cut.bytes) bytes without finishing a message (the bound: \(sockets.unfinishedMessages.bound)); counted in unfinishedMessagesCut")
            }
            // With nothing watched, a look a quarter of a second: a connection opened meanwhile is
            // counted from its first check on, so what it sends before counts as sent before the bound.
            let due = sockets.unfinishedMessages.nextCheckDue ?? now + .milliseconds(250)
            do { try await EventLoops.sleep(until: due) } catch { return }
        }
    }
}
