import Foundation
import Synchronization
import Testing
@testable import ZeroMQ

/// The transports every pattern is tested over.
enum Transport: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case inproc
    case tcp

    var testDescription: String { rawValue }

    /// An endpoint to bind: a unique inproc name, or an ephemeral loopback port.
    func bindEndpoint() -> String {
        switch self {
        case .inproc: "inproc://test-\(UUID().uuidString)"
        case .tcp: "tcp://127.0.0.1:*"
        }
    }

    /// Binds `socket` and returns the endpoint peers connect to (with the real port for tcp).
    func bind(_ socket: Socket) throws -> String {
        try socket.bind(bindEndpoint())
        return try socket.lastEndpoint
    }
}

/// Until a subscriber sees messages, a publisher's sends are dropped (the "slow joiner"):
/// publish `probe` until `subscriber` receives it, then drain the duplicates (probes published
/// while the first was on its way), which a test would take for what it sends next: up to a marker
/// published after them (`probe` + ".drained", which the probe's subscription matches too), which
/// comes after every one of them on the connection. (Draining until 100 ms passed without one let
/// a late copy through when eight such tests ran at once on two cores.) It gives up after 30 s:
/// each try publishes once and waits 20 ms, and a try's wait ends only when its task runs again,
/// which at a parallel pass's start, every test beginning at once, took seconds; 5 s ran out
/// over tcp in CI's parallel pass (2026-12-06, the test process using both CPUs throughout).
func awaitSubscription(publisher: Socket, subscriber: Socket, probe: String) async throws {
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
        try await publisher.send(Array(probe.utf8))
        if let message = try await subscriber.receive(timeout: .milliseconds(20)) {
            #expect(message.string == probe)
            let marker = probe + ".drained"
            try await publisher.send(Array(marker.utf8))
            while let message = try await subscriber.receive(timeout: .seconds(5)), message.string != marker {
                #expect(message.string == probe)
            }
            return
        }
    }
    Issue.record("subscription never propagated")
    throw CancellationError()
}

/// Collects the UTF-8 text of every frame of a multipart message.
func strings(_ frames: [Frame]) -> [String] {
    frames.map { $0.string ?? "<binary \($0.count) bytes>" }
}

/// Runs `body` on a new thread that owns whatever it creates, and returns what it reports through `ready`.
func onThread<T: Sendable>(
    _ body: @escaping @Sendable (_ ready: @escaping @Sendable (T) -> Void) -> Void
) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread {
            let once = Mutex(false)
            body { value in
                let first = once.withLock { fired in
                    defer { fired = true }
                    return !fired
                }
                if first { continuation.resume(returning: value) }
            }
        }
        thread.start()
    }
}

/// A ROUTER bound on loopback and a DEALER connected to it, in a new context: the pair the tests
/// of several waiters on one socket put under one owner.
struct DealerToRouter {
    let context: Context
    let router: Socket
    let dealer: Socket

    init() throws {
        context = try Context()
        router = try context.socket(.router)
        try router.bind("tcp://127.0.0.1:*")
        dealer = try context.socket(.dealer)
        try dealer.connect(try router.lastEndpoint)
    }
}
