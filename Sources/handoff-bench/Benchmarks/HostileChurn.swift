import Foundation
import Handoff
import HandoffWire
import ZeroMQ

// `handoff-bench churn`: one peer that opens a pair on the agent's shared list, waits for the
// answer, fails the pair with an error frame and opens the next, as fast as the agent answers, for
// a while. Each pair is within every limit (one live at a time), and each fails at once, so
// what the agent keeps of failed pairs is what grows: a node keeps them a while so that their late
// frames are dropped quietly, and at most `maxStreams` of them (64 by default). The agent's memory
// is sampled from /proc; a legitimate `handoff continue --save` must still succeed in time after.
// A monitor on the broker counts the node events the churn puts on the bus (two a pair, unless
// the agent holds them back: at most 50 a second about one peer, after a burst of 200).

/// What one churn run saw.
struct ChurnFigures {
    var pairs = 0
    var seconds = 0.0
    var residentBefore = 0, residentPeak = 0, residentAfter = 0
    var agentCPUSeconds = 0.0
}

/// Churns pairs on `activityID` at `endpoint` for `duration`, one at a time.
func churnPairs(context: Context, endpoint: String, activityID: String, agent pid: Int32,
                sampler: ProcessSampler, for duration: Duration) async throws -> ChurnFigures {
    var peer = try HostilePeer(context: context, endpoint: endpoint)
    defer { peer.dealer.close() }
    var figures = ChurnFigures()
    figures.residentBefore = ProcessSampler.read(pid)?.resident ?? 0
    _ = sampler.takePeaks()
    let cpuBefore = cpuSeconds(pid)
    var error = WireError()
    error.code = .streamCancelled
    error.message = "churned"
    let started = ContinuousClock.now
    var stream: UInt64 = 0
    while ContinuousClock.now - started < duration {
        stream += 1
        var open = WireStreamOpen()
        open.activityID = activityID
        open.window = 2
        open.chunkSize = 64 * 1024
        try await peer.send(.open(open), stream: stream, nodeID: "churner")
        guard try await answered(stream, on: peer.dealer, within: .seconds(5)) else {
            throw HandoffError(.remoteApplicationTimedOut, "the agent did not answer open \(stream) within 5 s")
        }
        try await peer.send(.error(error), stream: stream, nodeID: "churner")
        figures.pairs += 1
    }
    figures.seconds = seconds(ContinuousClock.now - started)
    figures.agentCPUSeconds = cpuSeconds(pid) - cpuBefore
    try await Task.sleep(for: .milliseconds(500))  // the last error frames read, the last writers ended
    figures.residentPeak = sampler.takePeaks().resident
    figures.residentAfter = ProcessSampler.read(pid)?.resident ?? 0
    return figures
}

/// Whether pair `stream`'s open is answered on `dealer` within `timeout` (every other frame that
/// arrives meanwhile, chunks of earlier pairs, is read and dropped).
private func answered(_ stream: UInt64, on dealer: Socket, within timeout: Duration) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline, let first = try await dealer.receive(timeout: deadline - ContinuousClock.now) {
        var more = first.hasMore
        while more { more = try await dealer.receive().hasMore }
        guard case .streamFrame(let frame)? = try? WireEnvelope.decode(first.data).body, frame.streamID == stream else { continue }
        switch frame.kind {
        case .open?: return true
        case .error(let refusal)?: throw HandoffError(.handoffFailed, "the agent refused open \(stream): \(refusal.code) \(refusal.message)")
        default: continue
        }
    }
    return false
}

func benchChurn(contacts: Int, duration: Duration) async throws {
    let bounds = HostileBounds()
    let context = try Context()
    let scenario = try await HostileAgent.start(contacts: contacts, context: context)
    defer { scenario.stop() }
    let pid = scenario.agent.processIdentifier
    let sampler = ProcessSampler(pid: pid)
    defer { sampler.stop() }
    let baseline = try scenario.legitimateContinue()
    let monitor = try context.socket(.sub)
    defer { monitor.close() }
    try monitor.set(.receiveHighWaterMark, 0)
    try monitor.subscribe("E:")
    try monitor.connect(scenario.backend)
    try await Task.sleep(for: .milliseconds(500))
    let eventsBefore = try await drainedMessages(monitor)
    tell("a peer that opens and fails pairs one after another against `handoff agent` (contacts plugin, \(contacts) contacts), real processes on loopback")
    let churn = try await churnPairs(context: context, endpoint: scenario.endpoint, activityID: scenario.activityID, agent: pid,
                                     sampler: sampler, for: duration)
    let events = try await drainedMessages(monitor)
    let legit = try scenario.legitimateContinue()
    let growth = max(0, churn.residentPeak - churn.residentBefore)
    tell(String(format: "  %d pairs opened and failed in %.1f s (%.0f a second); the agent's CPU %.1f µs a pair", churn.pairs, churn.seconds,
                Double(churn.pairs) / churn.seconds, churn.agentCPUSeconds * 1e6 / Double(max(churn.pairs, 1))))
    tell(String(format: "  node events the churn put on the bus: %d (%.0f a second; %d before it)", events, Double(events) / churn.seconds, eventsBefore))
    tell("  agent RSS \(mebibytes(churn.residentBefore)) before, peak \(mebibytes(churn.residentPeak)) (+\(mebibytes(growth))), \(mebibytes(churn.residentAfter)) after")
    tell(String(format: "  a legitimate `continue --save`: %.3f s before, %.3f s after (%d of %d contacts)", baseline.seconds, legit.seconds, legit.contacts, contacts))
    var failures: [String] = []
    if growth >= bounds.pushGrowthBytes { failures.append("churning grew the agent by \(mebibytes(growth))") }
    if legit.contacts != contacts { failures.append("after the churn, a legitimate continue got \(legit.contacts) of \(contacts) contacts: \(legit.error)") }
    if legit.seconds >= bounds.continueSeconds { failures.append(String(format: "after the churn, a legitimate continue took %.3f s", legit.seconds)) }
    tell(failures.isEmpty ? "  every bound kept: growth < \(mebibytes(bounds.pushGrowthBytes)), continue < \(bounds.continueSeconds) s"
                          : failures.map { "  FAILED: \($0)" }.joined(separator: "\n"))
    if !failures.isEmpty { exit(1) }
}

/// How many messages `socket` holds, read until none arrives for 200 ms.
private func drainedMessages(_ socket: Socket) async throws -> Int {
    var count = 0
    while let first = try await socket.receive(timeout: .milliseconds(200)) {
        var more = first.hasMore
        while more { more = try await socket.receive().hasMore }
        count += 1
    }
    return count
}
