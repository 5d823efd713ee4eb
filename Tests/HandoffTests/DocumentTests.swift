import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import Testing
import HandoffTestSupport

private let noteType = "org.handoff.test.document"

/// A document activity on `a`, continued on `b` (whose handler does nothing: the test opens the
/// document itself); returns the continued activity.
private func continued(_ activity: UserActivity, from a: Node, on b: Node) async throws -> ContinuedActivity {
    _ = try await discovered(activity.id, on: b)
    await b.setContinuationHandler(forType: noteType) { _ in }
    let version = activity.document?.version
    // The newest advertised version may take a moment to arrive after a change.
    for _ in 0..<100 {
        guard case .restored(let continued) = try await b.continueActivity(id: activity.id) else { throw ProcessFailure("not restored") }
        if continued.document?.version == version { return continued }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw ProcessFailure("the continued activity never carried document version \(version.map(String.init) ?? "none")")
}

@Suite("Document activities: shared storage, streams, conflicts", .exclusive)
struct DocumentTests {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("documents-\(UUID().uuidString)")
    var shared: URL { root.appendingPathComponent("shared") }
    var copies: URL { root.appendingPathComponent("copies") }

    init() throws {
        try FileManager.default.createDirectory(at: root.appendingPathComponent("shared"), withIntermediateDirectories: true)
    }

    /// A document of `size` pseudo-random bytes (seeded by `seed`) in the shared folder.
    func write(_ name: String, size: Int, seed: UInt8) throws -> URL {
        let url = shared.appendingPathComponent(name)
        var state = UInt32(seed) &+ 1
        let bytes = (0..<size).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
        try Data(bytes).write(to: url)
        return url
    }

    @Test("on a folder both nodes share, the continuing node opens the originator's file in place")
    func sharedStorage() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let file = try write("plan.txt", size: 10_000, seed: 1)
        try await withTwoNodes(configureB: { $0.sharedFolders = [shared.path] }) { a, b in
            let activity = try UserActivity(activityType: noteType)
            activity.title = "Editing plan.txt"
            activity.document = try DocumentReference.file(at: file, version: 1)
            try await activity.becomeCurrent(on: a)
            let opened = try await b.openDocument(of: try await continued(activity, from: a, on: b), into: copies)
            #expect(opened.source == .sharedStorage)
            #expect(opened.url.standardizedFileURL.path == file.standardizedFileURL.path)
            #expect(!FileManager.default.fileExists(atPath: copies.appendingPathComponent("plan.txt").path), "nothing was copied")
        }
    }

    @Test("without shared storage the document comes over a stream, checked whole; a second open finds the copy; a newer version replaces an untouched copy")
    func pulledOverAStream() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let file = try write("atlas.bin", size: 3 << 20, seed: 2)
        try await withTwoNodes { a, b in
            let activity = try UserActivity(activityType: noteType)
            activity.document = try DocumentReference.file(at: file, version: 1)
            try await activity.becomeCurrent(on: a)
            let first = try await b.openDocument(of: try await continued(activity, from: a, on: b), into: copies)
            #expect(first.source == .stream)
            #expect(try Data(contentsOf: first.url) == Data(contentsOf: file))
            let again = try await b.openDocument(of: try await continued(activity, from: a, on: b), into: copies)
            #expect(again.source == .localCopy)

            _ = try write("atlas.bin", size: 1 << 20, seed: 3)
            activity.document = try DocumentReference.file(at: file, version: 2)
            let newer = try await b.openDocument(of: try await continued(activity, from: a, on: b), into: copies)
            #expect(newer.source == .stream && newer.version == 2)
            #expect(try Data(contentsOf: newer.url) == Data(contentsOf: file))
        }
    }

    @Test("a copy changed here since it was taken is a conflict: it is never overwritten, whatever version is offered")
    func conflict() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let file = try write("draft.md", size: 50_000, seed: 4)
        try await withTwoNodes { a, b in
            let activity = try UserActivity(activityType: noteType)
            activity.document = try DocumentReference.file(at: file, version: 1)
            try await activity.becomeCurrent(on: a)
            let taken = try await b.openDocument(of: try await continued(activity, from: a, on: b), into: copies)
            // Edited here, and at the originator too.
            let mine = Data("my own edits".utf8)
            try mine.write(to: taken.url)
            _ = try write("draft.md", size: 60_000, seed: 5)
            activity.document = try DocumentReference.file(at: file, version: 2)
            let offer = try await continued(activity, from: a, on: b)
            do throws(HandoffError) {
                _ = try await b.openDocument(of: offer, into: copies)
                Issue.record("a copy changed here must not be overwritten")
            } catch {
                #expect(error.code == .documentConflict)
                #expect(error.message.contains("changed here since it was taken"), "\(error.message)")
            }
            #expect(try Data(contentsOf: taken.url) == mine, "the local copy was overwritten")
        }
    }

    @Test("a document that grows at the originator while it is sent is cut off at the advertised size: nothing past it is written here, and nothing half-written is left")
    func grewWhileSent() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let file = try write("journal.log", size: 4 << 20, seed: 8)
        // One 16 KiB chunk in flight at a time: the send takes hundreds of round trips, so the
        // file grows long before the originator reads to its end.
        try await withTwoNodes(configureB: { $0.streamWindow = 1; $0.streamChunkSize = 16 * 1024 }) { a, b in
            let activity = try UserActivity(activityType: noteType)
            activity.document = try DocumentReference.file(at: file, version: 1)
            try await activity.becomeCurrent(on: a)
            let offer = try await continued(activity, from: a, on: b)
            let opening = Task { try await b.openDocument(of: offer, into: copies) }
            // Once bytes arrive here, the originator has checked the file: it grows by 32 MiB.
            let partial = await eventually(within: .seconds(10)) {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: copies.path)) ?? []
                return names.contains { name in
                    name.contains("partial") && ((try? FileManager.default.attributesOfItem(atPath: copies.appendingPathComponent(name).path)[.size] as? Int) ?? 0) > 0
                }
            }
            try #require(partial, "no bytes of the document arrived")
            let handle = try FileHandle(forWritingTo: file)
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(count: 32 << 20))
            try handle.close()
            do {
                let opened = try await opening.value
                Issue.record("a document longer than advertised was taken: \(opened)")
            } catch let error as HandoffError {
                #expect(error.code == .documentConflict, "\(error)")
                #expect(error.message.contains("longer than the \(4 << 20) bytes"), "the whole grown file was taken in before it was refused: \(error)")
            }
            let left = (try? FileManager.default.contentsOfDirectory(atPath: copies.path)) ?? []
            #expect(!left.contains("journal.log") && !left.contains { $0.contains("partial") }, "\(left)")
        }
    }

    @Test("a file changed at the originator after it was advertised is refused by the originator (documentConflict), and nothing half-written is left")
    func changedAtOriginator() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let file = try write("ledger.csv", size: 200_000, seed: 6)
        try await withTwoNodes { a, b in
            let activity = try UserActivity(activityType: noteType)
            activity.document = try DocumentReference.file(at: file, version: 1)
            try await activity.becomeCurrent(on: a)
            let offer = try await continued(activity, from: a, on: b)
            _ = try write("ledger.csv", size: 200_000, seed: 7)  // the advertisement still says version 1's hash
            do throws(HandoffError) {
                _ = try await b.openDocument(of: offer, into: copies)
                Issue.record("a document whose content changed must not be taken as the advertised version")
            } catch {
                #expect(error.code == .documentConflict, "\(error)")
            }
            let left = (try? FileManager.default.contentsOfDirectory(atPath: copies.path)) ?? []
            #expect(!left.contains("ledger.csv") && !left.contains { $0.contains("partial") }, "\(left)")
        }
    }
}

/// `handoff advertise ARGS`, running until the test ends; ready once it says it advertises.
private func advertiseProcess(_ arguments: [String]) async throws -> Process {
    let process = Process()
    process.executableURL = buildFolder.appendingPathComponent("handoff")
    process.arguments = ["advertise"] + arguments + ["--seconds", "120", "--log-level", "error"]
    let output = Spawning.pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.spawn()
    let line = await Task.detached { () -> String in
        String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
    }.value
    guard line.contains("advertising") else {
        reap(process)
        throw ProcessFailure("handoff advertise did not start: \(line)")
    }
    return process
}

@Suite("Document activities across processes", .exclusive, .serialized)
struct DocumentProcessTests {
    @Test("`handoff advertise --document` and `handoff continue --document-into`: opened in place with a shared folder, pulled over a stream without one, and a copy changed here is never overwritten")
    func acrossProcesses() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("documents-cli-\(UUID().uuidString)")
        let shared = root.appendingPathComponent("shared"), copies = root.appendingPathComponent("copies")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let file = shared.appendingPathComponent("report.txt")
        try Data(repeating: 0x41, count: 700_000).write(to: file)
        let (broker, frontend, backend) = try await startBroker()
        let type = "org.handoff.test.document"
        var advertiser = try await advertiseProcess(["--type", type, "--title", "Report", "--document", file.path, "--broker", frontend, backend])
        defer { if advertiser.isRunning { advertiser.terminate(); advertiser.waitUntilExit() } }

        func continueDocument(_ extra: [String]) async throws -> (status: Int32, document: [String: Any]?, error: String) {
            let result = try await runHandoff(["continue", "--type", type, "--document-into", copies.path, "--broker", frontend, backend,
                                               "--json", "--log-level", "error"] + extra)
            let object = try? JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
            return (result.status, object?["document"] as? [String: Any], result.error)
        }
        let inPlace = try await continueDocument(["--shared-folder", shared.path])
        #expect(inPlace.status == 0, "\(inPlace.error)")
        #expect(inPlace.document?["source"] as? String == "sharedStorage", "\(String(describing: inPlace.document))")
        #expect(inPlace.document?["path"] as? String == file.standardizedFileURL.path)

        let pulled = try await continueDocument([])
        #expect(pulled.status == 0, "\(pulled.error)")
        #expect(pulled.document?["source"] as? String == "stream", "\(String(describing: pulled.document))")
        let copy = copies.appendingPathComponent("report.txt")
        #expect(try Data(contentsOf: copy) == Data(contentsOf: file))

        // Edited here; the originator offers version 2: refused, the copy kept.
        try Data("edited on this machine".utf8).write(to: copy)
        advertiser.terminate()
        advertiser.waitUntilExit()
        try Data(repeating: 0x42, count: 800_000).write(to: file)
        advertiser = try await advertiseProcess(["--type", type, "--title", "Report", "--document", file.path, "--document-version", "2",
                                                 "--broker", frontend, backend])
        let conflict = try await continueDocument([])
        #expect(conflict.status != 0)
        #expect(conflict.error.contains("changed here since it was taken"), "\(conflict.error)")
        #expect(try String(contentsOf: copy, encoding: .utf8) == "edited on this machine")
        _ = broker
    }
}

@Suite("Document activities through plugins", .exclusive, .serialized)
struct DocumentPluginTests {
    /// A C plugin that makes a document activity current (`open PATH`, the hash left to the host)
    /// and keeps the activity it restores, as bytes, for the test to read.
    static let source = """
        #include <stdio.h>
        #include <string.h>
        #include "handoff_plugin.h"
        static const handoff_host *host;
        static int32_t init_plugin(const handoff_host *h, void **state, handoff_error_buffer error) { (void)error; host = h; *state = NULL; return HANDOFF_OK; }
        static int32_t restore(void *state, const uint8_t *bytes, size_t length, handoff_error_buffer error) {
            (void)state;
            char path[1024];
            snprintf(path, sizeof path, "%s/restored.bin", host->data_directory);
            FILE *file = fopen(path, "wb");
            if (file == NULL) { handoff_error_set(error, "cannot write restored.bin"); return HANDOFF_FAILED; }
            fwrite(bytes, 1, length, file);
            fclose(file);
            return HANDOFF_OK;
        }
        /* Activity { activity_type = 2; document = 19 { url = 1; version = 2 } }, encoded by hand. */
        static int32_t command(void *state, int argc, const char *const *argv, const handoff_output *output, handoff_error_buffer error) {
            (void)state;
            const char *type = "org.handoff.test.doc";
            char url[120];
            if (argc != 2 || snprintf(url, sizeof url, "file://%s", argv[1]) >= (int)sizeof url) { handoff_error_set(error, "usage: open PATH (short)"); return HANDOFF_INVALID_ARGUMENT; }
            uint8_t document[128], bytes[256];
            size_t d = 0, n = 0;
            document[d++] = 0x0A; document[d++] = (uint8_t)strlen(url); memcpy(document + d, url, strlen(url)); d += strlen(url);
            document[d++] = 0x10; document[d++] = 0x01;
            bytes[n++] = 0x12; bytes[n++] = (uint8_t)strlen(type); memcpy(bytes + n, type, strlen(type)); n += strlen(type);
            bytes[n++] = 0x9A; bytes[n++] = 0x01; bytes[n++] = (uint8_t)d; memcpy(bytes + n, document, d); n += d;
            char id[128];
            int32_t status = host->become_current(host->context, bytes, n, id, sizeof id, error);
            if (status == HANDOFF_OK) output->line(output->context, id);
            return status;
        }
        static const char *const types[] = { "org.handoff.test.doc" };
        static const handoff_plugin_descriptor docs = {
            HANDOFF_PLUGIN_DESCRIPTOR_HEADER, .name = "docs", .version = "1.0",
            .activity_types = types, .activity_type_count = 1,
            .init = init_plugin, .restore = restore, .command = command,
        };
        HANDOFF_PLUGIN_DEFINE(docs)
        """

    @Test("a plugin names a file; the host hashes it and advertises the document; the continuing agent opens it and hands the plugin its own copy's URL")
    func pluginDocument() async throws {
        let root = URL(fileURLWithPath: "/tmp/hd-\(UUID().uuidString.prefix(8))")
        let plugins = root.appendingPathComponent("plugins")
        try FileManager.default.createDirectory(at: plugins, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try await compilePlugin(Self.source, named: "docs", in: plugins)
        let file = root.appendingPathComponent("memo.txt")
        try Data("a memo that travels as a document\n".utf8).write(to: file)

        let (broker, frontend, backend) = try await startBroker()
        let agents = TestAgents(frontend: frontend, backend: backend, plugins: plugins, folder: root)
        defer { agents.stop() }
        let a = try await agents.start("doc-a"), b = try await agents.start("doc-b")
        let opened = try await runHandoff(["plugin", "docs", "open", file.path, "--agent", a])
        #expect(opened.status == 0, "\(opened.error)")
        let continued = try await runHandoff(["continue", "--type", "org.handoff.test.doc", "--agent", b])
        #expect(continued.status == 0, "\(continued.error)")

        let restored = try WireActivity(serializedBytes: Data(contentsOf: root.appendingPathComponent("doc-b/docs/restored.bin")))
        let copy = root.appendingPathComponent("doc-b/docs/documents/memo.txt")
        #expect(restored.document.url == copy.absoluteString, "\(restored.document.url)")
        #expect(restored.document.sha256.count == 32 && restored.document.size == 34)
        #expect(try Data(contentsOf: copy) == Data(contentsOf: file))
        _ = broker
    }
}
