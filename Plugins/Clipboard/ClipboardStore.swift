import Foundation
import Glibc
import HandoffPluginKit

/// What this node's clipboard holds, as the plugin keeps it in its data folder: the content
/// (`content.bin`) and what it is (`content.json`), both written atomically.
struct ClipboardEntry: Codable, Equatable {
    var mimeType: String
    var size: Int
    /// When it was copied, on the copying node's clock (newest copy wins across the account).
    var copiedAt: Date
    /// The node it was copied on (this node's name for a local copy).
    var node: String
    var local: Bool
    /// Marked by a password manager (x-kde-passwordManagerHint: secret): never offered.
    var secret: Bool
    /// Copied files (`text/uri-list` of `file://` URIs): how many were copied (folders count
    /// once). The content is then their URIs on this node, and `size` the bundle's bytes.
    var files: Int? = nil
}

/// Who this node shares its clipboard with, as `clipboard pause|resume|mode|expiry|limit` set it.
struct ClipboardSettings: Codable, Equatable {
    enum Mode: String, Codable, CaseIterable {
        /// Offers its copies and takes the account's (the default).
        case both
        /// Offers its copies; never pastes another node's.
        case send
        /// Pastes the account's copies; never offers its own.
        case receive
    }

    var paused = false
    var mode = Mode.both
    /// How long a copy stays offered (Apple's Universal Clipboard: about two minutes).
    var expirySeconds = 120
    /// The largest content offered or taken (KDE Connect's limit).
    var maxBytes = 50 * 1024 * 1024
    /// Where a desktop cannot wait for a paste to fetch (Wayland's wl-copy holds its content
    /// before it offers it): offers up to this size are pulled when they appear.
    var prefetchBytes = 1024 * 1024

    init() {}

    /// Settings saved by an older plugin lack the newer fields: they take their defaults.
    init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        paused = try values.decodeIfPresent(Bool.self, forKey: .paused) ?? paused
        mode = try values.decodeIfPresent(Mode.self, forKey: .mode) ?? mode
        expirySeconds = try values.decodeIfPresent(Int.self, forKey: .expirySeconds) ?? expirySeconds
        maxBytes = try values.decodeIfPresent(Int.self, forKey: .maxBytes) ?? maxBytes
        prefetchBytes = try values.decodeIfPresent(Int.self, forKey: .prefetchBytes) ?? prefetchBytes
    }

    /// Whether copies made here are offered, and if not, why.
    var offersCopies: (Bool, String) {
        if paused { return (false, "paused (`clipboard resume` offers the next copy)") }
        if mode == .receive { return (false, "this node only receives (`clipboard mode both` to offer)") }
        return (true, "")
    }
}

/// The plugin's files: the clipboard's content and entry, and the settings.
struct ClipboardStore {
    let folder: URL

    var contentURL: URL { folder.appendingPathComponent("content.bin") }
    /// Where other nodes' copied files are written, a folder per paste.
    var receivedURL: URL { folder.appendingPathComponent("received") }

    /// A new, empty folder for one paste's files.
    func newReceivedFolder() throws -> URL {
        let made = receivedURL.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
        return made
    }

    /// Removes the files of earlier pastes once a newer copy has replaced them, but not those the
    /// clipboard now holds (`kept`: a paste's own, or received files copied again here).
    func removeReceived(keeping kept: [URL]) {
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: receivedURL.path)) ?? []
        for name in folders {
            let folder = receivedURL.appendingPathComponent(name).standardizedFileURL.path + "/"
            guard !kept.contains(where: { ($0.standardizedFileURL.path + "/").hasPrefix(folder) }) else { continue }
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    func entry() -> ClipboardEntry? { load("content.json") }
    func settings() -> ClipboardSettings { load("settings.json") ?? ClipboardSettings() }

    func content() throws -> Data { try Data(contentsOf: contentURL) }

    /// Replaces the clipboard: the content first, then the entry that describes it.
    func save(_ content: Data, as entry: ClipboardEntry) throws {
        try write(content, to: "content.bin")
        try write(try JSONEncoder().encode(entry), to: "content.json")
    }

    func save(_ settings: ClipboardSettings) throws {
        try write(try JSONEncoder().encode(settings), to: "settings.json")
    }

    private func load<T: Decodable>(_ name: String) -> T? {
        guard let data = try? Data(contentsOf: folder.appendingPathComponent(name)) else { return nil }
        return try? JSONDecoder().decode(T.self, from: data)
    }

    /// Temporary file, then rename: a reader sees the old file or the new one, never half of one.
    private func write(_ data: Data, to name: String) throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let final = folder.appendingPathComponent(name)
        let temporary = folder.appendingPathComponent(".\(name).\(UUID().uuidString)")
        try data.write(to: temporary)
        guard rename(temporary.path, final.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: temporary)
            throw PluginFailure.failed("cannot write \(final.path): \(reason)")
        }
    }
}

/// What content is, when the copier did not say: UTF-8 text, a PNG, or bytes.
enum ContentType {
    static let text = "text/plain;charset=utf-8"

    static func guess(_ content: Data) -> String {
        if content.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        if String(data: content, encoding: .utf8) != nil { return text }
        return "application/octet-stream"
    }

    static func isText(_ mimeType: String) -> Bool { mimeType.hasPrefix("text/") }

    /// The first line or so of text content, for the advertisement (never the whole of it).
    static func preview(_ content: Data, mimeType: String, limit: Int = 80) -> String? {
        guard isText(mimeType) else { return nil }
        // (A cut through a character decodes as U+FFFD, at the end only.)
        let text = String(decoding: content.prefix(limit * 4), as: UTF8.self)
        let flat = text.replacingOccurrences(of: "\n", with: " ").trimmingCharacters(in: .whitespaces)
        return flat.count > limit ? String(flat.prefix(limit)) + "…" : flat
    }
}
