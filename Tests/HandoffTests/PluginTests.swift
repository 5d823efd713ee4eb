import Foundation
import Handoff
import Testing
import HandoffTestSupport

/// The repository root, for the plugin ABI header.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// The folder the test bundle and the built plugins live in.
let buildFolder = ChildProcess.testNodeURL.deletingLastPathComponent()

/// The plugin ABI header as it was at 1.0, to build plugins the way a 1.0 author did.
let abi10Headers = repositoryRoot.appendingPathComponent("Tests/HandoffTests/Fixtures/abi-1.0")

/// Compiles a C plugin from `source` into `folder/name.so` with gcc, against the ABI header in
/// `headers` (this host's by default).
func compilePlugin(_ source: String, named name: String, in folder: URL,
                   headers: URL = repositoryRoot.appendingPathComponent("Sources/CHandoffPlugin/include")) async throws {
    let sourceFile = folder.appendingPathComponent("\(name).c")
    try source.write(to: sourceFile, atomically: true, encoding: .utf8)
    let gcc = Process()
    gcc.executableURL = URL(fileURLWithPath: "/usr/bin/gcc")
    gcc.arguments = ["-shared", "-fPIC", "-Wall", "-Werror", "-I", headers.path,
                     "-o", folder.appendingPathComponent("\(name).so").path, sourceFile.path]
    // Beside a test that holds thousands of descriptors (the .exclusive ones run apart from it,
    // not every test that compiles a plugin), gcc waits for it to end instead of being refused:
    // CI's one-loop pass failed PluginShutdownTests so (2026-12-08).
    try await gcc.spawnWhenFewDescriptors()
    gcc.waitUntilExit()
    try #require(gcc.terminationStatus == 0, "gcc failed for \(name)")
    try FileManager.default.removeItem(at: sourceFile)
}

/// A minimal C plugin; `descriptorFields` are spliced into its descriptor, `functions` before it.
func cPlugin(_ descriptorFields: String, types: String = #""org.handoff.test.thing""#, functions: String = "") -> String {
    """
    #include <stddef.h>
    #include "handoff_plugin.h"
    \(functions)
    static int32_t init_plugin(const handoff_host *host, void **state, handoff_error_buffer error) { (void)host; (void)error; *state = 0; return HANDOFF_OK; }
    static int32_t restore(void *state, const uint8_t *bytes, size_t length, handoff_error_buffer error) { (void)state; (void)bytes; (void)length; (void)error; return HANDOFF_OK; }
    static const char *const types[] = { \(types) };
    static const handoff_plugin_descriptor descriptor = {
        HANDOFF_PLUGIN_DESCRIPTOR_HEADER, .name = "test", .version = "1.0",
        .activity_types = types, .activity_type_count = sizeof types / sizeof types[0],
        .init = init_plugin, .restore = restore, \(descriptorFields)
    };
    HANDOFF_PLUGIN_DEFINE(descriptor)
    """
}

@Suite("Plugin loader", .exclusive)
struct PluginLoaderTests {
    @Test("each broken plugin is refused with an error naming its file, and the others still load")
    func brokenPlugins() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("plugins-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        // The real Contacts plugin, as built.
        let contacts = buildFolder.appendingPathComponent("libHandoffContactsPlugin.so")
        try #require(FileManager.default.fileExists(atPath: contacts.path), "build the HandoffContactsPlugin product first")
        try FileManager.default.copyItem(at: contacts, to: folder.appendingPathComponent("a-contacts.so"))
        // Not a shared object at all.
        try "this is not ELF".write(to: folder.appendingPathComponent("b-text.so"), atomically: true, encoding: .utf8)
        // A shared object without the entry point.
        try await compilePlugin("int unrelated(void) { return 42; }", named: "c-no-entry", in: folder)
        // A plugin built for ABI 2.
        try await compilePlugin(cPlugin(".name = \"future\", .abi_major = 2"), named: "d-major", in: folder)
        // A plugin built for ABI 1.7, newer than this host's 1.2.
        try await compilePlugin(cPlugin(".name = \"newer\", .abi_minor = 7"), named: "e-minor", in: folder)
        // A plugin without a restore handler.
        try await compilePlugin(cPlugin(".name = \"norestore\", .restore = 0"), named: "f-no-restore", in: folder)
        // A plugin claiming a type the Contacts plugin already handles.
        try await compilePlugin(cPlugin(".name = \"thief\"", types: #""org.handoff.contacts.view-contact""#), named: "g-duplicate", in: folder)
        // A plugin declaring a type that is not reverse-DNS.
        try await compilePlugin(cPlugin(".name = \"badtype\"", types: #""not a type""#), named: "h-bad-type", in: folder)
        // A good C plugin.
        try await compilePlugin(cPlugin(".name = \"good\""), named: "i-good", in: folder)

        let (plugins, errors) = PluginLoader.loadAll(from: [folder.path])
        #expect(plugins.map(\.name) == ["contacts", "good"])
        #expect(plugins.first?.activityTypes == [
            "org.handoff.contacts.edit-contact", "org.handoff.contacts.view-contact", "org.handoff.contacts.list-contacts",
        ])
        let messages = Dictionary(uniqueKeysWithValues: errors.map { (URL(fileURLWithPath: $0.details["file"] ?? "").lastPathComponent, $0.message) })
        #expect(messages.count == 7)
        let codes = Set(errors.map(\.code))
        #expect(codes == [.pluginRefused])
        #expect(messages["b-text.so"]?.contains("not a loadable shared object") == true)
        #expect(messages["c-no-entry.so"]?.contains("no handoff_plugin_entry entry point") == true)
        #expect(messages["d-major.so"]?.contains("built for plugin ABI 2.2; this host speaks 1.2") == true, "\(messages["d-major.so"] ?? "")")
        #expect(messages["e-minor.so"]?.contains("newer than this host's 1.2") == true, "\(messages["e-minor.so"] ?? "")")
        #expect(messages["f-no-restore.so"]?.contains("has no restore handler") == true)
        #expect(messages["g-duplicate.so"]?.contains("org.handoff.contacts.view-contact is already handled by plugin contacts") == true)
        #expect(messages["h-bad-type.so"]?.contains("reverse-DNS") == true)
        for (file, message) in messages { #expect(message.hasPrefix(folder.appendingPathComponent(file).path), "\(message)") }
    }

    @Test("a 1.2 host loads a plugin built against the 1.0 header, and one whose descriptor ends before its reserved fields; a reserved field set, a 1.0 plugin setting 1.1's callbacks, a 1.1 plugin setting 1.2's, or a descriptor short of 1.0's fields is refused")
    func abiCompatibility() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("abi-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let command = """
            static int32_t command(void *state, int argc, const char *const *argv, const handoff_output *output, handoff_error_buffer error) {
                (void)state; (void)argc; (void)argv; (void)error;
                output->line(output->context, "pong from a 1.0 plugin");
                return HANDOFF_OK;
            }
            """
        try await compilePlugin(cPlugin(".name = \"old\", .command = command", types: #""org.handoff.test.old""#, functions: command),
                          named: "a-old", in: folder, headers: abi10Headers)
        try await compilePlugin(cPlugin(".name = \"short\", .struct_size = offsetof(handoff_plugin_descriptor, reserved)", types: #""org.handoff.test.short""#),
                          named: "b-short", in: folder, headers: abi10Headers)
        try await compilePlugin(cPlugin(".name = \"reserved\", .reserved = { [2] = (void *)1 }", types: #""org.handoff.test.reserved""#), named: "c-reserved", in: folder)
        let didUpdate = "static void did_update(void *s, const uint8_t *b, size_t l) { (void)s; (void)b; (void)l; }"
        try await compilePlugin(cPlugin(".name = \"sneaky\", .abi_minor = 0, .did_update = did_update", types: #""org.handoff.test.sneaky""#, functions: didUpdate),
                          named: "d-sneaky", in: folder)
        try await compilePlugin(cPlugin(".name = \"tiny\", .struct_size = 40", types: #""org.handoff.test.tiny""#), named: "e-tiny", in: folder)
        let changed = "static void changed(void *s, const uint8_t *b, size_t l, int32_t c) { (void)s; (void)b; (void)l; (void)c; }"
        try await compilePlugin(cPlugin(".name = \"early\", .abi_minor = 1, .activity_changed = changed", types: #""org.handoff.test.early""#, functions: changed),
                          named: "f-early", in: folder)

        let (plugins, errors) = PluginLoader.loadAll(from: [folder.path])
        #expect(plugins.map(\.name) == ["old", "short"], "\(errors)")
        for plugin in plugins { #expect(plugin.abiVersion.major == 1 && plugin.abiVersion.minor == 0) }
        let messages = Dictionary(uniqueKeysWithValues: errors.map { (URL(fileURLWithPath: $0.details["file"] ?? "").lastPathComponent, $0.details["reason"] ?? "") })
        #expect(messages["c-reserved.so"]?.contains("reserved descriptor field 2 is set") == true, "\(messages)")
        #expect(messages["d-sneaky.so"]?.contains("which 1.0 reserves") == true, "\(messages)")
        #expect(messages["e-tiny.so"]?.contains("smaller than the fields of ABI 1.0") == true, "\(messages)")
        #expect(messages["f-early.so"]?.contains("built for plugin ABI 1.1 but sets activity_changed") == true, "\(messages)")

        // The 1.0 plugin serves in a real agent and answers its command.
        try FileManager.default.removeItem(at: folder.appendingPathComponent("c-reserved.so"))
        try FileManager.default.removeItem(at: folder.appendingPathComponent("d-sneaky.so"))
        try FileManager.default.removeItem(at: folder.appendingPathComponent("e-tiny.so"))
        try FileManager.default.removeItem(at: folder.appendingPathComponent("f-early.so"))
        let (broker, frontend, backend) = try await startBroker()
        let control = "ipc://\(folder.path)/control.sock"
        let agent = try await startAgentProcess("abi-host", frontend: frontend, backend: backend, plugins: folder,
                                                data: folder.appendingPathComponent("data"), control: control)
        defer { agent.terminate(); agent.waitUntilExit() }
        let answered = try await runHandoff(["plugin", "old", "ping", "--agent", control])
        #expect(answered.output == "pong from a 1.0 plugin\n", "the 1.0 plugin did not answer through the agent: \(answered.error)")
        let listed = try await runHandoff(["plugins", "list", "--agent", control, "--json"])
        #expect(listed.output.contains(#""abiVersion":"1.0""#), "\(listed.output)")
        _ = broker
    }

    @Test("a Swift kit plugin declares the oldest ABI minor it needs: contacts 1.1 (it loads on a 1.1 host, as its README says), clipboard 1.2 (it watches activities)")
    func kitDeclaresOldestMinor() throws {
        let contacts = try PluginLoader.load(file: buildFolder.appendingPathComponent("libHandoffContactsPlugin.so").path)
        #expect(contacts.abiVersion == (1, 1))
        let clipboard = try PluginLoader.load(file: buildFolder.appendingPathComponent("libHandoffClipboardPlugin.so").path)
        #expect(clipboard.abiVersion == (1, 2))
    }

    @Test("a missing folder and HANDOFF_PLUGIN_PATH")
    func folders() {
        #expect(PluginLoader.folders(configured: ["/a"], environment: ["HANDOFF_PLUGIN_PATH": "/b:/c"]) == ["/a", "/b", "/c"])
        let (plugins, errors) = PluginLoader.loadAll(from: ["/no/such/folder"])
        #expect(plugins.isEmpty)
        #expect(errors.first?.message == "/no/such/folder: plugin folder cannot be read")
        #expect(errors.first?.code == .pluginRefused)
    }
}
