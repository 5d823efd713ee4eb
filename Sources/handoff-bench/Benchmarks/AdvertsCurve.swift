import Foundation
import Handoff
import ZeroMQ

/// The keys of a secure bus as `adverts --curve` runs it: the broker's, and one for each node, every
/// one in the others' account.
struct CurveAccount {
    let broker: Security
    let publisher: Security
    let subscriber: Security

    static func generate() throws -> CurveAccount {
        let broker = try CurveKeyPair.generate(), publisher = try CurveKeyPair.generate(), subscriber = try CurveKeyPair.generate()
        let members: Set<CurveKey> = [broker.publicKey, publisher.publicKey, subscriber.publicKey]
        return CurveAccount(
            broker: Security(keyPair: broker, authorizedKeys: members),
            publisher: Security(keyPair: publisher, authorizedKeys: members, brokerKey: broker.publicKey),
            subscriber: Security(keyPair: subscriber, authorizedKeys: members, brokerKey: broker.publicKey))
    }
}

/// `adverts --curve`: what security costs per advertisement. The same trial as `adverts`' Handoff
/// side (a broker and two nodes in this process, `count` advertisements made current one after
/// another until the other node has seen them all), over CURVE with every party's key in the
/// account, and without; interleaved, medians. The CPU is the whole process's: the nodes', the
/// broker's, and libzmq's encryption on its I/O thread.
func benchAdvertsCurve(count: Int, trials: Int) async throws {
    var plain: (seconds: [Double], cpu: [Double]) = ([], []), secure: (seconds: [Double], cpu: [Double]) = ([], [])
    for _ in 0..<trials {
        let run = try await handoffAdverts(count: count)
        plain.seconds.append(run.seconds)
        plain.cpu.append(run.cpu)
        let secureRun = try await handoffAdverts(count: count, curve: try CurveAccount.generate())
        secure.seconds.append(secureRun.seconds)
        secure.cpu.append(secureRun.cpu)
    }
    print("Advertisements through a broker in this process, \(count) per trial, \(trials) trials each, interleaved, median")
    row("", "msg/s", "CPU µs per advertisement")
    for (label, side) in [("Handoff, no CURVE", plain), ("Handoff, CURVE (every party)", secure)] {
        row(label, String(format: "%.0f", Double(count) / median(side.seconds)), String(format: "%.2f", 1e6 * median(side.cpu) / Double(count)))
    }
    row("CURVE / none (CPU)", "", String(format: "%.2f x", median(secure.cpu) / median(plain.cpu)))
}
