import Foundation
import HandoffPluginKit

/// A paste's content over the continuation stream: restore checks the offer, readStream takes the
/// content (copied files into a folder of their own), writeStream sends this node's copy.
extension ClipboardPlugin {
    // MARK: Continuing side (a paste here)

    /// Checks the offer before any byte moves: this node takes others' copies, and not over its
    /// limit (or the prefetch's, for a pull no paste asked for).
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
        if let limit = lock.withLock({ pullLimit }), size > limit {
            throw PluginFailure.invalidArgument("the copy on \(activity.origin.name) is \(size) bytes, more than this node prefetches (\(limit)): `clipboard paste` pulls it")
        }
        var entry = ClipboardEntry(
            mimeType: mimeType, size: Int(size), copiedAt: Date(timeIntervalSince1970: copiedAt), node: activity.origin.name, local: false, secret: false)
        if case .intValue(let files)? = activity.userInfo["files"]?.kind {
            guard mimeType == URIList.mimeType, files > 0 else { throw PluginFailure.invalidArgument("a clipboard offer of \(files) files as \(mimeType)") }
            entry.files = Int(files)
        }
        lock.withLock { incoming[activity.activityID] = entry }
    }

    /// The content: exactly the size offered (the host has checked its length and CRC-32C), kept
    /// unless this node's own copy is newer.
    public func readStream(for activity: WireActivity, from reader: StreamReader) throws {
        guard var entry = lock.withLock({ incoming.removeValue(forKey: activity.activityID) }) else {
            _ = try reader.readAll()
            return
        }
        let content: Data
        var received: URL?
        if entry.files != nil {
            (content, received, entry.size) = try readFiles(from: reader, entry: entry)
        } else {
            content = try readContent(from: reader, entry: entry)
        }
        try lock.withLock {
            if let own = store.entry(), own.copiedAt > entry.copiedAt {
                host.log("kept this node's copy: newer than \(entry.node)'s")
                if let received { try? FileManager.default.removeItem(at: received) }
                return
            }
            try store.save(content, as: entry)
            store.removeReceived(keeping: received.map { [$0] } ?? [])
        }
        host.log("pasted \(entry.size) bytes (\(entry.mimeType)) copied on \(entry.node)")
    }

    private func readContent(from reader: StreamReader, entry: ClipboardEntry) throws -> Data {
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
        return content
    }

    /// Copied files, written as they arrive into a new folder under `received/` (removed again
    /// if anything is wrong with them). Their size may differ from the offer's (a file changed
    /// since it was copied, as a file manager's paste would take it) but never passes the limit.
    /// Returns their URIs here, the folder, and the bytes received.
    private func readFiles(from reader: StreamReader, entry: ClipboardEntry) throws -> (Data, URL, Int) {
        let limit = min(store.settings().maxBytes, lock.withLock { pullLimit } ?? .max)
        let folder = try store.newReceivedFolder()
        var bundle = FileBundleReader(folder: folder)
        var total = 0
        do {
            while let chunk = try reader.read() {
                total += chunk.count
                guard total <= limit else {
                    throw PluginFailure.invalidArgument("the files copied on \(entry.node) are over this node's limit of \(limit) bytes")
                }
                try bundle.feed(chunk)
            }
            try bundle.finish()
        } catch let error as FileBundleError {
            try? FileManager.default.removeItem(at: folder)
            throw PluginFailure.invalidArgument("the files copied on \(entry.node): \(error)")
        } catch {
            try? FileManager.default.removeItem(at: folder)
            throw error
        }
        return (URIList.make(bundle.roots), folder, total)
    }

    // MARK: Originating side

    /// Sends the offered copy's content (copied files read from disk as they go out); nothing
    /// for an offer that is no longer this node's copy.
    public func writeStream(for activity: WireActivity, to writer: StreamWriter) throws {
        guard activity.origin.nodeID == host.nodeID else { return }
        let copy: (ClipboardEntry, Data)? = lock.withLock {
            guard offered == activity.activityID, let entry = store.entry(), entry.local, !entry.secret,
                  let content = try? store.content() else { return nil }
            return (entry, content)
        }
        guard let (entry, content) = copy else { throw PluginFailure.notFound("the offered copy was replaced or withdrawn") }
        guard entry.files != nil, let files = URIList.files(in: content) else {
            writer.setExpectedLength(UInt64(content.count))
            try writer.write(content)
            return
        }
        do {
            let (items, bytes) = try FileBundle.walk(files)
            let limit = store.settings().maxBytes
            guard bytes <= limit else { throw PluginFailure.invalidArgument("the copied files grew to \(bytes) bytes, over the clipboard's limit of \(limit)") }
            writer.setExpectedLength(bytes)
            try FileBundle.write(items) { try writer.write($0) }
        } catch let error as FileBundleError {
            throw PluginFailure.failed("\(error)")
        }
    }
}
