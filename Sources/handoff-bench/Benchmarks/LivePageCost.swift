import Foundation
import Glibc
import ZeroMQ

// `handoff-bench live-page`: what the live page costs the broker, measured as broker-capacity
// measures it (the same flood, the broker alone on CPU 0, C clients on the others). Three brokers
// serve `--metrics`: with `--live-page off`; with the page on and nobody looking (the promise:
// nothing measurable, as the view subscribes only when asked); with the page watched (its view
// subscribed: one more subscriber at the broker, and the view's decoding in the broker process).

/// How the broker of a trial serves the page.
enum LivePageMode: String, CaseIterable {
    case off = "--live-page off"
    case idle = "page on, nobody looking"
    case watched = "page on, watched"
}

func benchLivePageCost(count: Int, origins: Int, trials: Int) throws {
    let records = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-page-cost-\(getpid()).bin")
    try Data(try capacityRecords(count: count, origins: origins)).write(to: records)
    defer { try? FileManager.default.removeItem(at: records) }
    print("live page cost: \(count) advertisements from \(origins) origins through a broker serving --metrics, \(trials) trials each (median), interleaved;",
          Placement.canPin ? "the broker alone on CPU 0" : "unpinned (taskset or a second CPU missing)")
    var runs: [LivePageMode: [CapacityTrial]] = [:]
    for _ in 0..<trials {
        for mode in LivePageMode.allCases {
            let port = try freeEndpoint(Context()).split(separator: ":").last.map(String.init) ?? "0"
            let arguments = ["--metrics", "127.0.0.1:\(port)"] + (mode == .off ? ["--live-page", "off"] : [])
            let trial = try capacityTrial(raw: false, records: records, count: count, subscribers: 1, brokerArguments: arguments) {
                // Looking: the first request starts the view (it then stays a minute).
                if mode == .watched { try fetch(port: Int(port) ?? 0, path: "/view.json") }
            }
            runs[mode, default: []].append(trial)
        }
    }
    var medians: [LivePageMode: CapacityTrial] = [:]
    for mode in LivePageMode.allCases {
        let sorted = (runs[mode] ?? []).sorted { $0.perSecond < $1.perSecond }
        let median = sorted[sorted.count / 2]
        medians[mode] = median
        let name = mode.rawValue.padding(toLength: 26, withPad: " ", startingAt: 0)
        print(String(format: "  %@ %8.0f msg/s (%.0f–%.0f), broker CPU %5.2f µs/msg%@", name,
                     median.perSecond, sorted.first?.perSecond ?? 0, sorted.last?.perSecond ?? 0, median.cpuPerMessage,
                     median.lost > 0 ? ", \(median.lost) lost" : ""))
    }
    if let off = medians[.off], let idle = medians[.idle], let watched = medians[.watched] {
        let idleRatio = idle.cpuPerMessage / off.cpuPerMessage
        compare("broker CPU per message, live page on, nobody looking", handoff: String(format: "%.2f µs", idle.cpuPerMessage),
                baseline: "--live-page off", String(format: "%.2f µs", off.cpuPerMessage), ratio: String(format: "%.2f×", idleRatio),
                target: "≤ 1.05× (nothing measurable)", met: idleRatio <= 1.05)
        compare("broker CPU per message, live page watched", handoff: String(format: "%.2f µs", watched.cpuPerMessage),
                baseline: "--live-page off", String(format: "%.2f µs", off.cpuPerMessage), ratio: String(format: "%.2f×", watched.cpuPerMessage / off.cpuPerMessage))
    }
}

/// A GET over plain HTTP/1.1 to 127.0.0.1, its answer read to the end; throws unless it is 200.
private func fetch(port: Int, path: String) throws {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
    _ = send(fd, request, request.count, Int32(MSG_NOSIGNAL))
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count <= 0 { break }
        answer += buffer[..<count]
    }
    guard String(decoding: answer.prefix(16), as: UTF8.self).hasPrefix("HTTP/1.1 200") else { throw POSIXError(.EPROTO) }
}
