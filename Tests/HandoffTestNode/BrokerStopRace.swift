import Foundation
import Handoff
import Synchronization
import ZeroMQ

/// `HandoffTestNode broker-stop-race <rounds>`: stops a broker while a subscriber that has stopped
/// reading drops its connection, round after round, and says `NO ABORT <rounds>` if the process
/// lived through them (libzmq 4.3.4 aborts it otherwise: docs/operations.md, "Stopping under load").
///
/// Each round: a broker in this process; a publisher flooding two-frame messages through it; a
/// subscriber in a context of its own (as another process's would be) that reads nothing, so the
/// broker's connection to it fills and its sender stops partway through a message. Then the
/// subscriber closes and the broker stops at once. The topic frame is long (4,000 bytes) so that
/// the sender mostly stops inside a topic, with its envelope still queued: the state libzmq's
/// close mishandles, which the bus's short topics reach too, only less often.
func brokerStopRace(rounds: Int) async throws {
    let topic = [UInt8]("A:".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 3_998)
    let envelope = [UInt8](repeating: 7, count: 16)
    for _ in 0..<rounds {
        let brokerContext = try Context()
        let broker = try Broker.start(.init(frontend: "tcp://127.0.0.1:*", backend: "tcp://127.0.0.1:*"), context: brokerContext)
        let peers = try Context()
        let subscriber = try peers.socket(.sub)
        try subscriber.set(.linger, 0)
        try subscriber.subscribe("A")
        try subscriber.connect(broker.backendEndpoint)
        let flooder = Flooder(context: peers, endpoint: broker.frontendEndpoint, frames: (topic, envelope))
        // Long enough for the subscription to reach the publisher and every queue on the way to
        // the subscriber to fill.
        try await Task.sleep(for: .milliseconds(300))
        subscriber.close()
        await broker.stop()
        flooder.stop()
    }
    announce("NO ABORT \(rounds)")
}

/// A thread that owns a PUB socket and sends the same two frames until stopped.
private final class Flooder: Sendable {
    private let running = Atomic(true)
    private let finished = DispatchSemaphore(value: 0)

    init(context: Context, endpoint: String, frames: ([UInt8], [UInt8])) {
        Thread { [self] in
            defer { finished.signal() }
            guard let publisher = try? context.socket(.pub) else { return }
            defer { publisher.close() }
            // Its own close must not meet the same abort: a linger lets it close cleanly.
            try? publisher.set(.linger, 100)
            try? publisher.set(.sendHighWaterMark, 0)
            guard (try? publisher.connect(endpoint)) != nil else { return }
            while running.load(ordering: .relaxed) {
                _ = try? publisher.trySend(frames.0, more: true)
                _ = try? publisher.trySend(frames.1)
            }
        }.start()
    }

    /// Stops the flood and waits until the thread has closed its socket.
    func stop() {
        running.store(false, ordering: .relaxed)
        finished.wait()
    }
}
