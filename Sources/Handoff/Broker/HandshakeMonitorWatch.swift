import Dispatch
import ZeroMQ

/// A broker's monitors (connections accepted and made, handshakes refused), each read by a task of
/// its own that hands every event it reports to `deliver` (the broker loop's mailbox), with the
/// monitor's index among those given.
///
/// Each task owns its monitor from the start: it reads it, and stops it (detaching it from the
/// socket it watches) when cancelled. ``stop()`` cancels them and blocks until every monitor is
/// stopped, so that the loop's thread closes the watched sockets only after.
final class HandshakeMonitorWatch: Sendable {
    private let tasks: [Task<Void, Never>]
    private let stopped: DispatchSemaphore

    init(_ monitors: [SocketMonitor], deliver: @escaping @Sendable (_ monitor: Int, MonitorEvent) -> Void) {
        let stopped = DispatchSemaphore(value: 0)
        self.stopped = stopped
        tasks = monitors.enumerated().map { index, monitor in
            let owned = OwnedMonitor(monitor)
            return Task { [stopped] in
                defer {
                    owned.monitor.stop()
                    stopped.signal()
                }
                while !Task.isCancelled {
                    do {
                        if let event = try await owned.monitor.next(timeout: .seconds(3_600)) { deliver(index, event) }
                    } catch {
                        return  // cancelled, or the context is gone
                    }
                }
            }
        }
    }

    /// Cancels the tasks and returns once each has stopped its monitor.
    func stop() {
        for task in tasks { task.cancel() }
        for _ in tasks { stopped.wait() }
    }
}

/// A monitor handed from the thread that made it to the one task that uses it from then on.
private struct OwnedMonitor: @unchecked Sendable {
    let monitor: SocketMonitor
    init(_ monitor: SocketMonitor) { self.monitor = monitor }
}
