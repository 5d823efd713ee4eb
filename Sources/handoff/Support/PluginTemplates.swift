import Foundation
import Handoff

/// The skeletons `handoff plugins new` writes: a plugin that builds with one command against the
/// installed SDK (scripts/install-sdk), loads, makes its activity current (`open TITLE`), restores
/// it on another node, and answers `hello`.
enum PluginTemplates {
    /// The files of a C plugin, by path in its folder.
    static func c(name: String, activityType: String) -> [String: String] {
        let symbol = name.replacingOccurrences(of: "-", with: "_")
        return [
            "Makefile": """
                # \(name): a Handoff plugin in C. `make` builds libhandoff-\(name).so; put it in an agent's plugin folder.
                #
                # Needs gcc, make, protobuf-c (Debian: libprotobuf-c-dev, protobuf-c-compiler) and the Handoff
                # plugin SDK (Handoff's scripts/install-sdk; set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig when PREFIX
                # is not searched by pkg-config).

                CC = gcc
                CFLAGS = -O2 -Wall -Wextra -Werror
                PROTODIR := $(shell pkg-config --variable=protodir handoff-plugin)
                CPPFLAGS := $(shell pkg-config --cflags handoff-plugin libprotobuf-c) -Igenerated
                LDLIBS := $(shell pkg-config --libs libprotobuf-c)
                PLUGIN = libhandoff-\(name).so
                GENERATED = generated/handoff/v1/activity.pb-c.c

                .PHONY: all clean
                all: $(PLUGIN)

                # Activities cross the plugin boundary as serialized handoff.v1.Activity messages.
                $(GENERATED): $(PROTODIR)/handoff/v1/activity.proto
                \tmkdir -p generated
                \tprotoc-c --proto_path=$(PROTODIR) --c_out=generated handoff/v1/activity.proto

                # -fvisibility=hidden: only handoff_plugin_entry is exported; -z defs: a missing library fails here.
                $(PLUGIN): \(name).c $(GENERATED)
                \t$(CC) $(CFLAGS) $(CPPFLAGS) -shared -fPIC -fvisibility=hidden -Wl,-z,defs -o $@ \(name).c $(GENERATED) $(LDLIBS)

                clean:
                \trm -rf $(PLUGIN) generated

                """,
            "\(name).c": """
                /*
                 * \(name): a Handoff plugin (plugin ABI \(abiVersion)), written by `handoff plugins new`.
                 *
                 *   handoff plugin \(name) hello --agent EP          says hello
                 *   handoff plugin \(name) open TITLE --agent EP     makes a \(activityType) activity current
                 *
                 * Another node with this plugin continues it (`handoff continue --type \(activityType)`)
                 * and restore() logs its title. docs/plugin-abi.md is the reference.
                 */
                #include <stdio.h>
                #include <string.h>

                #include "handoff_plugin.h"
                #include "handoff/v1/activity.pb-c.h"

                /* The plugin's state is the host's table alone (no globals: docs/plugin-abi.md, "Threads");
                 * a plugin with more to keep allocates a struct here and frees it in shutdown. */
                static int32_t init_plugin(const handoff_host *host, void **state, handoff_error_buffer error) {
                    if (host->abi_major != HANDOFF_PLUGIN_ABI_MAJOR) {
                        handoff_error_set(error, "this host speaks another major version of the plugin ABI");
                        return HANDOFF_UNSUPPORTED;
                    }
                    *state = (void *)host;
                    return HANDOFF_OK;
                }

                /* Continuing side: the activity as its originator left it. */
                static int32_t restore(void *state, const uint8_t *bytes, size_t length, handoff_error_buffer error) {
                    const handoff_host *host = state;
                    Handoff__V1__Activity *activity = handoff__v1__activity__unpack(NULL, length, bytes);
                    if (activity == NULL) {
                        handoff_error_set(error, "not a handoff.v1.Activity");
                        return HANDOFF_INVALID_ARGUMENT;
                    }
                    char line[512];
                    snprintf(line, sizeof line, "continued \\"%s\\" from %s", activity->title,
                             activity->origin != NULL ? activity->origin->name : "?");
                    host->log(host->context, HANDOFF_LOG_INFO, line);
                    handoff__v1__activity__free_unpacked(activity, NULL);
                    return HANDOFF_OK;
                }

                static int32_t command(void *state, int argc, const char *const *argv, const handoff_output *output,
                                       handoff_error_buffer error) {
                    const handoff_host *host = state;
                    if (argc == 1 && strcmp(argv[0], "hello") == 0) {
                        char line[256];
                        snprintf(line, sizeof line, "hello from \(name) on %s", host->node_name);
                        output->line(output->context, line);
                        return HANDOFF_OK;
                    }
                    if (argc == 2 && strcmp(argv[0], "open") == 0) {
                        Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
                        activity.activity_type = (char *)"\(activityType)";
                        activity.title = (char *)argv[1];
                        uint8_t bytes[4096];
                        if (handoff__v1__activity__get_packed_size(&activity) > sizeof bytes) {
                            handoff_error_set(error, "the title is too long");
                            return HANDOFF_INVALID_ARGUMENT;
                        }
                        size_t length = handoff__v1__activity__pack(&activity, bytes);
                        char id[128];
                        int32_t status = host->become_current(host->context, bytes, length, id, sizeof id, error);
                        if (status == HANDOFF_OK) output->line(output->context, id);
                        return status;
                    }
                    handoff_error_set(error, "usage: \(name) hello | open TITLE");
                    /* An unknown subcommand is not found; a known one with bad arguments, invalid. */
                    return argc >= 1 && (strcmp(argv[0], "hello") == 0 || strcmp(argv[0], "open") == 0) ? HANDOFF_INVALID_ARGUMENT : HANDOFF_NOT_FOUND;
                }

                static const char *const types[] = { "\(activityType)" };

                static const handoff_plugin_descriptor \(symbol) = {
                    HANDOFF_PLUGIN_DESCRIPTOR_HEADER,
                    .name = "\(name)",
                    .version = "0.1.0",
                    .activity_types = types,
                    .activity_type_count = 1,
                    .init = init_plugin,
                    .restore = restore,
                    .command = command,
                };
                HANDOFF_PLUGIN_DEFINE(\(symbol))

                """,
        ]
    }

    /// The files of a Swift plugin, by path in its folder; `kit` is the installed HandoffPluginKit package.
    static func swift(name: String, activityType: String, kit: String) -> [String: String] {
        let typeName = name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined() + "Plugin"
        return [
            "Package.swift": """
                // swift-tools-version: 6.2
                // \(name): a Handoff plugin in Swift, written by `handoff plugins new`.
                // `swift build -c release` builds .build/release/libhandoff-\(name).so; put it in an agent's
                // plugin folder. Build with the Swift toolchain the agent was built with.
                import PackageDescription

                let package = Package(
                    name: "\(name)",
                    products: [.library(name: "handoff-\(name)", type: .dynamic, targets: ["\(typeName)"])],
                    dependencies: [
                        // HandoffPluginKit, as Handoff's scripts/install-sdk installed it.
                        .package(path: "\(kit)"),
                    ],
                    targets: [
                        .target(name: "\(typeName)", dependencies: [.product(name: "HandoffPluginKit", package: "swift")]),
                    ],
                    swiftLanguageModes: [.v6]
                )

                """,
            "Sources/\(typeName)/\(typeName).swift": """
                // \(name): a Handoff plugin (plugin ABI \(abiVersion)).
                //
                //   handoff plugin \(name) hello --agent EP          says hello
                //   handoff plugin \(name) open TITLE --agent EP     makes a \(activityType) activity current
                //
                // Another node with this plugin continues it (`handoff continue --type \(activityType)`)
                // and restore(_:) logs its title. docs/plugin-abi.md is the reference.
                import HandoffPluginKit

                public final class \(typeName): HandoffPlugin {
                    public static let name = "\(name)"
                    public static let version = "0.1.0"
                    public static let activityTypes = ["\(activityType)"]

                    let host: PluginHost

                    public init(host: PluginHost) throws {
                        self.host = host
                    }

                    /// Continuing side: the activity as its originator left it.
                    public func restore(_ activity: WireActivity) throws {
                        host.log("continued \\"\\(activity.title)\\" from \\(activity.origin.name)")
                    }

                    public func command(_ arguments: [String], output: (String) -> Void) throws {
                        switch (arguments.first, arguments.count) {
                        case ("hello", 1):
                            output("hello from \\(Self.name) on \\(host.nodeName)")
                        case ("open", 2):
                            var activity = WireActivity()
                            activity.activityType = "\(activityType)"
                            activity.title = arguments[1]
                            output(try host.becomeCurrent(activity))
                        default:
                            // An unknown subcommand is not found; a known one with bad arguments, invalid.
                            let usage = "usage: \\(Self.name) hello | open TITLE"
                            throw ["hello", "open"].contains(arguments.first ?? "") ? PluginFailure.invalidArgument(usage) : PluginFailure.notFound(usage)
                        }
                    }
                }

                @_cdecl("handoff_plugin_entry")
                public func handoffPluginEntry() -> UnsafeRawPointer {
                    HandoffPluginExport.descriptor(for: \(typeName).self)
                }

                """,
        ]
    }

    static var abiVersion: String { "\(PluginLoader.abiVersion.major).\(PluginLoader.abiVersion.minor)" }
}
