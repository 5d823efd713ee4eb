import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

/// Sends one command to an agent's control socket and returns its reply (an error reply throws).
func askAgent(_ endpoint: String, timeout: Duration = .seconds(60), _ command: WireControlRequest.OneOf_Command) async throws -> WireControlReply {
    var request = WireControlRequest()
    request.protocolVersion = WireProtocol.version
    request.command = command
    let context = try Context()
    let socket = try context.socket(.req)
    // The request goes only over a live connection: where no agent listens (never started, or
    // killed and its ipc socket file left behind) that is said within a couple of seconds, not at
    // the end of the whole reply timeout.
    try socket.set(.immediate, true)
    // An agent killed after the request went out closes the connection, and REQ would wait out
    // the whole timeout for a reply that cannot come (a restarted agent never saw the request).
    let monitor = try socket.monitor([.disconnected])
    defer { monitor.stop() }
    try socket.connect(endpoint)
    let connectTimeout = min(timeout, .seconds(2))
    guard let ready = try? await socket.waitUntilReady(for: .writable, timeout: connectTimeout), ready.contains(.writable) else {
        throw HandoffError(.connectionUnavailable, "no agent answers at \(endpoint) (no connection within \(connectTimeout)): is `handoff agent` running there?")
    }
    // Only a disconnection after the request went out loses it: one before (a connection that
    // came up, dropped and came up again meanwhile) is passed over.
    while try await monitor.next(timeout: .zero) != nil {}
    try await socket.send(try request.serializedBytes() as [UInt8])
    let deadline = ContinuousClock.now + timeout
    while true {
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero else {
            throw HandoffError(.remoteApplicationTimedOut, "the agent at \(endpoint) did not answer within \(timeout): is `handoff agent` running there?")
        }
        if let frame = try await socket.receive(timeout: min(remaining, agentDisconnectionCheck)) {
            let reply = try WireControlReply(serializedBytes: frame.data)
            if reply.hasError { throw HandoffError(controlReply: reply.error) }
            return reply
        }
        if try await monitor.next(matching: [.disconnected], timeout: .zero) != nil {
            throw HandoffError(.peerLost, "the agent at \(endpoint) went away before it answered (its connection closed): the command may or may not have been carried out")
        }
    }
}

extension HandoffError {
    /// An agent's error, as ``wireForControl`` sent it: a local code (plugin failed, say) came as
    /// handoff failed with its number in `details["code"]`, and is itself again here.
    init(controlReply wire: WireError) {
        let received = HandoffError(wire: wire)
        guard received.code == .handoffFailed, let number = received.details["code"].flatMap(Int.init), number >= 1_000 else {
            self = received
            return
        }
        self.init(Code(rawValue: number), received.message, activityType: received.activityType,
                  details: received.details.filter { $0.key != "code" })
    }
}

/// How often a command waiting for its agent's reply looks whether the connection closed.
private let agentDisconnectionCheck = Duration.milliseconds(100)
