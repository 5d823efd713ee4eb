import Logging
import ZeroMQ

/// Carries out ``UnfinishedMessageBound`` for the connections the broker reads from: those it
/// accepted (publishers at the frontend, subscribers at the backend and the capture) and those its
/// links to upstreams made: what the kernel says each handed libzmq, asked at each check, and the
/// connection past the bound cut.
extension BrokerLoop {
    /// The most a connection hands the broker between two whole messages: 8 MiB, a hundred times
    /// the largest message the contract makes (a topic and an envelope of at most 64 KiB each).
    /// A connection that sends nothing but ZMTP heartbeats (a site's link, over CURVE about 40 to
    /// 80 bytes a second) reaches it after a day or more of silence, is cut, and reconnects.
    static let unfinishedMessageBound = 8 << 20

    /// Starts watching a connection monitor `monitor` named, with what its socket's queue may hold whole.
    func watchForUnfinishedMessages(_ connection: UnfinishedMessageBound<[UInt8]>.Opened, monitor: Int) {
        let sockets = monitoredSockets
        guard sockets.indices.contains(monitor) else { return }
        let socket = sockets[monitor]
        unfinishedMessages.watch(connection, source: UnfinishedMessageBound.source(socket), queueAllowance: UnfinishedMessageBound.queueAllowance(of: socket))
    }

    /// Checks the connections when due, and cuts those past the bound (if the descriptor still
    /// names the connection watched), each counted and logged once per address.
    func cutUnfinishedMessagesIfDue(now: ContinuousClock.Instant) {
        for cut in unfinishedMessages.cutIfDue(now: now, sockets: monitoredSockets) {
            core.counted.unfinishedMessagesCut += 1
            if let line = refusals.unfinishedMessageCut(address: cut.address, bytes: cut.bytes, bound: unfinishedMessages.bound) {
                logger.warning("\(line)")
            }
            publishCounters()
        }
    }
}
