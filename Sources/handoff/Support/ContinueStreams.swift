import ArgumentParser
import Foundation
import Handoff
import HandoffWire
import Logging
import ServiceLifecycle
import Synchronization
import UnixSignals
import ZeroMQ

/// What `continue --document-into` opened, from the continuation handler to the printed line.
final class OpenedDocumentBox: Sendable {
    let value = Mutex<OpenedDocument?>(nil)
}

/// Opens a continued activity's streams, writes what arrives to `path`, and sends nothing back.
///
/// The stream's own liveness ends it when the originator goes silent or away; one that stays
/// connected but never writes (a stuck or hostile application) is given up on by the node's stall
/// timeout (`--stall-timeout`, ``Node/Configuration-swift.struct/streamStallTimeout``).
func saveStreams(of activity: ContinuedActivity, on node: Node, to path: String) async throws {
    // One way: this side only reads, so there is nothing to finish on the output.
    let streams = try await node.openStreams(for: activity, direction: .fromOriginator)
    guard FileManager.default.createFile(atPath: path, contents: nil), let file = FileHandle(forWritingAtPath: path) else {
        await streams.cancel(reason: "cannot write \(path)")
        throw HandoffError(.invalidConfiguration, "cannot write \(path)")
    }
    defer { try? file.close() }
    do {
        for try await chunk in streams.input { try file.write(contentsOf: chunk) }
    } catch {
        try? FileManager.default.removeItem(atPath: path)  // never leave a partial file looking complete
        if let error = error as? HandoffError, error.details["scope"] == "stalled", await node.streamCounters.stalled > 0 {
            throw HandoffError(error.code, "\(error.message) (--stall-timeout; 0 waits as long as it stays connected)",
                               activityType: error.activityType, details: error.details, cause: error)
        }
        throw error
    }
}

/// Draws a progress bar on standard error for the stream the node receives, redrawn at most every
/// 100 ms, and its final state when cancelled (the continuation is over). While the pair waits (the
/// connection to the originator dropped, the open is unanswered, no bytes for a while) the line
/// says for what, and for how long at most. Off a terminal, a line at most once a second, and only
/// when it changed (a stalled stream does not fill a log with the same line).
func showProgress(of node: Node) async {
    let terminal = isatty(STDERR_FILENO) == 1
    var input: ContinuationInputStream?
    var lastDrawn = ContinuousClock.now - .seconds(1)
    var lastWaitPrinted = ContinuousClock.now - .seconds(1)
    var width = 0
    var lastLine = ""
    func draw(waiting: StreamWait? = nil) {
        if let waiting, !terminal {
            guard ContinuousClock.now - lastWaitPrinted >= .seconds(1) else { return }
            lastWaitPrinted = .now
            FileHandle.standardError.write(Data((waiting.description + "\n").utf8))
            return
        }
        guard let progress = input?.progress else { return }
        let mib = Double(progress.bytes) / 1_048_576
        var line: String
        if let fraction = progress.fractionCompleted, let total = progress.total {
            let filled = Int(fraction * 30)
            line = "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: 30 - filled) + "]"
            line += String(format: " %3.0f%%  %.1f of %.1f MiB", fraction * 100, mib, Double(total) / 1_048_576)
        } else {
            line = String(format: "%.1f MiB received", mib)
        }
        if let waiting { line += "  (\(waiting))" }
        // Off a terminal (a log, a pipe), a line only when it says something new.
        if !terminal && line == lastLine { return }
        lastLine = line
        // Pad over what a longer line drew before (the waiting note comes and goes).
        let padding = String(repeating: " ", count: max(0, width - line.count))
        width = line.count
        FileHandle.standardError.write(Data((terminal ? "\r" + line + padding : line + "\n").utf8))
        lastDrawn = .now
    }
    while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(10))
        if input == nil { input = await node.openStreams.first?.input }
        guard input != nil, ContinuousClock.now - lastDrawn >= (terminal ? .milliseconds(100) : .seconds(1)) else { continue }
        draw(waiting: await node.streamWaits().first)
    }
    if input != nil {
        draw()
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
