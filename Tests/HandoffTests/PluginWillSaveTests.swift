import Foundation
import Handoff
import HandoffWire
import SwiftProtobuf
import Testing

/// A C plugin whose will_save hands back an activity built anew with only what will_save may change
/// (title, userInfo): `offer <hex> <hex>` makes the first serialized activity current, marks it as
/// needing save, and keeps the second for its will_save. Hex, so that the test builds the bytes.
private let savingPlugin = """
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    #include "handoff_plugin.h"
    static const handoff_host *the_host;
    static uint8_t saved[4096];
    static size_t saved_length;
    static size_t unhex(const char *text, uint8_t *out, size_t capacity) {
        size_t length = strlen(text) / 2;
        if (length > capacity) return 0;
        for (size_t i = 0; i < length; i++) { unsigned byte; sscanf(text + 2 * i, "%2x", &byte); out[i] = (uint8_t)byte; }
        return length;
    }
    static int32_t init_plugin(const handoff_host *host, void **state, handoff_error_buffer error) {
        (void)error; the_host = host; *state = 0; return HANDOFF_OK;
    }
    static int32_t restore(void *state, const uint8_t *bytes, size_t length, handoff_error_buffer error) {
        (void)state; (void)bytes; (void)length; (void)error; return HANDOFF_OK;
    }
    static int32_t will_save(void *state, const uint8_t *bytes, size_t length, const handoff_activity_sink *sink, handoff_error_buffer error) {
        (void)state; (void)bytes; (void)length; (void)error;
        return sink->set(sink->context, saved, saved_length);
    }
    static int32_t command(void *state, int argc, const char *const *argv, const handoff_output *output, handoff_error_buffer error) {
        (void)state;
        if (argc != 3 || strcmp(argv[0], "offer") != 0) return HANDOFF_NOT_FOUND;
        uint8_t current[4096];
        size_t length = unhex(argv[1], current, sizeof current);
        saved_length = unhex(argv[2], saved, sizeof saved);
        char id[128];
        int32_t status = the_host->become_current(the_host->context, current, length, id, sizeof id, error);
        if (status != HANDOFF_OK) return status;
        status = the_host->needs_save(the_host->context, id);
        output->line(output->context, id);
        return status;
    }
    static const char *const types[] = { "org.handoff.test.saved" };
    static const handoff_plugin_descriptor descriptor = {
        HANDOFF_PLUGIN_DESCRIPTOR_HEADER, .name = "saving", .version = "1.0",
        .activity_types = types, .activity_type_count = 1,
        .init = init_plugin, .restore = restore, .command = command, .will_save = will_save,
    };
    HANDOFF_PLUGIN_DEFINE(descriptor)
    """

@Suite("will_save from a C plugin (ABI 1.1)")
struct PluginWillSaveTests {
    private static func hex(_ activity: WireActivity) throws -> String {
        let bytes: [UInt8] = try activity.serializedBytes()
        return bytes.map { String(format: "%02x", $0) }.joined()
    }

    @Test("what will_save hands back replaces the title and userInfo; the document and the streams it left out stay (an activity built anew took them away)")
    func willSaveKeepsTheRest() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("saving-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await compilePlugin(savingPlugin, named: "saving", in: folder)
        let plugin = try PluginLoader.load(file: folder.appendingPathComponent("saving.so").path)
        let document = folder.appendingPathComponent("report.txt")
        try Data("the report".utf8).write(to: document)
        var current = WireActivity()
        current.activityType = "org.handoff.test.saved"
        current.title = "as it was"
        current.supportsContinuationStreams = true
        current.document.url = document.absoluteString
        current.document.version = 3
        var saved = WireActivity()
        saved.activityType = "org.handoff.test.saved"
        saved.title = "as saved"
        var draft = WireValue()
        draft.stringValue = "typed since"
        saved.userInfo["draft"] = draft
        try await withTwoNodes { a, b in
            let runtime = PluginRuntime(node: a, dataDirectory: folder)
            #expect(await runtime.start([plugin]).isEmpty)
            let id = try #require(try await runtime.command(plugin: "saving", ["offer", try Self.hex(current), try Self.hex(saved)]).first)
            await b.setContinuationHandler(forType: "org.handoff.test.saved") { _ in }
            let continued = try #require(try await b.continueActivity(try await discovered(id, on: b)).restored)
            #expect(continued.title == "as saved")
            #expect(continued.userInfo["draft"] == .string("typed since"))
            #expect(continued.document?.version == 3, "will_save took the document away")
            #expect(continued.supportsContinuationStreams, "will_save took the streams away")
        }
    }
}
