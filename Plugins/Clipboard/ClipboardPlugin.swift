// Universal Clipboard as a Handoff plugin: a copy on one node is offered to the account's other
// nodes, and its content crosses only when someone pastes there.
//
//   org.handoff.clipboard   what the clipboard holds, never the content: its MIME type, size, a
//                           short preview of text (the names of copied files), when it was copied;
//                           it expires (2 minutes by default). A paste continues the newest one and
//                           pulls the content over a continuation stream (copied files as one
//                           bundle, FileBundle); newest copy wins across the account.
//
// Content marked by a password manager (--secret: x-kde-passwordManagerHint: secret) is never
// offered; `pause`, `mode send|receive`, `expiry`, `limit` and `prefetch` set what this node shares.

import Foundation
import HandoffPluginKit
import SwiftProtobuf

// Invariant for @unchecked Sendable: every var is touched only under `lock` (the desktop's thread
// and the host's threads call in at once: the plugin is thread-safe).
public final class ClipboardPlugin: HandoffPlugin, @unchecked Sendable {
    public static let name = "clipboard"
    public static let version = "1.1.0"
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
    /// Guards the vars below, and the store's files, against concurrent calls.
    let lock = NSLock()
    /// One pull at a time (a paste waits for a prefetch), so `pullLimit` is that pull's.
    private let pulling = NSLock()
    /// The id of the activity that offers this node's copy, when one is offered.
    var offered: String?
    /// What restore learned of the copy a paste is pulling, by activity id.
    var incoming: [String: ClipboardEntry] = [:]
    /// The most the pull under way takes (a prefetch's), below the clipboard's limit.
    var pullLimit: Int?
    /// Other nodes' offers this node knows: when each was made, and where.
    private var offers: [String: (updatedAt: Date, node: String)] = [:]

    /// The clipboard of the agent's desktop (Wayland or X11), when it has one.
    private(set) var desktop: (any DisplayClipboard)?

    public init(host: PluginHost) throws {
        self.host = host
        store = ClipboardStore(folder: host.dataDirectory)
        let store = self.store
        desktop = desktopClipboard(
            environment: ProcessInfo.processInfo.environment,
            maxBytes: { store.settings().maxBytes }, prefetchBytes: { store.settings().prefetchBytes },
            handlers: DisplayHandlers(
                copied: { [unowned self] content, type in copiedOnDisplay(content, type: type) },
                wanted: { [unowned self] type, limit in wanted(type, prefetchLimit: limit) },
                log: { [host] in host.log($0) }))
    }

    // MARK: Copies made here

    /// A copy made here (by command or on the desktop): this node's clipboard, offered to the
    /// account unless secret, paused or receive-only. Returns what happened, in words.
    func take(_ content: Data, type: String, secret: Bool) throws -> String {
        let settings = store.settings()
        var entry = ClipboardEntry(mimeType: type, size: content.count, copiedAt: Date(), node: host.nodeName, local: true, secret: secret)
        var copied = "copied \(content.count) bytes (\(type))"
        var files: [URL] = []
        if type == URIList.mimeType, let listed = URIList.files(in: content) {
            files = listed
            // Files: offered by name and total size; their bytes are read when someone pastes.
            let bytes: UInt64
            do { bytes = try FileBundle.walk(files).bytes } catch { throw PluginFailure.notFound("\(error)") }
            guard bytes <= settings.maxBytes else {
                throw PluginFailure.invalidArgument("the copied files are \(bytes) bytes, over the clipboard's limit of \(settings.maxBytes) (`clipboard limit BYTES`)")
            }
            entry.files = files.count
            entry.size = Int(bytes)
            copied = "copied \(URIList.summary(of: files.map(\.lastPathComponent))) (\(bytes) bytes)"
        }
        try lock.withLock {
            try store.save(content, as: entry)
            store.removeReceived(keeping: files)
        }
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

    /// Something on the desktop copied (nil: a password manager's copy, not read).
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

    /// What the desktop was promised, fetched: the newest copy, in the type it was promised (the
    /// offer may have gone meanwhile, leaving an older copy of another type). A prefetch (a
    /// `prefetchLimit`: nothing waits on it) that fails, on a loaded or slow link, is tried again
    /// a few times, a little later each; a paste is not kept waiting.
    private func wanted(_ type: String, prefetchLimit: Int?) -> Data? {
        let attempts = prefetchLimit == nil ? 1 : Self.prefetchAttempts
        for attempt in 1...attempts {
            do {
                if let (entry, content) = try newest(limit: prefetchLimit) { return entry.mimeType == type ? content : nil }
                // Nothing came though an offer is known (the node found none to continue yet):
                // a prefetch asks again.
                guard attempt < attempts, lock.withLock({ !offers.isEmpty }) else { return nil }
                host.log("the account's copy was not found for the display (attempt \(attempt) of \(attempts)); trying again")
            } catch {
                let again = attempt < attempts ? "; trying again" : ""
                host.log("could not fetch the account's copy for the display (attempt \(attempt) of \(attempts)): \(error)\(again)", level: HANDOFF_LOG_WARNING)
            }
            if attempt < attempts { Thread.sleep(forTimeInterval: 0.25 * Double(1 << (attempt - 1))) }
        }
        return nil
    }

    /// How many times a prefetch is tried (waits of 0.25, 0.5 and 1 s between).
    static let prefetchAttempts = 4

    /// The newest copy in the account, made this node's clipboard: another node's offer is pulled
    /// (at most `limit` bytes of it, when given) only when it is newer than this node's own copy,
    /// or when nothing is known of the offers yet (a node that just joined). Blocks while pulled.
    func newest(limit: Int? = nil) throws -> (entry: ClipboardEntry, content: Data)? {
        try pulling.withLock {
            let (own, newestOffer) = lock.withLock { (store.entry(), offers.values.map(\.updatedAt).max()) }
            if own == nil || newestOffer.map({ $0 > own!.copiedAt }) ?? true {
                lock.withLock { pullLimit = limit }
                defer { lock.withLock { pullLimit = nil } }
                do {
                    // A paste waits on a node that knows a copy of its own only briefly; a
                    // prefetch (a `limit`) waits on no one.
                    try host.continueActivity(type: Self.clipboardType, timeout: own == nil || limit != nil ? .seconds(2) : .milliseconds(200))
                } catch let failure as PluginFailure where failure.status == HANDOFF_NOT_FOUND {
                    // No other node offers a copy: this node's own is the newest.
                }
            }
            return try lock.withLock {
                guard let entry = store.entry() else { return nil }
                return (entry, try store.content())
            }
        }
    }

    // MARK: Offering

    /// Makes the copy's activity current in place of the last one: what it is, never the content.
    private func offer(_ entry: ClipboardEntry, content: Data, expiry: Int) throws -> String {
        var activity = WireActivity()
        activity.activityType = Self.clipboardType
        activity.userInfo = [
            "mimeTypes": .list([.string(entry.mimeType)]),
            "size": .int(entry.size),
            "copiedAt": .double(entry.copiedAt.timeIntervalSince1970),
        ]
        if entry.files != nil, let files = URIList.files(in: content) {
            let names = files.map(\.lastPathComponent)
            activity.title = "Clipboard: \(URIList.summary(of: names))"
            activity.userInfo["files"] = .int(files.count)
            activity.userInfo["names"] = .list(names.prefix(20).map { .string($0) })
        } else if let preview = ContentType.preview(content, mimeType: entry.mimeType) {
            activity.title = "Clipboard: \(preview)"
            activity.userInfo["preview"] = .string(preview)
        } else {
            activity.title = "Clipboard: \(entry.size) bytes of \(entry.mimeType)"
        }
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

    func endOffer() {
        guard let id = lock.withLock({ () -> String? in defer { offered = nil }; return offered }) else { return }
        try? host.end(id)
    }

    public func shutdown() {
        desktop?.stop()
        endOffer()
    }

    // MARK: The account's offers

    public func activityChanged(_ activity: WireActivity, change: ActivityChange) {
        lock.withLock {
            switch change {
            case .appeared, .updated:
                let made = activity.hasUpdatedAt ? activity.updatedAt.date : Date()
                offers[activity.activityID] = (made, activity.origin.name)
                // The desktop's applications see a newer copy at once; its content comes when one
                // pastes (X11), or now when small enough (Wayland).
                let own = store.entry()
                if activity.origin.nodeID != host.nodeID, store.settings().mode != .send, own.map({ made > $0.copiedAt }) ?? true {
                    desktop?.post(.offerLazily(type: activity.keywords.first ?? ContentType.text))
                }
            case .removed:
                offers[activity.activityID] = nil
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
