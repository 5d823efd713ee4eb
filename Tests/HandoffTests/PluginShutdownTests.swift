import Foundation
import Handoff
import Testing

/// A C plugin that notes each call it gets in `calls.log` in its data folder, through the state
/// its init allocates and its shutdown frees. Its read_stream reads until the stream ends.
private let notingPlugin = """
    #include <stdio.h>
    #include <stdlib.h>
    #include "handoff_plugin.h"
    typedef struct noting { char log[4096]; } noting;
    static void note(noting *state, const char *what) {
        FILE *file = fopen(state->log, "a");
        if (file == NULL) return;
        fprintf(file, "%s\\n", what);
        fclose(file);
    }
    static int32_t init_plugin(const handoff_host *host, void **state, handoff_error_buffer error) {
        (void)error;
        noting *created = calloc(1, sizeof *created);
        snprintf(created->log, sizeof created->log, "%s/calls.log", host->data_directory);
        *state = created;
        return HANDOFF_OK;
    }
    static void shutdown_plugin(void *state) { note(state, "shutdown"); free(state); }
    static int32_t restore(void *state, const uint8_t *bytes, size_t length, handoff_error_buffer error) {
        (void)bytes; (void)length; (void)error;
        note(state, "restore");
        return HANDOFF_OK;
    }
    static int32_t read_stream(void *state, const uint8_t *activity, size_t length, const handoff_stream_reader *reader,
                               handoff_error_buffer error) {
        (void)activity; (void)length;
        note(state, "read_stream began");
        uint8_t buffer[256];
        int64_t count;
        while ((count = reader->read(reader->context, buffer, sizeof buffer, error)) > 0) {}
        note(state, "read_stream returned");
        return count == 0 ? HANDOFF_OK : HANDOFF_STREAM_FAILED;
    }
    static int32_t command(void *state, int argc, const char *const *argv, const handoff_output *output, handoff_error_buffer error) {
        (void)argc; (void)argv; (void)error;
        note(state, "command");
        output->line(output->context, "pong");
        return HANDOFF_OK;
    }
    static const char *const types[] = { "org.handoff.test.noted" };
    static const handoff_plugin_descriptor descriptor = {
        HANDOFF_PLUGIN_DESCRIPTOR_HEADER, .name = "noting", .version = "1.0",
        .activity_types = types, .activity_type_count = 1,
        .init = init_plugin, .shutdown = shutdown_plugin, .restore = restore,
        .read_stream = read_stream, .command = command,
    };
    HANDOFF_PLUGIN_DEFINE(descriptor)
    """

/// The originating side: writes a greeting on the pair, then holds its output open until released.
private final class HeldOutput: UserActivityDelegate {
    let release = AsyncStream<Void>.makeStream()

    func userActivity(_ activity: UserActivity, didReceive streams: ContinuationStreams) async {
        do {
            try await streams.output.write(Data("hello".utf8))
            for await _ in release.stream { break }
            try await streams.output.finish()
            _ = try await streams.input.readAll()
        } catch {}
    }
}

@Suite("Plugin shutdown is the last call")
struct PluginShutdownTests {
    /// What the plugin has noted so far.
    private static func calls(in folder: URL) -> [String] {
        let log = folder.appendingPathComponent("noting/calls.log")
        return ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// A node continuing a held stream activity with the noting plugin, its read_stream blocked on
    /// the pair when `body` runs.
    private static func withReadingPlugin(_ body: (PluginRuntime, URL, HeldOutput) async throws -> Void) async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("noting-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await compilePlugin(notingPlugin, named: "noting", in: folder)
        let plugin = try PluginLoader.load(file: folder.appendingPathComponent("noting.so").path)
        let held = HeldOutput()
        try await withTwoNodes { a, b in
            let runtime = PluginRuntime(node: b, dataDirectory: folder)
            #expect(await runtime.start([plugin]).isEmpty)
            let activity = try UserActivity(activityType: "org.handoff.test.noted")
            activity.title = "held"
            activity.supportsContinuationStreams = true
            activity.delegate = held
            try await activity.becomeCurrent(on: a)
            let found = try await discovered(activity.id, on: b)
            let continuing = Task { try await b.continueActivity(found) }
            defer { held.release.continuation.finish() }
            let reading = await within(.seconds(5)) {
                while !calls(in: folder).contains("read_stream began"), !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
                return true
            }
            try #require(reading != nil, "read_stream never began: \(calls(in: folder))")
            try await body(runtime, folder, held)
            held.release.continuation.finish()
            _ = try await continuing.value
            _ = activity
        }
    }

    @Test("shutdown waits for a stream handler still reading, and no call reaches the plugin after it")
    func shutdownWaitsForStreamHandlers() async throws {
        try await Self.withReadingPlugin { runtime, folder, held in
            let shuttingDown = Task { await runtime.shutdown() }
            try await Task.sleep(for: .milliseconds(300))
            #expect(!Self.calls(in: folder).contains("shutdown"), "shutdown freed the state under a running read_stream: \(Self.calls(in: folder))")
            held.release.continuation.finish()
            await shuttingDown.value
            #expect(Self.calls(in: folder) == ["restore", "read_stream began", "read_stream returned", "shutdown"])
            await #expect(throws: HandoffError.self) { try await runtime.command(plugin: "noting", ["ping"]) }
            #expect(!Self.calls(in: folder).contains("command"), "a command reached the plugin after its shutdown")
        }
    }

    @Test("a plugin whose calls outlive the grace is not shut down (its state is not freed under them)")
    func callsOutlivingTheGrace() async throws {
        try await Self.withReadingPlugin { runtime, folder, held in
            // Within 3 s plus what the machine held the process back meanwhile: a parallel pass
            // beside two busy processes took 4.4 s for the grace of 200 ms.
            let bound = WaitDeadline(.seconds(3))
            await runtime.shutdown(grace: .milliseconds(200))
            #expect(!bound.passed, "shutdown did not give up after its grace: \(bound.account)")
            held.release.continuation.finish()
            let ended = await within(.seconds(5)) {
                while !Self.calls(in: folder).contains("read_stream returned"), !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
                return true
            }
            #expect(ended != nil)
            try await Task.sleep(for: .milliseconds(100))
            #expect(Self.calls(in: folder) == ["restore", "read_stream began", "read_stream returned"])
        }
    }
}
