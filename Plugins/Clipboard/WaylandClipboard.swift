import Foundation
import Glibc

/// A Wayland compositor's clipboard, through wl-clipboard's `wl-paste --watch` and `wl-copy`
/// (they speak the compositor's data-control protocol: wlroots compositors such as sway, KDE's
/// KWin). A copy by any client there becomes this node's copy, offered to the account; a paste or
/// a command's copy here is set with `wl-copy`.
///
/// Wayland has no lazy ownership through these tools: `wl-copy` holds its content before it
/// offers it. So an offer elsewhere is pulled when it appears, if it is at most `prefetchBytes`
/// (`clipboard prefetch`, 1 MiB by default): text and small images paste in any application at
/// once; bigger copies are pulled by `clipboard paste`, which then sets them here.
final class WaylandClipboard: DisplayClipboard, @unchecked Sendable {
    // Invariant for @unchecked Sendable: `queue` and `stopped` are touched only under `lock`;
    // `watcher`, `holder` and `lastSet` only by the worker thread (the watcher's reader thread
    // only posts).
    private enum Work {
        case command(DisplayCommand)
        case changed
    }

    private let lock = NSCondition()
    private var queue: [Work] = []
    private var stopped = false
    private let display: String
    private let maxBytes: @Sendable () -> Int
    private let prefetchBytes: @Sendable () -> Int
    private let handlers: DisplayHandlers
    private let tools: (paste: String, copy: String)
    private var watcher: Process?
    /// The `wl-copy` that holds what this node last set (it exits when another client copies).
    private var holder: Process?
    /// What this node last set: the compositor's next change event is its echo, not a copy.
    private var lastSet: (type: String, content: Data)?

    /// Text as wl-paste names it, from the best name down.
    static let textTypes = [ContentType.text, "text/plain", "UTF8_STRING", "STRING", "TEXT"]
    static let passwordHint = "x-kde-passwordManagerHint"

    init?(display: String, maxBytes: @escaping @Sendable () -> Int, prefetchBytes: @escaping @Sendable () -> Int, handlers: DisplayHandlers) {
        guard let paste = Self.executable("wl-paste"), let copy = Self.executable("wl-copy") else {
            handlers.log("no Wayland clipboard: wl-paste and wl-copy (wl-clipboard) are not installed")
            return nil
        }
        tools = (paste, copy)
        self.display = display
        self.maxBytes = maxBytes
        self.prefetchBytes = prefetchBytes
        self.handlers = handlers
        let thread = Thread { [self] in run() }
        thread.name = "handoff clipboard Wayland"
        thread.start()
    }

    func post(_ command: DisplayCommand) { enqueue(.command(command)) }

    func stop() {
        lock.withLock {
            stopped = true
            lock.signal()
        }
    }

    private func enqueue(_ work: Work) {
        lock.withLock {
            queue.append(work)
            lock.signal()
        }
    }

    private func run() {
        do {
            watcher = try watch()
        } catch {
            handlers.log("no Wayland clipboard on \(display): \(error)")
            return
        }
        handlers.log("watching the Wayland clipboard of \(display)")
        defer {
            for process in [watcher, holder].compactMap({ $0 }) where process.isRunning { process.terminate() }
        }
        while true {
            let next: Work? = lock.withLock {
                while queue.isEmpty && !stopped { lock.wait() }
                return stopped ? nil : queue.removeFirst()
            }
            guard let next else { return }
            switch next {
            case .changed: readCopy()
            case .command(.offer(let type, let content)): set(content, type: type)
            case .command(.offerLazily(let type)):
                // (Pulled now: wl-copy cannot wait for a paste. A newer copy meanwhile wins: the
                // plugin hands over only the newest.)
                if let content = handlers.wanted(type, prefetchBytes()) { set(content, type: type) }
            }
        }
    }

    /// `wl-paste --watch`: a line each time the selection changes. When the compositor already
    /// has a selection, the first line is that one, as it was when the watch began: not a copy.
    private func watch() throws -> Process {
        let selected = !((try? capture(tools.paste, ["--list-types"], limit: 64 * 1024)) ?? Data()).isEmpty
        let output = Pipe()
        let process = try launch(tools.paste, ["--watch", "echo"], output: output)
        let reader = Thread { [self] in
            // (A plain read(2): FileHandle.read(upToCount:) would wait for a full buffer.)
            let descriptor = output.fileHandleForReading.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 4096)
            var first = selected
            while true {
                let count = read(descriptor, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }
                for byte in buffer[..<count] where byte == UInt8(ascii: "\n") {
                    if first { first = false } else { self.enqueue(.changed) }
                }
            }
        }
        reader.name = "handoff clipboard Wayland watch"
        reader.start()
        return process
    }

    private func readCopy() {
        guard let listed = try? capture(tools.paste, ["--list-types"], limit: 64 * 1024) else { return }
        let types = Set(String(decoding: listed, as: UTF8.self).split(separator: "\n").map(String.init))
        if types.contains(Self.passwordHint) {
            let hint = (try? capture(tools.paste, ["--no-newline", "--type", Self.passwordHint], limit: 1024)) ?? Data()
            if String(decoding: hint, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "secret" {
                handlers.copied(nil, "")
                return
            }
        }
        let wanted = Self.readTypes.filter { $0 != ContentType.text } + Self.textTypes
        guard let source = wanted.first(where: types.contains) else { return }
        let type = Self.textTypes.contains(source) ? ContentType.text : source
        let limit = maxBytes()
        do {
            let content = try capture(tools.paste, ["--no-newline", "--type", source], limit: limit + 1)
            guard content.count <= limit else {
                handlers.log("a copy on the Wayland display is over the clipboard's limit of \(limit) bytes: not offered")
                return
            }
            if let last = lastSet, last.type == type, last.content == content { return }
            lastSet = nil
            handlers.copied(content, type)
        } catch {
            handlers.log("could not read what was copied on the Wayland display: \(error)")
        }
    }

    /// Sets the clipboard with `wl-copy`, which holds the content until another client copies.
    private func set(_ content: Data, type: String) {
        if let holder, holder.isRunning { holder.terminate() }
        let input = Pipe()
        do {
            holder = try launch(tools.copy, ["--foreground", "--type", type], input: input)
            lastSet = (type, content)
            try input.fileHandleForWriting.write(contentsOf: content)
            try input.fileHandleForWriting.close()
        } catch {
            handlers.log("cannot set the Wayland clipboard: \(error)")
        }
    }

    /// Runs a wl-clipboard tool on this display and returns its standard output, at most `limit`
    /// bytes (then it is stopped): within 5 s.
    private func capture(_ tool: String, _ arguments: [String], limit: Int) throws -> Data {
        let output = Pipe()
        let process = try launch(tool, arguments, output: output)
        let deadline = DispatchTime.now() + .seconds(5)
        let timer = DispatchSource.makeTimerSource()
        timer.schedule(deadline: deadline)
        timer.setEventHandler { if process.isRunning { process.terminate() } }
        timer.resume()
        defer { timer.cancel() }
        var content = Data()
        let handle = output.fileHandleForReading
        while content.count < limit, let bytes = try handle.read(upToCount: min(256 * 1024, limit - content.count)), !bytes.isEmpty {
            content.append(bytes)
        }
        if process.isRunning { process.terminate() }
        try? handle.close()
        process.waitUntilExit()
        guard process.terminationReason == .exit || content.count >= limit else {
            throw WaylandClipboardError.tool("\(tool) \(arguments.joined(separator: " ")) did not finish within 5 s")
        }
        return content
    }

    /// Starts a wl-clipboard tool for this display, killed if this agent dies (setpriv's
    /// parent-death signal, where util-linux has it).
    private func launch(_ tool: String, _ arguments: [String], input: Pipe? = nil, output: Pipe? = nil) throws -> Process {
        let process = Process()
        if let setpriv = Self.executable("setpriv") {
            process.executableURL = URL(fileURLWithPath: setpriv)
            process.arguments = ["--pdeathsig", "KILL", "--", tool] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
        }
        var environment = ProcessInfo.processInfo.environment
        environment["WAYLAND_DISPLAY"] = display
        process.environment = environment
        process.standardInput = input ?? FileHandle.nullDevice
        process.standardOutput = output ?? FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }
}

enum WaylandClipboardError: Error, CustomStringConvertible {
    case tool(String)
    var description: String {
        switch self { case .tool(let why): why }
    }
}
