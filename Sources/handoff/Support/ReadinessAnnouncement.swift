import ServiceLifecycle

/// Says that the process is ready (the line scripts wait for, systemd's READY=1) once its service
/// group runs. By then the group traps SIGTERM and SIGINT, so a stop sent on seeing the line is a
/// graceful one. Said before the group ran, the line left a moment in which a SIGTERM took the
/// signal's default action and killed the process (StopOnReadyTests: a broker sent SIGTERM on
/// seeing its line died of it in the first round).
struct ReadinessAnnouncement: Service {
    let announce: @Sendable () -> Void

    func run() async throws {
        announce()
        // A service that returns early would end the group: it waits for the shutdown like the others.
        try? await gracefulShutdown()
    }
}
