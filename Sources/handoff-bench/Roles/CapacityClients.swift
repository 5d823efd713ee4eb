import CRawBaselines
import Foundation
import Handoff
import Synchronization

// The broker-capacity benchmark's publisher and subscriber (plain C on libzmq), each a process of
// its own.

/// `capacity-publisher --frontend E --records F [CURVE]`: bus_publish's flood; says `SENT n seconds`.
func runCapacityPublisher(_ arguments: [String]) throws {
    let records = try [UInt8](Data(contentsOf: URL(fileURLWithPath: stringOption("--records", in: arguments) ?? "")))
    var seconds = 0.0
    let sent = withClientCurve(arguments) { curve in
        records.withUnsafeBufferPointer { bus_publish(stringOption("--frontend", in: arguments), curve, $0.baseAddress, $0.count, 1, &seconds) }
    }
    tell("SENT \(sent) \(seconds)")
}

/// `capacity-subscriber --backend E --expected N [CURVE]`: says READY once connected, then
/// `RECEIVED n seconds` (first to last message) once it has N, or none came for 2 s.
func runCapacitySubscriber(_ arguments: [String]) throws {
    let opened = withClientCurve(arguments) { bus_subscriber_open(stringOption("--backend", in: arguments), $0, "A:") }
    guard let subscriber = opened else {
        throw HandoffError(.handoffFailed, "the subscriber could not connect")
    }
    tell("READY")
    var seconds = 0.0
    var bytes: UInt64 = 0
    let received = bus_subscriber_count(subscriber, Int32(intOption("--expected", 0, in: arguments)), 2_000, &seconds, &bytes)
    tell("RECEIVED \(received) \(seconds) \(bytes)")
}

/// `broker-floor --records F`: the broker's floor once, in this fresh process, on a thread that
/// is not the main one, as the broker's is (its memory new, from glibc's main arena alone, as
/// `handoff broker` allocates: see HandoffBench.main); says `FLOOR µs`.
func runBrokerFloor(_ arguments: [String]) throws {
    let records = try [UInt8](Data(contentsOf: URL(fileURLWithPath: stringOption("--records", in: arguments) ?? "")))
    let result = Mutex(0.0)
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        let floor = brokerFloor(records, trials: 1)
        result.withLock { $0 = floor }
        done.signal()
    }
    thread.start()
    done.wait()
    tell("FLOOR \(result.withLock { $0 })")
}

/// A client's CURVE keys from `--curve-server`, `--curve-public` and `--curve-secret` (Z85), in C
/// for `body`; none without `--curve-server`.
private func withClientCurve<R>(_ arguments: [String], _ body: (bus_curve) -> R) -> R {
    guard let server = stringOption("--curve-server", in: arguments) else { return body(bus_curve(server: nil, public_key: nil, secret_key: nil)) }
    let publicKey = stringOption("--curve-public", in: arguments) ?? "", secretKey = stringOption("--curve-secret", in: arguments) ?? ""
    return server.withCString { server in
        publicKey.withCString { publicKey in secretKey.withCString { body(bus_curve(server: server, public_key: publicKey, secret_key: $0)) } }
    }
}
