import CRawBaselines
import Foundation
import Handoff

// Continue round trips with each end in a process of its own, as users run them, beside raw REQ/REP
// between two processes: each process has its own libzmq context (its own I/O thread), its own
// readiness thread and its own share of Swift's pool, as a deployment does.

/// The edit-contact activity's state, as the in-process bench sends it.
let benchContactInfo: [String: UserInfoValue] = [
    "contactID": "c-42", "firstName": "Ada", "lastName": "Lovelace",
    "phoneNumber": "+44 20 7946 0000", "email": "ada@example.org",
]

/// p50 and p99 of one run of round trips, in microseconds, and the CPU the asking process spent
/// per round trip (every thread of it, µs): polling for a reply trades CPU for latency, and a run
/// shows both.
struct RoundTrips {
    var p50: Double
    var p99: Double
    var askerCPU: Double

    /// From a role's `DONE p50 p99` and `CPU name µs name µs …` lines.
    init(done: [String], cpu: [String], role: String) throws {
        guard done.count >= 3, let p50 = Double(done[1]), let p99 = Double(done[2]) else {
            throw HandoffError(.handoffFailed, "\(role) reported \(done.joined(separator: " "))")
        }
        self.p50 = p50
        self.p99 = p99
        // Every second word after `CPU` is a thread's microseconds.
        askerCPU = stride(from: 2, to: cpu.count, by: 2).compactMap { Double(cpu[$0]) }.reduce(0, +)
    }
}

/// Continue round trips between an originator process and a continuer process (direct bus on
/// loopback): the continuer's p50 and p99 over `rounds`, after 200 of warm-up.
func continueBetweenProcesses(rounds: Int, placement: Placement = .free) throws -> RoundTrips {
    let originator = try Child(["continue-originator"], cpu: placement.serving)
    let ready = try originator.line(startingWith: "READY")  // READY endpoint id
    let continuer = try Child(["continue-continuer", "--peer", ready[1], "--id", ready[2], "--rounds", "\(rounds)"], cpu: placement.asking)
    let done = try continuer.line(startingWith: "DONE", within: .seconds(120))  // DONE p50 p99
    let cpu = try continuer.line(startingWith: "CPU")
    continuer.wait()
    originator.closeInput()
    originator.wait()
    return try RoundTrips(done: done, cpu: cpu, role: "the continuer")
}

/// Raw REQ/REP with 256-byte messages between two processes: the REQ's p50 and p99 over `rounds`,
/// after 200 of warm-up.
func rawRequestReplyBetweenProcesses(rounds: Int, placement: Placement = .free) throws -> RoundTrips {
    let server = try Child(["raw-rep-server", "--rounds", "\(rounds + 200)"], cpu: placement.serving)
    let ready = try server.line(startingWith: "READY")  // READY endpoint
    let client = try Child(["raw-req-client", "--peer", ready[1], "--rounds", "\(rounds)"], cpu: placement.asking)
    let done = try client.line(startingWith: "DONE", within: .seconds(120))  // DONE p50 p99
    let cpu = try client.line(startingWith: "CPU")
    client.wait()
    server.wait()
    return try RoundTrips(done: done, cpu: cpu, role: "raw REQ/REP between processes")
}

/// `continue-originator`: advertises the edit-contact activity, says `READY endpoint id`, and
/// answers continue requests until its standard input closes.
func runContinueOriginator(_ arguments: [String]) async throws {
    try await Node.withRunning(pairConfiguration("originator", peers: [])) { node in
        let activity = try UserActivity(activityType: "org.handoff.contacts.edit-contact")
        activity.userInfo = benchContactInfo
        try await activity.becomeCurrent(on: node)
        tell("READY \(node.busEndpoint!) \(activity.id)")
        await untilStandardInputCloses()
    }
}

/// `continue-continuer`: continues the activity `--id` of the node at `--peer` 200 times to warm
/// up, then `--rounds` times measured; says `DONE p50 p99` in microseconds.
func runContinueContinuer(_ arguments: [String]) async throws {
    guard let peer = stringOption("--peer", in: arguments), let id = stringOption("--id", in: arguments) else {
        throw HandoffError(.invalidConfiguration, "continue-continuer needs --peer and --id")
    }
    let rounds = intOption("--rounds", 5000, in: arguments)
    try await Node.withRunning(pairConfiguration("continuer", peers: [peer])) { node in
        await node.setContinuationHandler(forType: "org.handoff.contacts.edit-contact") { _ in }
        try await timedContinues(of: try await waitFor(id, on: node), by: node, rounds: rounds).report()
    }
}

/// `continue-pair`: both ends in this one process, as `handoff-bench continue` measures them first
/// (for perf tools that attach to one process); says `DONE p50 p99` in microseconds, then `CPU`
/// and each thread's CPU microseconds per measured round trip.
func runContinuePair(_ arguments: [String]) async throws {
    try await continueInOneProcess(rounds: intOption("--rounds", 5000, in: arguments)).report()
}

/// `raw-rep-server`: binds a raw REP on loopback, says `READY endpoint`, and echoes `--rounds` requests.
func runRawReplyServer(_ arguments: [String]) {
    let server = bindAndAnnounce(host: "127.0.0.1") { raw_rep_bind($0, $1, $2) }
    raw_rep_serve(server, Int32(intOption("--rounds", 5200, in: arguments)))
}

/// `raw-req-client`: 200 warm-up round trips and `--rounds` measured ones of 256 bytes with the
/// REP at `--peer`; says `DONE p50 p99` in microseconds, or `DONE failed`.
func runRawRequestClient(_ arguments: [String]) {
    let rounds = intOption("--rounds", 5000, in: arguments)
    let peer = stringOption("--peer", in: arguments) ?? ""
    var all = [Double](repeating: 0, count: rounds + 200)
    // The whole process's CPU (its context's I/O thread ends within the call), warm-up included.
    let before = processCPUSeconds()
    guard raw_req_fetch(peer, Int32(rounds + 200), 256, &all) == 0 else {
        tell("DONE failed")
        return
    }
    let cpu = (processCPUSeconds() - before) * 1e6 / Double(rounds + 200)
    let measured = Array(all.dropFirst(200))
    tell(String(format: "DONE %.1f %.1f", percentile(measured, 0.5), percentile(measured, 0.99)))
    tell(String(format: "CPU process %.2f", cpu))
}
