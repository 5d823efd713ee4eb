// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Handoff",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "HandoffWire", targets: ["HandoffWire"]),
        .executable(name: "handoff", targets: ["handoff"]),
    ],
    dependencies: [
        // Pinned exactly: Proto/generate.sh builds protoc-gen-swift from this same version, and the
        // committed generated code must match the runtime.
        .package(url: "https://github.com/apple/swift-protobuf.git", exact: "1.39.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        // libzmq itself. Only the ZeroMQ module imports it.
        .systemLibrary(
            name: "CZeroMQ",
            pkgConfig: "libzmq",
            providers: [.apt(["libzmq3-dev"])]
        ),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ"]),
        // Generated from Proto/ by Proto/generate.sh. DO NOT EDIT the *.pb.swift files.
        .target(
            name: "HandoffWire",
            dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")]
        ),
        .executableTarget(
            name: "handoff",
            dependencies: [
                "ZeroMQ",
                "HandoffWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ"]),
        .testTarget(name: "HandoffWireTests", dependencies: ["HandoffWire"]),
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
