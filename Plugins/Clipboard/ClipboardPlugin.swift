// Universal Clipboard as a Handoff plugin: a copy on one node is offered to the account's other
// nodes, and its content crosses only when someone pastes there.
//
//   org.handoff.clipboard   what the clipboard holds, never the content: its MIME type, size, a
//                           short preview of text, when it was copied; it expires (2 minutes by
//                           default). A paste continues the newest one and pulls the content over a
//                           continuation stream; newest copy wins across the account.
//
// Content marked by a password manager (--secret: x-kde-passwordManagerHint: secret) is never
// offered; `pause`, `mode send|receive`, `expiry` and `limit` set what this node shares.

import Foundation
import HandoffPluginKit
import SwiftProtobuf

// Invariant for @unchecked Sendable: every var is touched only under `lock` (the X11 thread and
// the host's threads call in at once: the plugin is thread-safe).
public final class ClipboardPlugin: HandoffPlugin, @unchecked Sendable {
    public static let name = "clipboard"
    public static let version = "1.0.0"
    public static let handlesStreams = true
    // A paste's command waits while the host continues (restore and the stream run meanwhile).
    public static let threadSafe = true
    // The account's offers, as they come and go: a paste pulls one only when it is newer than
    // this node's own copy.
    public static let watchesActivities = true

    static let clipboardType = "org.handoff.clipboard"
    public static let activityTypes = [clipboardType]

    let host: PluginHost
    let store: ClipboardStore
    /// Guards `offered` and `incoming`, and the store's files, against concurrent calls.
    private let lock = NSLock()
    /// The id of the activity that offers this node's copy, when one is offered.
    private var offered: String?
    /// What restore learned of the copy a paste is pulling, by activity id.
    private var incoming: [String: ClipboardEntry] = [:]
    /// Other nodes' offers this node knows: when each was made, and where.
    private var offers: [String: (updatedAt: Date, node: String)] = [:]

    /// The X11 clipboard of the agent's display, when it has one.
    private var x11: X11Clipboard?

    public init(host: PluginHost) throws {
        self.host = host
        store = ClipboardStore(folder: host.dataDirectory)
        let environment = ProcessInfo.processInfo.environment
        if let display = environment["HANDOFF_CLIPBOARD_DISPLAY"] ?? environment["DISPLAY"], !display.isEmpty {
            let store = self.store
            x11 = X11Clipboard(display: display, maxBytes: { store.settings().maxBytes }, handlers: X11Clipboard.Handlers(
                copied: { [unowned self] content, type in copiedOnDisplay(content, type: type) },
                wanted: { [unowned self] type in
                    // The newest copy, in the type the display was promised (the offer may have
                    // gone meanwhile, leaving an older copy of another type).
                    guard let (entry, content) = try? newest(), entry.mimeType == type else { return nil }
                    return content
                },
                log: { [host] in host.log($0) }))
        }
    }

    // MARK: Commands

    static let usage = """
        usage: clipboard status | copy FILE [--type MIME] [--secret] | paste [--out FILE] [--type MIME] \
        | pause | resume | mode both|send|receive | expiry SECONDS | limit BYTES
        """

    public func command(_ arguments: [String], output: (String) -> Void) throws {
        guard let subcommand = arguments.first else { throw PluginFailure.invalidArgument(Self.usage) }
        let options = try Options(Array(arguments.dropFirst()))
        switch (subcommand, options.positional.count) {
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
        default:
            throw PluginFailure.invalidArgument(Self.usage)
        }
    }

    /// `copy FILE`: the file's content becomes this node's clipboard, offered unless secret,
    /// paused or receive-only.
    private func copy(file: String, mimeType: String?, secret: Bool, output: (String) -> Void) throws {
        let settings = store.settings()
        let size = (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? nil
        guard let size else { throw PluginFailure.notFound("cannot read \(file)") }
        guard size <= settings.maxBytes else {
            throw PluginFailure.invalidArgument("\(file) is \(size) bytes, over the clipboard's limit of \(settings.maxBytes) (`clipboard limit BYTES`)")
        }
        let content = try Data(contentsOf: URL(fileURLWithPath: file))
        let type = mimeType ?? ContentType.guess(content)
        output(try take(content, type: type, secret: secret))
        // The display's clipboard holds it too, for the applications here.
        if !secret { x11?.post(.offer(type: type, content: content)) }
    }

    /// A copy made here (by command or on the display): this node's clipboard, offered to the
    /// account unless secret, paused or receive-only. Returns what happened, in words.
    private func take(_ content: Data, type: String, secret: Bool) throws -> String {
        let settings = store.settings()
        let entry = ClipboardEntry(mimeType: type, size: content.count, copiedAt: Date(), node: host.nodeName, local: true, secret: secret)
        try lock.withLock { try store.save(content, as: entry) }
        let copied = "copied \(content.count) bytes (\(type))"
        if secret {
            endOffer()
            return "\(copied); not offered to other nodes: marked secret by a password manager"
        }
        let (offers, why) = settings.offersCopies
        guard offers else {
            endOffer()
            return "\(copied); not offered: \(why)"
        }
        let id = try offer(entry, content: content, expiry: settings.expirySeconds)
        return "\(copied), offered to the account for \(settings.expirySeconds) s as \(id)"
    }

    /// Something on the display copied (nil: a password manager's copy, not read).
    private func copiedOnDisplay(_ content: Data?, type: String) {
        guard let content else {
            endOffer()
            host.log("a copy on the display is marked secret by a password manager: not offered")
            return
        }
        do {
            host.log(try take(content, type: type, secret: false) + " (copied on the display)")
        } catch {
            host.log("could not take the display's copy: \(error)", level: HANDOFF_LOG_WARNING)
        }
    }

    /// `paste`: the newest copy in the account becomes this node's clipboard (pulled over a
    /// stream when it is another node's), then is written to `out` or printed (text).
    private func paste(out: String?, mimeType: String?, output: (String) -> Void) throws {
        guard store.settings().mode != .send else {
            throw PluginFailure.invalidArgument("this node only sends its copies (`clipboard mode both` to paste others')")
        }
        guard let (entry, content) = try newest() else { throw PluginFailure.notFound("the clipboard is empty, here and on the account's other nodes") }
        if let mimeType, mimeType != entry.mimeType {
            throw PluginFailure.notFound("the clipboard holds \(entry.mimeType), not \(mimeType)")
        }
        // Applications on the display paste it too.
        if !entry.local { x11?.post(.offer(type: entry.mimeType, content: content)) }
        let from = entry.local ? "this node" : entry.node
        if let out {
            try content.write(to: URL(fileURLWithPath: out))
            output("pasted \(content.count) bytes (\(entry.mimeType)) copied on \(from) to \(out)")
        } else if ContentType.isText(entry.mimeType) {
            output(String(decoding: content, as: UTF8.self))
        } else {
            throw PluginFailure.invalidArgument("the clipboard holds \(content.count) bytes of \(entry.mimeType): give --out FILE")
        }
    }

    /// The newest copy in the account, made this node's clipboard: another node's offer is pulled
    /// only when it is newer than this node's own copy (or when nothing is known of the offers
    /// yet: a node that just joined). Blocks while it is pulled.
    private func newest() throws -> (entry: ClipboardEntry, content: Data)? {
        let (own, newestOffer) = lock.withLock { (store.entry(), offers.values.map(\.updatedAt).max()) }
        if own == nil || newestOffer.map({ $0 > own!.copiedAt }) ?? true {
            do {
                try host.continueActivity(type: Self.clipboardType, timeout: own == nil ? .seconds(2) : .milliseconds(200))
            } catch let failure as PluginFailure where failure.status == HANDOFF_NOT_FOUND {
                // No other node offers a copy: this node's own is the newest.
            }
        }
        return try lock.withLock {
            guard let entry = store.entry() else { return nil }
            return (entry, try store.content())
        }
    }

    private func status(output: (String) -> Void) {
        let settings = store.settings()
        output("mode \(settings.mode.rawValue)\(settings.paused ? ", paused" : ""); copies expire after \(settings.expirySeconds) s; limit \(settings.maxBytes) bytes")
        guard let entry = lock.withLock({ store.entry() }) else {
            output("empty")
            return
        }
        let offer = lock.withLock { offered }
        let preview = (try? store.content()).flatMap { ContentType.preview($0, mimeType: entry.mimeType) }.map { " \"\($0)\"" } ?? ""
        output("\(entry.size) bytes (\(entry.mimeType))\(preview), copied on \(entry.local ? "this node" : entry.node) at \(ISO8601DateFormatter().string(from: entry.copiedAt))")
        output(offer.map { "offered as \($0)" } ?? (entry.secret ? "not offered: secret" : "not offered"))
    }

    // MARK: Offering

    /// Makes the copy's activity current in place of the last one: what it is, never the content.
    private func offer(_ entry: ClipboardEntry, content: Data, expiry: Int) throws -> String {
        var activity = WireActivity()
        activity.activityType = Self.clipboardType
        let preview = ContentType.preview(content, mimeType: entry.mimeType)
        activity.title = preview.map { "Clipboard: \($0)" } ?? "Clipboard: \(entry.size) bytes of \(entry.mimeType)"
        activity.userInfo = [
            "mimeTypes": .list([.string(entry.mimeType)]),
            "size": .int(entry.size),
            "copiedAt": .double(entry.copiedAt.timeIntervalSince1970),
        ]
        if let preview { activity.userInfo["preview"] = .string(preview) }
        activity.requiredUserInfoKeys = ["mimeTypes", "size", "copiedAt"]
        // The type also as a keyword: advertisements carry keywords (never userInfo), and a node
        // that owns its display's clipboard for this offer must say what it holds before pulling it.
        activity.keywords = [entry.mimeType]
        activity.expiration = WireTimestamp(Date().addingTimeInterval(TimeInterval(expiry)))
        activity.supportsContinuationStreams = true
        endOffer()
        let id = try host.becomeCurrent(activity)
        lock.withLock { offered = id }
        return id
    }

    private func endOffer() {
        guard let id = lock.withLock({ () -> String? in defer { offered = nil }; return offered }) else { return }
        try? host.end(id)
    }

    private func change(_ body: (inout ClipboardSettings) -> Void) throws {
        try lock.withLock {
            var settings = store.settings()
            body(&settings)
            try store.save(settings)
        }
    }

    // MARK: Continuing side (a paste here)

    /// Checks the offer before any byte moves: this node takes others' copies, and not over its limit.
    public func restore(_ activity: WireActivity) throws {
        let settings = store.settings()
        guard settings.mode != .send else { throw PluginFailure.invalidArgument("this node only sends its copies") }
        guard case .intValue(let size)? = activity.userInfo["size"]?.kind, size >= 0,
              case .doubleValue(let copiedAt)? = activity.userInfo["copiedAt"]?.kind,
              case .listValue(let types)? = activity.userInfo["mimeTypes"]?.kind,
              case .stringValue(let mimeType)? = types.values.first?.kind else {
            throw PluginFailure.invalidArgument("a clipboard offer without its size, time and MIME type")
        }
        guard size <= settings.maxBytes else {
            throw PluginFailure.invalidArgument("the copy on \(activity.origin.name) is \(size) bytes, over this node's limit of \(settings.maxBytes)")
        }
        let entry = ClipboardEntry(
            mimeType: mimeType, size: Int(size), copiedAt: Date(timeIntervalSince1970: copiedAt), node: activity.origin.name, local: false, secret: false)
        lock.withLock { incoming[activity.activityID] = entry }
    }

    /// The content: exactly the size offered (the host has checked its length and CRC-32C), kept
    /// unless this node's own copy is newer.
    public func readStream(for activity: WireActivity, from reader: StreamReader) throws {
        guard let entry = lock.withLock({ incoming.removeValue(forKey: activity.activityID) }) else {
            _ = try reader.readAll()
            return
        }
        var content = Data()
        content.reserveCapacity(entry.size)
        while let chunk = try reader.read() {
            content.append(chunk)
            guard content.count <= entry.size else {
                throw PluginFailure.invalidArgument("the copy on \(entry.node) sent more than the \(entry.size) bytes it offered")
            }
        }
        guard content.count == entry.size else {
            throw PluginFailure.invalidArgument("the copy on \(entry.node) sent \(content.count) bytes of the \(entry.size) it offered")
        }
        try lock.withLock {
            if let own = store.entry(), own.copiedAt > entry.copiedAt {
                host.log("kept this node's copy: newer than \(entry.node)'s")
                return
            }
            try store.save(content, as: entry)
        }
        host.log("pasted \(content.count) bytes (\(entry.mimeType)) copied on \(entry.node)")
    }

    // MARK: Originating side

    /// Sends the offered copy's content; nothing for an offer that is no longer this node's copy.
    public func writeStream(for activity: WireActivity, to writer: StreamWriter) throws {
        guard activity.origin.nodeID == host.nodeID else { return }
        let content: Data? = lock.withLock {
            guard offered == activity.activityID, let entry = store.entry(), entry.local, !entry.secret else { return nil }
            return try? store.content()
        }
        guard let content else { throw PluginFailure.notFound("the offered copy was replaced or withdrawn") }
        writer.setExpectedLength(UInt64(content.count))
        try writer.write(content)
    }

    public func shutdown() {
        x11?.stop()
        endOffer()
    }

    // MARK: The account's offers

    public func activityChanged(_ activity: WireActivity, change: ActivityChange) {
        lock.withLock {
            switch change {
            case .appeared, .updated:
                let made = activity.hasUpdatedAt ? activity.updatedAt.date : Date()
                offers[activity.activityID] = (made, activity.origin.name)
                // The display's applications see a newer copy at once; its content comes when one pastes.
                let own = store.entry()
                if activity.origin.nodeID != host.nodeID, store.settings().mode != .send, own.map({ made > $0.copiedAt }) ?? true {
                    x11?.post(.offerLazily(type: activity.keywords.first ?? ContentType.text))
                }
            case .removed:
                offers[activity.activityID] = nil
            }
        }
    }
}

/// A command's options after its subcommand: `--type MIME`, `--out FILE`, `--secret`, and the rest.
struct Options {
    var type: String?
    var out: String?
    var secret = false
    var positional: [String] = []

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--type", "--out":
                guard let value = rest.popFirst() else { throw PluginFailure.invalidArgument("\(argument) takes a value") }
                if argument == "--type" { type = value } else { out = value }
            case "--secret": secret = true
            default: positional.append(argument)
            }
        }
    }
}

extension WireValue {
    static func string(_ text: String) -> WireValue { with { $0.stringValue = text } }
    static func int(_ number: Int) -> WireValue { with { $0.intValue = Int64(number) } }
    static func double(_ number: Double) -> WireValue { with { $0.doubleValue = number } }
    static func list(_ values: [WireValue]) -> WireValue { with { $0.listValue = WireValueList.with { $0.values = values } } }
}

@_cdecl("handoff_plugin_entry")
public func handoffPluginEntry() -> UnsafeRawPointer {
    HandoffPluginExport.descriptor(for: ClipboardPlugin.self)
}
