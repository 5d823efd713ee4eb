import Foundation
import HandoffPluginKit

/// `handoff plugin clipboard …`: the clipboard from the command line, headless and in scripts.
extension ClipboardPlugin {
    static let usage = """
        usage: clipboard status | copy FILE [--type MIME] [--secret] | copy --files PATH... | paste [--out PATH] [--type MIME] \
        | pause | resume | mode both|send|receive | expiry SECONDS | limit BYTES | prefetch BYTES
        """
    static let subcommands: Set = ["status", "copy", "paste", "pause", "resume", "mode", "expiry", "limit", "prefetch"]

    public func command(_ arguments: [String], output: (String) -> Void) throws {
        guard let subcommand = arguments.first else { throw PluginFailure.invalidArgument(Self.usage) }
        let options = try Options(Array(arguments.dropFirst()))
        switch (subcommand, options.positional.count) {
        case ("copy", 1...) where options.files:
            let files = options.positional.map { URL(fileURLWithPath: $0) }
            try copy(URIList.make(files), type: URIList.mimeType, secret: options.secret, output: output)
        case ("copy", 1): try copy(file: options.positional[0], mimeType: options.type, secret: options.secret, output: output)
        case ("paste", 0): try paste(out: options.out, mimeType: options.type, output: output)
        case ("status", 0): status(output: output)
        case ("pause", 0), ("resume", 0):
            try change { $0.paused = subcommand == "pause" }
            if subcommand == "pause" { endOffer() }
            output(subcommand == "pause" ? "paused: copies here are not offered until `clipboard resume`" : "resumed: the next copy is offered")
        case ("mode", 1):
            guard let mode = ClipboardSettings.Mode(rawValue: options.positional[0]) else {
                throw PluginFailure.invalidArgument("mode takes both, send or receive")
            }
            try change { $0.mode = mode }
            if mode == .receive { endOffer() }
            output("mode \(mode.rawValue)")
        case ("expiry", 1):
            guard let seconds = Int(options.positional[0]), (1...86_400).contains(seconds) else {
                throw PluginFailure.invalidArgument("expiry takes seconds, 1 to 86400")
            }
            try change { $0.expirySeconds = seconds }
            output("copies offered from now on expire after \(seconds) s")
        case ("limit", 1):
            guard let bytes = Int(options.positional[0]), bytes > 0 else { throw PluginFailure.invalidArgument("limit takes a number of bytes") }
            try change { $0.maxBytes = bytes }
            output("content over \(bytes) bytes is neither offered nor taken")
        case ("prefetch", 1):
            guard let bytes = Int(options.positional[0]), bytes >= 0 else { throw PluginFailure.invalidArgument("prefetch takes a number of bytes (0: never)") }
            try change { $0.prefetchBytes = bytes }
            output("where the desktop cannot wait for a paste (Wayland), offers up to \(bytes) bytes are pulled when they appear")
        default:
            // docs/plugin-abi.md: an unknown subcommand is not found; a known one, bad arguments.
            throw Self.subcommands.contains(subcommand) ? PluginFailure.invalidArgument(Self.usage) : PluginFailure.notFound(Self.usage)
        }
    }

    /// `copy FILE`: the file's content becomes this node's clipboard.
    private func copy(file: String, mimeType: String?, secret: Bool, output: (String) -> Void) throws {
        let settings = store.settings()
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? nil
        guard let size else { throw PluginFailure.notFound("cannot read \(file)") }
        guard size <= settings.maxBytes else {
            throw PluginFailure.invalidArgument("\(file) is \(size) bytes, over the clipboard's limit of \(settings.maxBytes) (`clipboard limit BYTES`)")
        }
        let content = try Data(contentsOf: URL(fileURLWithPath: file))
        try copy(content, type: mimeType ?? ContentType.guess(content), secret: secret, output: output)
    }

    /// A copy by command: this node's clipboard, offered unless secret, paused or receive-only,
    /// and the desktop's too, for the applications here.
    private func copy(_ content: Data, type: String, secret: Bool, output: (String) -> Void) throws {
        output(try take(content, type: type, secret: secret))
        if !secret { desktop?.post(.offer(type: type, content: content)) }
    }

    /// `paste`: the newest copy in the account becomes this node's clipboard (pulled over a
    /// stream when it is another node's), then is written to `out` or printed (text; copied
    /// files: their paths here, one a line).
    private func paste(out: String?, mimeType: String?, output: (String) -> Void) throws {
        guard store.settings().mode != .send else {
            throw PluginFailure.invalidArgument("this node only sends its copies (`clipboard mode both` to paste others')")
        }
        guard let (entry, content) = try newest() else { throw PluginFailure.notFound("the clipboard is empty, here and on the account's other nodes") }
        if let mimeType, mimeType != entry.mimeType {
            throw PluginFailure.notFound("the clipboard holds \(entry.mimeType), not \(mimeType)")
        }
        // Applications on the desktop paste it too.
        if !entry.local { desktop?.post(.offer(type: entry.mimeType, content: content)) }
        let from = entry.local ? "this node" : entry.node
        if entry.files != nil, let files = URIList.files(in: content) {
            guard let out else {
                for file in files { output(file.path) }
                return
            }
            let folder = URL(fileURLWithPath: out)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for file in files { try FileManager.default.copyItem(at: file, to: folder.appendingPathComponent(file.lastPathComponent)) }
            output("pasted \(URIList.summary(of: files.map(\.lastPathComponent))) copied on \(from) into \(out)")
        } else if let out {
            try content.write(to: URL(fileURLWithPath: out))
            output("pasted \(content.count) bytes (\(entry.mimeType)) copied on \(from) to \(out)")
        } else if ContentType.isText(entry.mimeType) {
            output(String(decoding: content, as: UTF8.self))
        } else {
            throw PluginFailure.invalidArgument("the clipboard holds \(content.count) bytes of \(entry.mimeType): give --out FILE")
        }
    }

    private func status(output: (String) -> Void) {
        let settings = store.settings()
        output("mode \(settings.mode.rawValue)\(settings.paused ? ", paused" : ""); copies expire after \(settings.expirySeconds) s; "
            + "limit \(settings.maxBytes) bytes; prefetch \(settings.prefetchBytes) bytes")
        guard let (entry, content) = lock.withLock({ store.entry().map { ($0, try? store.content()) } }) else {
            output("empty")
            return
        }
        let what: String
        if entry.files != nil, let files = content.flatMap({ URIList.files(in: $0) }) {
            what = "\(URIList.summary(of: files.map(\.lastPathComponent))) (\(entry.size) bytes)"
        } else {
            let preview = content.flatMap { ContentType.preview($0, mimeType: entry.mimeType) }.map { " \"\($0)\"" } ?? ""
            what = "\(entry.size) bytes (\(entry.mimeType))\(preview)"
        }
        output("\(what), copied on \(entry.local ? "this node" : entry.node) at \(ISO8601DateFormatter().string(from: entry.copiedAt))")
        let offer = lock.withLock { offered }
        output(offer.map { "offered as \($0)" } ?? (entry.secret ? "not offered: secret" : "not offered"))
    }

    func change(_ body: (inout ClipboardSettings) -> Void) throws {
        try lock.withLock {
            var settings = store.settings()
            body(&settings)
            try store.save(settings)
        }
    }
}

/// A command's options after its subcommand: `--type MIME`, `--out PATH`, `--secret`, `--files`,
/// and the rest.
struct Options {
    var type: String?
    var out: String?
    var secret = false
    var files = false
    var positional: [String] = []

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--type", "--out":
                guard let value = rest.popFirst() else { throw PluginFailure.invalidArgument("\(argument) takes a value") }
                if argument == "--type" { type = value } else { out = value }
            case "--secret": secret = true
            case "--files": files = true
            default: positional.append(argument)
            }
        }
    }
}
