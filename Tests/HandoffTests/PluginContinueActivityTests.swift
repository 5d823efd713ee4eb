import Foundation
import Handoff
import HandoffTestSupport
import Testing

/// A C plugin whose command calls the host's continue_activity (ABI 1.2) and prints what it
/// returned: `continue <type> [<id>]` → `status <n>: <message>`. `refuse` makes its restore fail.
/// Its flags are spliced in, so that the same source builds a thread-safe plugin and one that is not.
private func continuingPlugin(name: String, flags: String) -> String {
    """
    #include <stdio.h>
    #include <string.h>
    #include "handoff_plugin.h"
    static const handoff_host *the_host;
    static volatile int refusing;
    static volatile int restored;
    static int32_t init_plugin(const handoff_host *host, void **state, handoff_error_buffer error) {
        (void)error; the_host = host; *state = 0; return HANDOFF_OK;
    }
    static int32_t restore(void *state, const uint8_t *bytes, size_t length, handoff_error_buffer error) {
        (void)state; (void)bytes; (void)length;
        if (refusing) { handoff_error_set(error, "the plugin has no room for it"); return HANDOFF_FAILED; }
        restored++;
        return HANDOFF_OK;
    }
    static int32_t command(void *state, int argc, const char *const *argv, const handoff_output *output, handoff_error_buffer error) {
        (void)state; (void)error;
        char line[600], message[512] = "";
        if (argc == 1 && strcmp(argv[0], "refuse") == 0) { refusing = 1; return HANDOFF_OK; }
        if (argc == 1 && strcmp(argv[0], "restored") == 0) { snprintf(line, sizeof line, "restored %d", restored); output->line(output->context, line); return HANDOFF_OK; }
        if (argc < 2 || strcmp(argv[0], "continue") != 0) return HANDOFF_INVALID_ARGUMENT;
        handoff_error_buffer reason = { message, sizeof message };
        int32_t status = the_host->continue_activity(the_host->context, argv[1], argc > 2 ? argv[2] : NULL, 300, reason);
        snprintf(line, sizeof line, "status %d: %s", status, message);
        output->line(output->context, line);
        return HANDOFF_OK;
    }
    static const char *const types[] = { "org.handoff.test.thing" };
    static const handoff_plugin_descriptor descriptor = {
        HANDOFF_PLUGIN_DESCRIPTOR_HEADER, .name = "\(name)", .version = "1.0",
        .activity_types = types, .activity_type_count = 1, .flags = \(flags),
        .init = init_plugin, .restore = restore, .command = command,
    };
    HANDOFF_PLUGIN_DEFINE(descriptor)
    """
}

@Suite("continue_activity from a C plugin's command (ABI 1.2)", .exclusive)
struct PluginContinueActivityTests {
    @Test("each refusal comes back as its status with the reason: another plugin's type, by type or by id, and a plugin that is not thread-safe (unsupported), nothing known in time (not found), a restore that fails (failed); a known activity continues")
    func refusalsAndSuccess() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("continuing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await compilePlugin(continuingPlugin(name: "safe", flags: "HANDOFF_PLUGIN_THREAD_SAFE"), named: "safe", in: folder)
        try await compilePlugin(continuingPlugin(name: "unsafe", flags: "0"), named: "unsafe", in: folder)
        let safe = try PluginLoader.load(file: folder.appendingPathComponent("safe.so").path)
        try await withTwoNodes { a, b in
            let runtime = PluginRuntime(node: b, dataDirectory: folder)
            #expect(await runtime.start([safe]).isEmpty)

            let notOurs = try await runtime.command(plugin: "safe", ["continue", "org.handoff.other.thing"])
            #expect(notOurs == ["status 5: org.handoff.other.thing is not one of safe's activity types"])
            let nothingYet = try await runtime.command(plugin: "safe", ["continue", "org.handoff.test.thing"])
            #expect(nothingYet == ["status 3: no activity of type org.handoff.test.thing is known on the bus"])

            let thing = try UserActivity(activityType: "org.handoff.test.thing")
            thing.title = "a thing"
            try await thing.becomeCurrent(on: a)
            _ = try await discovered(thing.id, on: b)
            let unknownID = try await runtime.command(plugin: "safe", ["continue", "org.handoff.test.thing", "no-such-id"])
            #expect(unknownID.first?.hasPrefix("status 3: ") == true, "\(unknownID)")
            // An id of another type's activity (another plugin's, say): not this plugin's to continue.
            let other = try UserActivity(activityType: "org.handoff.other.thing")
            other.title = "someone else's"
            try await other.becomeCurrent(on: a)
            _ = try await discovered(other.id, on: b)
            let othersByID = try await runtime.command(plugin: "safe", ["continue", "org.handoff.test.thing", other.id])
            #expect(othersByID == ["status 5: activity \(other.id) is of type org.handoff.other.thing, not org.handoff.test.thing"])
            #expect(try await runtime.command(plugin: "safe", ["restored"]) == ["restored 0"])
            let continued = try await runtime.command(plugin: "safe", ["continue", "org.handoff.test.thing", thing.id])
            #expect(continued == ["status 0: "])
            #expect(try await runtime.command(plugin: "safe", ["restored"]) == ["restored 1"])

            _ = try await runtime.command(plugin: "safe", ["refuse"])
            let refused = try await runtime.command(plugin: "safe", ["continue", "org.handoff.test.thing"])
            #expect(refused.first?.hasPrefix("status 1: ") == true, "\(refused)")
            #expect(refused.first?.contains("the plugin has no room for it") == true, "\(refused)")
        }
        let unsafe = try PluginLoader.load(file: folder.appendingPathComponent("unsafe.so").path)
        try await withTwoNodes { _, b in
            let runtime = PluginRuntime(node: b, dataDirectory: folder)
            #expect(await runtime.start([unsafe]).isEmpty)
            let notThreadSafe = try await runtime.command(plugin: "unsafe", ["continue", "org.handoff.test.thing"])
            #expect(notThreadSafe.first?.hasPrefix("status 5: continue_activity needs a thread-safe plugin") == true, "\(notThreadSafe)")
        }
    }
}
