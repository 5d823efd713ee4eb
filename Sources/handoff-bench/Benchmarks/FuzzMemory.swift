import Foundation
import Handoff
import HandoffFuzz
import ZeroMQ

// `handoff-bench fuzz-memory`: three identical rounds of fuzzed messages (the seeded mutator of
// the test suite, same seed each round) at a real `handoff agent`'s continuation endpoint, its
// resident memory read from /proc after each round. Whatever the first round made the agent keep
// (allocator arenas, libzmq buffers), later rounds must not add to it.

func benchFuzzMemory(inputs perRound: Int, rounds: Int) throws {
    let context = try Context()
    let (frontend, backend, continuation) = (try freeEndpoint(context), try freeEndpoint(context), try freeEndpoint(context))
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-fuzz-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder.appendingPathComponent("plugins"), withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let broker = try startHandoff(["broker", "--frontend", frontend, "--backend", backend, "--log-level", "error"], output: FileHandle.nullDevice)
    let agent = try startHandoff(["agent", "--name", "fuzzed", "--broker", frontend, backend, "--continuation", continuation,
                                  "--plugins", folder.appendingPathComponent("plugins").path, "--data", folder.path,
                                  "--exit-with-parent", "--log-level", "error"], output: FileHandle.nullDevice)
    defer {
        for process in [agent, broker] { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }
    Thread.sleep(forTimeInterval: 2)
    let atRest = ProcessSampler.read(agent.processIdentifier)?.resident ?? 0

    print("Fuzz memory: \(rounds) identical rounds of \(perRound) fuzzed messages at a real agent's continuation endpoint")
    row("agent RSS at rest", String(format: "%.1f MiB", Double(atRest) / 1_048_576))
    var after: [Int] = []
    for round in 1...rounds {
        let dealer = try context.socket(.dealer)
        try dealer.set(.sendTimeout, 5_000)
        try dealer.set(.linger, 0)
        try dealer.connect(continuation)
        var mutator = Mutator(seed: 20_261_123)
        var sent = 0
        for _ in 0..<perRound {
            var frames = [mutator.next()]
            if mutator.int(0..<4) == 0 { frames.append(mutator.next()) }
            do {
                for (index, frame) in frames.enumerated() { try dealer.send(frame, more: index < frames.count - 1) }
                sent += 1
            } catch {
                break  // the agent stopped reading for five seconds: reported below
            }
            while (try? dealer.tryReceive()) != nil {}  // error replies
        }
        Thread.sleep(forTimeInterval: 2)
        while (try? dealer.tryReceive()) != nil {}
        dealer.close()
        let resident = ProcessSampler.read(agent.processIdentifier)?.resident ?? 0
        after.append(resident)
        row("after round \(round)", String(format: "%.1f MiB", Double(resident) / 1_048_576), "\(sent) of \(perRound) sent")
    }
    let growth = Double(after.last! - after.first!) / Double(after.first!)
    row("round \(rounds) against round 1", String(format: "%+.1f %%", growth * 100))
    compare("fuzz memory: RSS after round \(rounds) vs 1", handoff: String(format: "%.1f MiB", Double(after.last!) / 1_048_576),
            baseline: "after round 1", String(format: "%.1f MiB", Double(after.first!) / 1_048_576),
            ratio: String(format: "%+.1f %%", growth * 100), target: "within 10 %", met: abs(growth) <= 0.10)
}
