// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Handoff",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HandoffExecutor", targets: ["HandoffExecutor"]),
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "HandoffWire", targets: ["HandoffWire"]),
        .library(name: "Handoff", targets: ["Handoff"]),
        .executable(name: "handoff", targets: ["handoff"]),
        .library(name: "HandoffPluginKit", targets: ["HandoffPluginKit"]),
        .library(name: "HandoffContactsPlugin", type: .dynamic, targets: ["ContactsPlugin"]),
        .library(name: "HandoffClipboardPlugin", type: .dynamic, targets: ["ClipboardPlugin"]),
        .library(name: "HandoffNotesPlugin", type: .dynamic, targets: ["NotesPlugin"]),
    ],
    dependencies: [
        // Pinned exactly: Proto/generate.sh builds protoc-gen-swift from this same version, and the
        // committed generated code must match the runtime.
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        // The metrics and health endpoint's HTTP server; its default traits pull in swift-configuration.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // libzmq itself (Debian: libzmq3-dev, which scripts/lib.sh installs). Only the ZeroMQ module
        // imports it. No pkgConfig: libzmq's .pc pulls in krb5's `-isystem` flag, which SwiftPM
        // refuses with a warning in every build; zmq.h and libzmq.so lie in the default paths, and
        // the module map links the library.
        .systemLibrary(name: "CZeroMQ"),
        // Event-loop threads as a TaskExecutor and SerialExecutors on them: public Swift API only.
        .target(name: "HandoffExecutor", dependencies: [.product(name: "DequeModule", package: "swift-collections")]),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ", "HandoffExecutor", .product(name: "DequeModule", package: "swift-collections")]),
        // Generated from Proto/ by Proto/generate.sh. DO NOT EDIT the *.pb.swift files.
        .target(
            name: "HandoffWire",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        // CRC-32C for stream checksums: the CPU's crc32 instruction, or tables.
        .target(name: "CHandoffChecksum"),
        // Activities, nodes, the broker, continuation, streams.
        .target(
            name: "Handoff",
            dependencies: [
                "ZeroMQ",
                "HandoffExecutor",
                "CHandoffChecksum",
                "CHandoffPlugin",
                "HandoffWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // Seeded fuzzing of the wire contract, for the tests and handoff-bench.
        .target(
            name: "HandoffFuzz",
            dependencies: ["HandoffWire", .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        .executableTarget(
            name: "handoff",
            dependencies: [
                "Handoff",
                "ZeroMQ",
                "HandoffExecutor",
                "HandoffWire",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The plugin ABI: one C header, no dependencies. Plugins (in C or Swift) and the host include it.
        .target(name: "CHandoffPlugin"),
        // What a Swift plugin author imports: a protocol to conform to and one export line.
        .target(
            name: "HandoffPluginKit",
            dependencies: ["CHandoffPlugin", "HandoffWire", .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        // The seeds' Contacts app, as a Swift plugin (a shared object; explicit path: SwiftPM reserves Plugins/).
        .target(
            name: "ContactsPlugin",
            dependencies: ["HandoffPluginKit", "HandoffWire", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            path: "Plugins/Contacts",
            exclude: ["README.md"]
        ),
        // Universal Clipboard, as a Swift plugin (docs: Plugins/Clipboard/README.md).
        .target(
            name: "ClipboardPlugin",
            dependencies: ["HandoffPluginKit", "HandoffWire", "CClipboardX11", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            path: "Plugins/Clipboard",
            exclude: ["README.md"]
        ),
        // Its X11 side in C: the CLIPBOARD selection through Xlib and XFIXES (libx11-dev, libxfixes-dev).
        .target(
            name: "CClipboardX11",
            path: "Plugins/ClipboardX11",
            linkerSettings: [.linkedLibrary("X11"), .linkedLibrary("Xfixes")]
        ),
        // A plugin in C on protobuf-c: proof that a third party needs no Swift (also: Plugins/Notes/Makefile).
        .target(
            name: "NotesPlugin",
            dependencies: ["CHandoffPlugin"],
            path: "Plugins/Notes",
            exclude: ["Makefile", "README.md", "test_notes.c"],
            sources: ["notes.c", "generated/handoff/v1/activity.pb-c.c"],
            publicHeadersPath: "generated",
            cSettings: [.headerSearchPath("generated")],
            linkerSettings: [.linkedLibrary("protobuf-c")]
        ),
        // Raw libzmq baselines for the benchmarks, in C.
        .target(name: "CRawBaselines", dependencies: ["CZeroMQ", "CHandoffChecksum"]),
        // The same work through NATS and Redis with their own C clients (nats.c and hiredis, from
        // Debian: libnats-dev, libhiredis-dev), and through a plain TCP socket.
        .target(name: "CPeerBaselines", linkerSettings: [.linkedLibrary("nats"), .linkedLibrary("hiredis")]),
        // Benchmarks: Handoff against raw libzmq, NATS, Redis and TCP doing the same work, in one run.
        .executableTarget(
            name: "handoff-bench",
            dependencies: [
                "Handoff", "HandoffWire", "ZeroMQ", "HandoffExecutor", "HandoffFuzz", "CRawBaselines", "CPeerBaselines", "CHandoffChecksum",
                .product(name: "Logging", package: "swift-log"), .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ]
        ),
        // The deterministic simulator: the node's protocol machines in a seeded fleet (Handoff's
        // Simulation/), from the command line.
        .executableTarget(
            name: "handoff-sim",
            dependencies: ["Handoff", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // What every test target shares: the `.exclusive` trait (tests that must not run beside
        // each other under plain, parallel `swift test`).
        .target(name: "HandoffTestSupport", path: "Tests/HandoffTestSupport"),
        .testTarget(name: "HandoffExecutorTests", dependencies: ["HandoffExecutor", "HandoffTestSupport"]),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ", "HandoffExecutor", "HandoffTestSupport"]),
        .testTarget(
            name: "HandoffTests",
            dependencies: [
                "Handoff", "ZeroMQ", "HandoffExecutor", "HandoffWire", "HandoffFuzz", "HandoffTestNode", "HandoffTestSupport", "CHandoffChecksum", "handoff", "handoff-sim",
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            // Plugin sources and headers that tests compile with gcc (the ABI 1.0 header).
            exclude: ["Fixtures"]
        ),
        // A small program the end-to-end tests start as separate processes (advertiser, broker).
        .executableTarget(
            name: "HandoffTestNode",
            dependencies: [
                "Handoff", "ZeroMQ", "HandoffExecutor",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            path: "Tests/HandoffTestNode"
        ),
        .testTarget(
            name: "HandoffWireTests",
            dependencies: ["HandoffWire", .product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// One settings loop for every Swift target.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}
