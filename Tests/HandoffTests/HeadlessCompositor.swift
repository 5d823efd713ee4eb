import Foundation
import Glibc
import HandoffTestSupport

/// A Wayland compositor of its own for a test: sway on wlroots' headless backend (no GPU, no
/// input), in a runtime folder of its own; it has the data-control protocol wl-clipboard speaks.
/// sway refuses to run as root, so under root it runs as nobody (setpriv), its socket still open
/// to root. Ended (and reaped, with every wl-copy a test left holding the selection) by `stop`.
struct HeadlessCompositor {
    let process: Process
    let runtime: URL
    /// The compositor's socket, as an absolute path (what WAYLAND_DISPLAY may name).
    let display: String
    let owners = VirtualDisplay.Owners()

    static let sway = ["/usr/bin/sway"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let wlCopy = ["/usr/bin/wl-copy"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let wlPaste = ["/usr/bin/wl-paste"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static func start() async throws -> HeadlessCompositor {
        guard let sway else { throw ProcessFailure("sway is not installed (apt-get install sway)") }
        let runtime = URL(fileURLWithPath: "/tmp/handoff-wayland-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let config = runtime.appendingPathComponent("config")
        try Data("xwayland disable\n".utf8).write(to: config)
        // The signal again after the change to nobody, which clears it (prctl(2)).
        var arguments = ["--pdeathsig", "KILL"]
        if getuid() == 0 {
            guard chown(runtime.path, 65534, 65534) == 0, chown(config.path, 65534, 65534) == 0 else {
                throw ProcessFailure("cannot give \(runtime.path) to nobody")
            }
            arguments += ["--reuid=65534", "--regid=65534", "--clear-groups"]
        }
        // setpriv (as nobody under root), itself watched: it ends with the test process.
        let process = Process.watched(URL(fileURLWithPath: "/usr/bin/setpriv"), arguments + ["--", sway, "--config", config.path])
        process.environment = [
            "PATH": "/usr/bin:/bin", "HOME": runtime.path, "XDG_RUNTIME_DIR": runtime.path,
            "WLR_BACKENDS": "headless", "WLR_LIBINPUT_NO_DEVICES": "1", "WLR_RENDERER": "pixman",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.spawn()
        var socket: String?
        _ = await eventually(within: .seconds(10)) {
            socket = (try? FileManager.default.contentsOfDirectory(atPath: runtime.path))?.first { $0.hasPrefix("wayland-") && !$0.hasSuffix(".lock") }
            return socket != nil || !process.isRunning
        }
        guard let socket, process.isRunning else {
            reap(process)
            try? FileManager.default.removeItem(at: runtime)
            throw ProcessFailure("sway did not start on the headless backend")
        }
        return HeadlessCompositor(process: process, runtime: runtime, display: runtime.appendingPathComponent(socket).path)
    }

    func stop() {
        owners.reapAll()
        reap(process)
        try? FileManager.default.removeItem(at: runtime)
    }

    private var environment: [String: String] {
        ProcessInfo.processInfo.environment.merging(["WAYLAND_DISPLAY": display, "XDG_RUNTIME_DIR": runtime.path]) { $1 }
    }

    /// `wl-copy --foreground`: this content in this type holds the selection until another client
    /// copies; returns once it has taken it.
    func copy(_ content: Data, type: String? = nil) async throws {
        let process = Process.watched(URL(fileURLWithPath: Self.wlCopy!), ["--foreground"] + (type.map { ["--type", $0] } ?? []))
        process.environment = environment
        let input = Spawning.pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.spawn()
        owners.add(process)
        try input.fileHandleForWriting.write(contentsOf: content)
        try input.fileHandleForWriting.close()
        try await Task.sleep(for: .milliseconds(200))
    }

    /// `wl-paste --no-newline [--type T]`: what a Wayland application pasting here would get.
    func paste(type: String? = nil, timeout: Duration = .seconds(10)) async throws -> (status: Int32, output: Data) {
        let process = Process.watched(URL(fileURLWithPath: Self.wlPaste!), ["--no-newline"] + (type.map { ["--type", $0] } ?? []))
        process.environment = environment
        return try await runCapturing(process, timeout: timeout, what: "wl-paste on \(display)")
    }
}
