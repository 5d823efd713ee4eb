import Foundation
import Handoff
import HandoffWire
import Testing
import HandoffTestSupport

/// A hostile peer that does the same wrong thing on every pair it opens: each is counted, but the
/// agent's log gets one line a minute per peer and kind, not one a pair.
@Suite("Stream log floods", .exclusive)
struct StreamLogFloodTests {
    static let pairs: UInt64 = 30

    @Test("a peer that breaks the stream rules on every pair it opens, 30 pairs: each told to the peer, one line for them in a real agent's log, and one for its plugin's failed streams")
    func violationsLoggedOnce() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("flood-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        let output = try FileHandle(forWritingTo: log)
        defer { try? output.close() }
        try await withAgentSharingContacts("flood-agent", arguments: ["--log-level", "info"], standardError: output) { activity, _ in
            let peer = try WirePeer(connectingTo: activity.continueEndpoint)
            var violations = 0
            for stream in 1...Self.pairs {
                // It asks to read only, then writes: data on a direction the pair excludes.
                try peer.openStream(stream, activityID: activity.id, window: 4, direction: .originToContinuer, as: "flooder")
                var data = WireStreamData()
                data.length = 3
                try peer.send(stream: stream, .data(data), as: "flooder", payload: [1, 2, 3])
                while let (envelope, _) = try await peer.receive(within: .seconds(5)) {
                    if case .streamFrame(let frame) = envelope.body, frame.streamID == stream, case .error(let error)? = frame.kind {
                        #expect(error.code == .streamProtocolViolation, "\(error)")
                        violations += 1
                        break
                    }
                }
            }
            #expect(violations == Int(Self.pairs), "each pair's violation is told to the peer")
            // The plugin's writers see their pairs failed and say so, however late a loaded machine
            // runs them; then a moment for a second kind of line.
            _ = await eventually(within: .seconds(10)) {
                ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains("plugin contacts streams for")
            }
            try await Task.sleep(for: .milliseconds(300))
        }
        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        let violationLines = lines.filter { $0.contains("with flooder") && $0.contains("direction") }
        let pluginLines = lines.filter { $0.contains("plugin contacts streams for") }
        #expect(violationLines.count == 1, "\(violationLines.count) violation lines: \(violationLines.prefix(3))")
        // One kind of failure here; a second kind (a writer that finds its pair cancelled instead)
        // gets its own line.
        #expect((1...2).contains(pluginLines.count), "\(pluginLines.count) plugin lines: \(pluginLines.prefix(3))")
    }
}
