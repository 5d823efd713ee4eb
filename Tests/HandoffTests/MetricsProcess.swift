import Foundation
import Glibc

/// Starts a `handoff broker` or `handoff agent` serving `--metrics` on a port the kernel picks
/// when it binds (`127.0.0.1:0`), and returns it with that port, read from its log line
/// "metrics at http://HOST:PORT/metrics". A port found free beforehand can be
/// taken by another process's ephemeral bind before the process binds it, and the process then
/// exits at start: in one CI run an agent did, and its test waited for it until it timed out.
/// The log (`logLevel`, at least `info` for the line) stays in `log` for the test to read.
func startServingMetrics(_ arguments: [String], log: URL, logLevel: String = "info") async throws -> (process: Process, port: Int) {
    _ = FileManager.default.createFile(atPath: log.path, contents: nil)
    let process = try startHandoff(arguments + ["--metrics", "127.0.0.1:0"], logLevel: logLevel, standardError: try FileHandle(forWritingTo: log))
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline {
        let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        if let port = servedMetricsPort(said) { return (process, port) }
        if !process.isRunning {
            throw ProcessFailure("handoff \(arguments.joined(separator: " ")) exited (status \(process.terminationStatus)) before serving metrics; its log:\n\(said)")
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    reap(process)
    let said = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
    throw ProcessFailure("handoff \(arguments.joined(separator: " ")) did not serve metrics within 20 s; its log:\n\(said)")
}

/// The port in a log's "metrics at http://HOST:PORT/metrics" line, if it has one.
func servedMetricsPort(_ log: String) -> Int? {
    guard let line = log.split(separator: "\n").first(where: { $0.contains("metrics at http://") }),
          let url = line.range(of: "metrics at http://"),
          let end = line[url.upperBound...].range(of: "/metrics") else { return nil }
    let address = line[url.upperBound..<end.lowerBound]
    guard let colon = address.lastIndex(of: ":") else { return nil }
    return Int(address[address.index(after: colon)...])
}
