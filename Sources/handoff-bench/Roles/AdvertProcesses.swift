import CRawBaselines
import Foundation
import Handoff
import ZeroMQ

// Advertisements with the broker in a process of its own, as deployments run it, beside the raw
// proxy in a process of its own: the publishing and the subscribing ends stay in the benchmark's
// process (both nodes on its loop; the raw PUB and SUB interleaved on one thread, as in the
// one-process baseline), so the two runs differ from the one-process ones by where the broker runs.

/// A broker (Handoff's, or the raw zmq_proxy) running in a child process.
struct BrokerProcess {
    let child: Child
    let frontend: String
    let backend: String

    /// Starts `advert-broker` or `raw-proxy` and waits for its endpoints.
    static func start(raw: Bool) throws -> BrokerProcess {
        let child = try Child([raw ? "raw-proxy" : "advert-broker"])
        let ready = try child.line(startingWith: "READY")  // READY frontend backend
        guard ready.count == 3 else { throw HandoffError(.handoffFailed, "the broker process said \(ready.joined(separator: " "))") }
        return BrokerProcess(child: child, frontend: ready[1], backend: ready[2])
    }

    /// CPU seconds the process's threads have run so far, to the nanosecond (their schedstat):
    /// /proc's stat counts 10 ms ticks, half a microsecond per message of a 20,000-message flood,
    /// about a fifth of what a broker spends on it. (Its threads live as long as it does.)
    var usedCPUSeconds: Double { threadUsage(child.process.processIdentifier).cpu }

    func stop() {
        child.closeInput()
        child.wait()
    }
}

/// One raw trial against a proxy process: seconds and CPU seconds of both processes over the flood,
/// then `probes` messages one at a time (one-way microseconds each).
func rawAdvertsThroughProxyProcess(
    count: Int, size: Int, probes: Int = 0
) throws -> (seconds: Double, cpu: Double, latencies: [Double], proxyCPU: Double) {
    let proxy = try BrokerProcess.start(raw: true)
    defer { proxy.stop() }
    var seconds = 0.0, cpu = 0.0
    var latencies = [Double](repeating: 0, count: 200)
    let proxyStarted = proxy.usedCPUSeconds
    guard raw_pub_proxy_sub_at(proxy.frontend, proxy.backend, Int32(count), size, &seconds, &cpu, &latencies, 200) == 0 else {
        throw HandoffError(.handoffFailed, "raw pub/sub through a proxy process failed")
    }
    let proxyCPU = proxy.usedCPUSeconds - proxyStarted
    let flood = (seconds, cpu + proxyCPU)
    var oneAtATime = [Double](repeating: 0, count: probes)
    guard probes == 0 || raw_pub_proxy_sub_latency_at(proxy.frontend, proxy.backend, Int32(probes), size, &oneAtATime) == 0 else {
        throw HandoffError(.handoffFailed, "raw one-at-a-time pub/sub through a proxy process failed")
    }
    return (flood.0, flood.1, oneAtATime, proxyCPU)
}

/// The raw proxy in a process of its own, fed `count` messages paced at `rate` a second (Handoff's
/// rate in the trial beside it): its CPU seconds over them, for the broker's own share at the same
/// rate. A flood lets a proxy take messages in batches; a node sending one after another does not.
func rawProxyCPUPaced(count: Int, size: Int, rate: Double) throws -> Double {
    let proxy = try BrokerProcess.start(raw: true)
    defer { proxy.stop() }
    var seconds = 0.0
    let started = proxy.usedCPUSeconds
    guard raw_pub_proxy_sub_paced_at(proxy.frontend, proxy.backend, Int32(count), size, rate, &seconds) == 0 else {
        throw HandoffError(.handoffFailed, "raw pub/sub through a proxy process, paced, failed")
    }
    return proxy.usedCPUSeconds - started
}

/// One Handoff trial against a broker process (``handoffAdverts(count:batch:brokerAt:otherCPU:)``),
/// its CPU seconds being both processes' over the flood (and the broker's alone), and its 200
/// one-at-a-time latencies.
func handoffAdvertsThroughBrokerProcess(count: Int) async throws -> (seconds: Double, cpu: Double, latencies: [Double], brokerCPU: Double) {
    let broker = try BrokerProcess.start(raw: false)
    defer { broker.stop() }
    // The broker's CPU as read at the flood's start and at its end.
    var readings: [Double] = []
    let run = try await handoffAdverts(count: count, brokerAt: (broker.frontend, broker.backend)) {
        let used = broker.usedCPUSeconds
        readings.append(used)
        return used
    }
    return (run.seconds, run.cpu, run.latencies, (readings.last ?? 0) - (readings.first ?? 0))
}

/// `advert-broker`: a Handoff broker (the benchmark's quotas) on loopback; says `READY frontend
/// backend` and forwards until its standard input closes.
func runAdvertBroker() async throws {
    // As `handoff broker` runs it.
    try await Broker.withRunning(benchBrokerConfiguration(), context: try Context(ioThreadScheduling: .batch)) { broker in
        tell("READY \(broker.frontendEndpoint) \(broker.backendEndpoint)")
        await untilStandardInputCloses()
    }
}

/// `raw-proxy [--curve-secret Z85]`: the raw baseline's XSUB/XPUB zmq_proxy on loopback (with the
/// secret key, both sockets CURVE servers that take any client); says `READY frontend backend` and
/// forwards until its standard input closes.
func runRawProxy(_ arguments: [String] = []) async {
    var frontend = [CChar](repeating: 0, count: 256), backend = [CChar](repeating: 0, count: 256)
    let proxy = raw_proxy_start_curve(&frontend, &backend, 256, stringOption("--curve-secret", in: arguments))
    tell("READY \(cText(frontend)) \(cText(backend))")
    await untilStandardInputCloses()
    raw_proxy_stop(proxy)
}
