import Foundation
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
                // Looking, as an operator does: `handoff top --from` asks the page for its view,
                // which starts it (it then stays a minute).
                if mode == .watched {
                    let top = try Child(["top", "--from", "127.0.0.1:\(port)", "--json", "--wait", "0"],
                                        executable: benchFolder().appendingPathComponent("handoff"))
                    _ = try top.line(startingWith: "{", within: .seconds(30))
                    top.wait()
                }
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
