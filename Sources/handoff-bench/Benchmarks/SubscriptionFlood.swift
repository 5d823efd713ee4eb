import Foundation
import Handoff
import ZeroMQ

// `handoff-bench subscription-flood`: a member floods a real `handoff broker`'s backend with
// distinct subscriptions (an XSUB sending random topics as fast as libzmq takes them), once
// steadily and once reconnecting every 100 ms (an XSUB sends every subscription it holds again, at
// once, on each reconnection). The broker's resident memory is sampled from /proc throughout. The
// baseline, in the same run, is the same broker with its subscription bounds raised out of reach:
// what libzmq keeps when nothing cuts the flooder off (docs/operations.md, "What a subscriber's
// subscriptions cost").

/// What one flood did to one broker.
private struct FloodFigures {
    var atRest = 0, peak = 0, after = 0
    var cuts = 0
    var seconds = 0.0
}

/// Floods a fresh broker started with `arguments` with `count` distinct subscriptions of
/// `length` bytes; the flooder reconnects after `reconnectMilliseconds` when cut.
private func flood(_ arguments: [String], count: Int, length: Int, reconnectMilliseconds: Int32) throws -> FloodFigures {
    let context = try Context()
    let (frontend, backend) = (try freeEndpoint(context), try freeEndpoint(context))
    let broker = try startHandoff(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"] + arguments,
                                  output: FileHandle.nullDevice)
    defer { kill(broker.processIdentifier, SIGKILL); broker.waitUntilExit() }
    Thread.sleep(forTimeInterval: 1.5)
    var figures = FloodFigures()
    figures.atRest = ProcessSampler.read(broker.processIdentifier)?.resident ?? 0
    let sampler = ProcessSampler(pid: broker.processIdentifier)
    defer { sampler.stop() }

    let flooder = try context.socket(.xsub)
    defer { flooder.close() }
    try flooder.set(.sendHighWaterMark, 0)
    try flooder.set(.linger, 0)
    try flooder.set(.reconnectInterval, reconnectMilliseconds)
    let monitor = try flooder.monitor([.disconnected])
    defer { monitor.stop() }
    try flooder.connect(backend)
    Thread.sleep(forTimeInterval: 0.3)
    var generator = SystemRandomNumberGenerator()
    let started = ContinuousClock.now
    var subscription = [UInt8](repeating: 1, count: 1 + length)
    for _ in 0..<count {
        for index in 1...length { subscription[index] = UInt8.random(in: 0x21...0x7e, using: &generator) }
        try flooder.send(subscription)
    }
    figures.seconds = seconds(ContinuousClock.now - started)
    Thread.sleep(forTimeInterval: 3)
    var frames = 0
    while (try? monitor.socket.tryReceive()) != nil { frames += 1 }
    figures.cuts = frames / 2  // (each event is two frames)
    figures.peak = sampler.takePeaks().resident
    figures.after = ProcessSampler.read(broker.processIdentifier)?.resident ?? 0
    return figures
}

func benchSubscriptionFlood(count: Int, length: Int) throws {
    let unbounded = ["--max-subscriptions-per-connection", "1000000000", "--max-subscription-kib-per-connection", "1000000000"]
    func mib(_ bytes: Int) -> String { String(format: "%.0f MiB", Double(bytes) / 1_048_576) }
    print("Subscription flood: \(count) distinct subscriptions of \(length) bytes at a real broker's backend, its peak RSS from /proc")
    for (name, reconnect) in [("steady", Int32(60_000)), ("reconnecting (100 ms)", 100)] {
        let bounded = try flood([], count: count, length: length, reconnectMilliseconds: reconnect)
        let raw = try flood(unbounded, count: count, length: length, reconnectMilliseconds: reconnect)
        row("\(name): bounded broker, peak", mib(bounded.peak),
            "at rest \(mib(bounded.atRest)), after \(mib(bounded.after)); cut \(bounded.cuts) times; sent in \(String(format: "%.1f", bounded.seconds)) s")
        row("\(name): bounds out of reach, peak", mib(raw.peak),
            "at rest \(mib(raw.atRest)), after \(mib(raw.after)); cut \(raw.cuts) times; sent in \(String(format: "%.1f", raw.seconds)) s")
        let grown = Double(bounded.peak - bounded.atRest), rawGrown = Double(raw.peak - raw.atRest)
        let ratio = rawGrown > 0 ? grown / rawGrown : 0
        // What libzmq keeps at the bound (1 MiB of topic, about 35 MiB), plus what it takes in
        // before the broker reads the subscription past it, is the most one flooder may cost.
        compare("subscription flood (\(name)): broker's growth", handoff: mib(Int(grown)), baseline: "no bound", mib(Int(rawGrown)),
                ratio: String(format: "%.2f×", ratio), target: "≤ 128 MiB", met: grown <= 128 * 1_048_576)
    }
}
