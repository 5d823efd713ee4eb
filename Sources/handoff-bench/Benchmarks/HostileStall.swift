import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import ZeroMQ

// `handoff-bench stall`: how soon an agent with a stream stall timeout
// (`handoff agent --stream-stall-timeout`) frees the pairs of peers that keep them alive — a
// keep-alive every 250 ms — and never acknowledge what it wrote, against the same agent without
// one, where such pairs stay as long as their peers answer (slow is not dead). Real processes on
// loopback, as `handoff-bench hostile`; a legitimate `handoff continue --save` must succeed meanwhile.

/// What one agent did with `pairs` pairs kept alive and never read.
struct StallRun {
    /// Seconds from the opens to each pair's error, in the order they came.
    var freedAfter: [Double] = []
    /// The pairs the agent ended for stalling (`details["scope"] == "stalled"`).
    var stalled = 0
    var otherErrors: [String] = []
    var legitimate: (seconds: Double, contacts: Int, error: String) = (0, 0, "")
}

/// Opens `pairs` pairs on the agent of `scenario`, each from a node id of its own (the per-peer limit
/// holds one id to 4; without CURVE an id is only a claim), one way from the agent with a
/// one-chunk window, and keeps them alive for `watch`, reading nothing; returns what came back.
func keepPairsAliveUnread(_ scenario: HostileAgent, context: Context, pairs: Int, watch: Duration) async throws -> StallRun {
    var peer = try HostilePeer(context: context, endpoint: scenario.endpoint)
    defer { peer.dealer.close() }
    for index in 1...pairs {
        var open = WireStreamOpen()
        open.activityID = scenario.activityID
        open.direction = .originToContinuer
        open.window = 1
        open.chunkSize = 256 * 1024
        try await peer.send(.open(open), stream: UInt64(index), nodeID: "keeper-\(index)")
    }
    let opened = ContinuousClock.now
    var run = StallRun()
    var ended = Set<UInt64>()
    var lastKeepAlive = opened - .seconds(1)
    while ended.count < pairs, ContinuousClock.now - opened < watch {
        if ContinuousClock.now - lastKeepAlive >= .milliseconds(250) {
            lastKeepAlive = ContinuousClock.now
            for index in 1...pairs where !ended.contains(UInt64(index)) {
                try await peer.send(.credit(WireStreamCredit()), stream: UInt64(index), nodeID: "keeper-\(index)")
            }
        }
        while let (streamID, error) = try await peer.nextError(within: .milliseconds(20)) {
            guard ended.insert(streamID).inserted else { continue }
            run.freedAfter.append(seconds(ContinuousClock.now - opened))
            if error.code == .remoteApplicationTimedOut, error.details["scope"] == "stalled" {
                run.stalled += 1
            } else {
                run.otherErrors.append("\(error.code): \(error.message)")
            }
        }
    }
    run.legitimate = try scenario.legitimateContinue()
    return run
}

func benchStall(pairs: Int, stallSeconds: Double, contacts: Int) async throws {
    let context = try Context(maxSockets: pairs + 64)
    let watch = Duration.milliseconds(Int((stallSeconds * 3 + 2) * 1000))
    tell("peers that keep \(pairs) stream pairs alive (a keep-alive every 250 ms) and never read, against `handoff agent` (contacts plugin, \(contacts) contacts: one chunk), real processes on loopback; watched \(watch)")
    var failures: [String] = []
    var runs: [(label: String, run: StallRun)] = []
    for timeout in [stallSeconds, 0] {
        let scenario = try await HostileAgent.start(
            contacts: contacts, context: context, agentArguments: timeout > 0 ? ["--stream-stall-timeout", "\(timeout)"] : [])
        defer { scenario.stop() }
        let run = try await keepPairsAliveUnread(scenario, context: context, pairs: pairs, watch: watch)
        runs.append((timeout > 0 ? String(format: "--stream-stall-timeout %g", timeout) : "no stall timeout", run))
        if run.legitimate.contacts != contacts {
            failures.append("\(runs.last!.label): a legitimate continue got \(run.legitimate.contacts) of \(contacts) contacts: \(run.legitimate.error)")
        }
        if !run.otherErrors.isEmpty { failures.append("\(runs.last!.label): pairs ended otherwise: \(run.otherErrors.prefix(3))") }
    }
    row("", "pairs freed", "after (s): min / median / max; legitimate continue --save meanwhile")
    for (label, run) in runs {
        let times = run.freedAfter.sorted()
        let spread = times.isEmpty ? "none" : String(format: "%.2f / %.2f / %.2f", times.first!, median(times), times.last!)
        row(label, "\(run.freedAfter.count) of \(pairs)", String(format: "%@; %.3f s, %d contacts", spread, run.legitimate.seconds, run.legitimate.contacts))
    }
    let (with, without) = (runs[0].run, runs[1].run)
    if with.stalled != pairs { failures.append("with the stall timeout, \(with.stalled) of \(pairs) pairs were given up on for stalling") }
    if !without.freedAfter.isEmpty { failures.append("without a stall timeout, \(without.freedAfter.count) pairs whose peer answered were ended") }
    if !with.freedAfter.isEmpty {
        let slowest = with.freedAfter.max()!
        compare("pairs kept alive, never read: freed after (s, slowest)", handoff: String(format: "%.2f", slowest),
                baseline: "the stall timeout", String(format: "%g", stallSeconds), ratio: String(format: "%.2f x", slowest / stallSeconds),
                target: "≤ timeout + 1 s", met: slowest <= stallSeconds + 1)
    }
    for failure in failures { tell("  FAILED: \(failure)") }
    if !failures.isEmpty { exit(1) }
}
