import Foundation
import Glibc
@testable import Handoff
import Testing
import ZeroMQ
import HandoffTestSupport

/// The log lines of a process so far (its standard error, written to `file`).
private func logLines(_ file: URL) -> [String] {
    ((try? String(contentsOf: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
}

/// A peer that speaks ZMTP 3.0 without CURVE, by hand: it sends the whole greeting of the NULL
/// mechanism at once, as soon as it connects, and waits for the server to hang up (at most
/// `timeout`). libzmq's own NULL client sends its mechanism only after the server's version
/// arrives, and hangs up as soon as it reads the server's CURVE: about 4 connections in 10 on
/// loopback it hangs up before the server has its mechanism, and the server can only tell that the
/// peer left mid-handshake (`handshake_incomplete`). This one always lets the server see the
/// mismatch.
private func knockWithoutCurve(at endpoint: String, timeout: Duration = .seconds(3)) throws {
    let fd = try connectRawTCP(to: endpoint)
    defer { close(fd) }
    var wait = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    try sendRaw(zmtpGreeting(mechanism: "NULL"), on: fd)
    var buffer = [UInt8](repeating: 0, count: 256)
    while recv(fd, &buffer, buffer.count, 0) > 0 {}  // until the server hangs up (or the timeout)
}

/// Peers that knock at a secure server and are refused, each for its own reason; from a context of
/// their own, as another process's would be. libzmq reconnects the impostor ten times a second (the
/// server just hangs up on it), so its refusals keep coming while it is open; the others mostly
/// give up once told why.
private final class Intruders {
    private let context: Context
    private var sockets: [Socket] = []

    init() throws { context = try Context() }

    /// At `endpoint`, whose CURVE public key is `serverKey`: a DEALER without CURVE (refused as
    /// such, or as a handshake left incomplete, see ``knockWithoutCurve(at:timeout:)``), one with
    /// `member`'s public key but another secret key, and one with a key of its own (a stranger's).
    func knock(at endpoint: String, serverKey: CurveKey, member: CurveKey) throws {
        let plain = try context.socket(.dealer)
        let impostor = try context.socket(.dealer)
        try impostor.makeCurveClient(CurveKeyPair(publicKey: member, secretKey: try CurveKeyPair.generate().secretKey), serverKey: serverKey)
        let stranger = try context.socket(.dealer)
        try stranger.makeCurveClient(try CurveKeyPair.generate(), serverKey: serverKey)
        for socket in [plain, impostor, stranger] {
            try socket.set(.linger, 0)
            try socket.connect(endpoint)
            sockets.append(socket)
        }
    }

    /// At `endpoint`: a DEALER with a member's whole key pair, let in.
    func welcome(at endpoint: String, serverKey: CurveKey, member: CurveKeyPair) throws {
        let welcomed = try context.socket(.dealer)
        try welcomed.makeCurveClient(member, serverKey: serverKey)
        try welcomed.set(.linger, 0)
        try welcomed.connect(endpoint)
        sockets.append(welcomed)
    }

    func leave() {
        for socket in sockets { socket.close() }
        sockets.removeAll()
    }
}

@Suite("Refused handshakes: counted by reason and logged per peer address", .exclusive, .serialized)
struct HandshakeRefusalTests {
    @Test("a secure broker and agent (processes) count every refused handshake by reason in /metrics, and log each reason once per peer address: no CURVE, a key not in the account, a member's key without its secret")
    func refusalsByReason() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("refusals-\(UUID().uuidString)")
        let keys = folder.appendingPathComponent("keys"), account = folder.appendingPathComponent("account")
        try FileManager.default.createDirectory(at: account, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let broker = try KeyFile.generate(name: "broker", in: keys)
        let member = try KeyFile.generate(name: "a", in: keys)
        for made in [broker, member] {
            try FileManager.default.copyItem(at: made.public, to: account.appendingPathComponent(made.public.lastPathComponent))
        }
        let frontend = try freePort(), backend = try freePort(), continuation = try freePort()
        let brokerLog = folder.appendingPathComponent("broker.log"), agentLog = folder.appendingPathComponent("agent.log")
        let (brokerProcess, brokerPort) = try await startServingMetrics(
            ["broker", "--frontend", frontend, "--backend", backend, "--key", broker.secret.path, "--account", account.path],
            log: brokerLog)
        defer { reap(brokerProcess) }
        let (agentProcess, agentPort) = try await startServingMetrics(
            ["agent", "--name", "a", "--broker", frontend, backend, "--key", member.secret.path, "--account", account.path,
             "--broker-key", broker.public.path, "--plugins", buildFolder.path, "--data", folder.appendingPathComponent("data").path,
             "--control", "ipc://\(folder.path)/control.sock", "--continuation", continuation],
            log: agentLog)
        defer { reap(agentProcess) }
        // The agent is on the bus: its own handshakes with the broker passed.
        for port in [brokerPort, agentPort] {
            #expect(await eventually(within: .seconds(15)) { healthStatus(port) == 200 }, "port \(port): /healthz never answered 200")
        }

        let intruders = try Intruders()
        defer { intruders.leave() }
        try intruders.knock(at: frontend, serverKey: broker.keyPair.publicKey, member: member.keyPair.publicKey)
        try intruders.knock(at: continuation, serverKey: member.keyPair.publicKey, member: member.keyPair.publicKey)
        try knockWithoutCurve(at: frontend)
        try knockWithoutCurve(at: continuation)
        // A member with its whole key pair is let in at the agent's continuation socket.
        try intruders.welcome(at: continuation, serverKey: member.keyPair.publicKey, member: member.keyPair)

        let reasons: [HandshakeRefusals.Reason] = [.noCurve, .keyNotInAccount, .keyNotProven]
        for (what, port, family, log) in [("broker", brokerPort, "handoff_broker_refusals_total", brokerLog),
                                          ("agent", agentPort, "handoff_node_refusals_total", agentLog)] {
            func count(_ reason: HandshakeRefusals.Reason) -> Double {
                let body = (try? httpGet(port: port, path: "/metrics").body) ?? ""
                return metricValue(body, "\(family){reason=\"\(reason.label)\"}") ?? 0
            }
            // The handshakes let in: the agent's at the broker, the member's at the agent.
            let allowedFamily = what == "broker" ? "handoff_broker_handshakes_allowed_total" : "handoff_node_handshakes_allowed_total"
            func allowed() -> Double { metricValue((try? httpGet(port: port, path: "/metrics").body) ?? "", allowedFamily) ?? 0 }
            #expect(await eventually(within: .seconds(10)) { allowed() >= 1 }, "\(what): \(allowedFamily) is \(allowed())")
            // The impostor is refused again at each reconnection.
            for reason in reasons {
                let least: Double = reason == .keyNotProven ? 3 : 1
                #expect(await eventually(within: .seconds(10)) { count(reason) >= least },
                        "\(what): \(reason.label) is \(count(reason)), expected at least \(least)")
            }
            // Two peers without CURVE: the hand-made one is refused as such; libzmq's DEALER too, or,
            // when it hangs up first, as a handshake left incomplete (its last connection always is).
            #expect(await eventually(within: .seconds(10)) { count(.noCurve) + count(.incomplete) >= 2 },
                    "\(what): no_curve \(count(.noCurve)), incomplete \(count(.incomplete))")
            // Logged once per reason and peer address (or once more where the peer had left before its
            // address was read), however many times it was refused.
            for reason in reasons {
                let lines = logLines(log).filter { $0.contains("refused a handshake") && $0.contains("counted as \(reason.label)") }
                #expect(!lines.isEmpty && lines.count <= 2, "\(what): \(lines.count) lines for \(reason.label): \(lines)")
                if reason != .noCurve {
                    #expect(lines.contains { $0.contains("from 127.0.0.1 ") }, "\(what): no line names the peer: \(lines)")
                }
            }
        }
    }

    @Test("a monitor's handshake failure maps to its reason: mechanism mismatch, cryptographic, other protocol errors, no detail")
    func reasonOfEvent() {
        func reason(_ kind: MonitorEvents, _ value: UInt32) -> HandshakeRefusals.Reason? {
            HandshakeRefusals.Reason(MonitorEvent(kind: kind, value: value, endpoint: "tcp://127.0.0.1:1"))
        }
        #expect(reason(.handshakeFailedProtocol, 0x1100_0002) == .noCurve)
        #expect(reason(.handshakeFailedProtocol, 0x1100_0001) == .keyNotProven)
        #expect(reason(.handshakeFailedProtocol, 0x1000_0014) == .malformed)  // a malformed INITIATE
        #expect(reason(.handshakeFailedNoDetail, 104) == .incomplete)  // ECONNRESET
        #expect(reason(.handshakeFailedAuth, 400) == .keyNotInAccount)
        #expect(reason(.disconnected, 12) == nil)
        var refusals = HandshakeRefusals()
        for each in HandshakeRefusals.Reason.allCases { refusals[each] += 2 }
        #expect(refusals.total == 2 * HandshakeRefusals.Reason.allCases.count)
        #expect(Set(HandshakeRefusals.Reason.allCases.map(\.label)).count == HandshakeRefusals.Reason.allCases.count)
    }

    @Test("the refusal log writes the first refusal of each reason from each address, then one line a minute with the count it skipped")
    func rateLimitedPerAddressAndReason() {
        var log = RefusalLog()
        let start = ContinuousClock.now
        #expect(log.line(.keyNotProven, from: "192.0.2.7", at: "the broker", now: start)?.contains("from 192.0.2.7 at the broker") == true)
        for second in 1...10 {
            #expect(log.line(.keyNotProven, from: "192.0.2.7", at: "the broker", now: start + .seconds(second)) == nil)
        }
        // Another address, and another reason from the same address, are not hidden behind it.
        #expect(log.line(.keyNotProven, from: "192.0.2.8", at: "the broker", now: start + .seconds(5)) != nil)
        #expect(log.line(.noCurve, from: "192.0.2.7", at: "the broker", now: start + .seconds(5)) != nil)
        #expect(log.line(.noCurve, from: nil, at: "the broker", now: start + .seconds(5))?.contains("from an unknown address") == true)
        let later = log.line(.keyNotProven, from: "192.0.2.7", at: "the broker", now: start + .seconds(61))
        #expect(later?.contains("10 more such from this address") == true, "\(later ?? "nil")")
        // A flood of addresses costs a bounded table: the newcomers share one line a minute.
        for index in 0..<(RefusalLog.capacity + 10) {
            _ = log.line(.incomplete, from: "10.0.\(index / 256).\(index % 256)", at: "the broker", now: start + .seconds(62))
        }
        #expect(log.line(.incomplete, from: "203.0.113.1", at: "the broker", now: start + .seconds(62)) == nil)
    }
}
