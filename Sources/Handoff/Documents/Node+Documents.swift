import Foundation
import Glibc
import HandoffWire

// Document activities, the third way to pass data (activity.proto, DocumentRef): the continuing
// node opens the originator's file in place on shared storage when it can, and otherwise pulls a
// copy over a continuation stream that the originator's node serves itself.
extension Node {
    /// Opens the document `activity` refers to:
    ///
    /// 1. on storage this node shares with the originator (under one of
    ///    ``Configuration-swift.struct/sharedFolders``), the originator's file itself, when its
    ///    content has the advertised SHA-256;
    /// 2. else this node's copy in `folder`, when it already has that content;
    /// 3. else a copy pulled over a continuation stream into `folder` (named as the original),
    ///    checked against the advertised size and SHA-256, then moved into place.
    ///
    /// A copy is never overwritten when it was changed here since it was taken, or when it is
    /// newer than the version offered: that is a ``HandoffError/Code-swift.struct/documentConflict``,
    /// and the copy stays as it is. (`folder` keeps a small record per copy: `.NAME.handoff`.)
    ///
    /// - Throws: ``HandoffError``: ``HandoffError/Code-swift.struct/documentConflict``, the
    ///   stream's errors (``HandoffError/Code-swift.struct/peerLost``, …), or
    ///   ``HandoffError/Code-swift.struct/invalidConfiguration`` when the activity has no
    ///   document or `folder` cannot be written.
    public func openDocument(of activity: ContinuedActivity, into folder: URL) async throws(HandoffError) -> OpenedDocument {
        guard let document = activity.document else {
            throw HandoffError(.invalidConfiguration, "the activity refers to no document", activityType: activity.activityType)
        }
        let type = activity.activityType
        // 1. Shared storage: the originator's own file, if this node reaches it and it is the same content.
        let path = document.url.standardizedFileURL.path
        if own.configuration.sharedFolders.contains(where: { path.hasPrefix(URL(fileURLWithPath: $0).standardizedFileURL.path + "/") }),
           FileManager.default.isReadableFile(atPath: path),
           let (hash, _) = try? await Self.hash(of: document.url), hash == document.sha256 {
            return OpenedDocument(url: document.url, source: .sharedStorage, version: document.version)
        }
        // 2. A copy here: the same content, a copy to replace, or a conflict.
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw HandoffError(.invalidConfiguration, "cannot create \(folder.path): \(error)", activityType: type)
        }
        let name = document.url.lastPathComponent
        let copy = folder.appendingPathComponent(name)
        let record = DocumentRecord(folder: folder, name: name)
        if FileManager.default.fileExists(atPath: copy.path) {
            let (local, _) = try await Self.hash(of: copy)
            let taken = record.read()
            if local == document.sha256 {
                record.write(version: max(document.version, taken?.version ?? 0), sha256: local)
                return OpenedDocument(url: copy, source: .localCopy, version: document.version)
            }
            guard let taken, taken.sha256 == local else {
                throw HandoffError(.documentConflict, "your copy \(copy.path) was changed here since it was taken\(taken.map { " (version \($0.version))" } ?? ""); the originator offers version \(document.version). Nothing was overwritten: save your copy under another name, or remove it, and continue again", activityType: type)
            }
            guard document.version > taken.version else {
                throw HandoffError(.documentConflict, "your copy \(copy.path) is version \(taken.version), and the originator offers version \(document.version), with other content: not newer. Nothing was overwritten", activityType: type)
            }
        }
        // 3. Pulled from the originator, which sends the file itself.
        let streams = try await openStreams(for: activity, direction: .fromOriginator, document: true)
        let partial = folder.appendingPathComponent(".\(name).handoff-partial-\(UUID().uuidString.prefix(8))")
        let outcome = await Task.detached { () -> Result<([UInt8], UInt64), HandoffError> in
            do throws(HandoffError) {
                return .success(try await Self.receive(streams.input, into: partial, limit: document.size, activityType: type))
            } catch { return .failure(error) }
        }.value
        let received: ([UInt8], UInt64)
        do throws(HandoffError) { received = try outcome.get() } catch {
            try? FileManager.default.removeItem(at: partial)
            // The originator stops writing at once (a document longer than advertised, a full disk).
            await streams.cancel(reason: error.message)
            throw error
        }
        guard received.0 == document.sha256, received.1 == document.size else {
            try? FileManager.default.removeItem(at: partial)
            throw HandoffError(.documentConflict, "the document that arrived (\(received.1) bytes) is not the one the activity refers to (\(document.size) bytes, SHA-256 \(document.sha256Hex)): it changed at the originator meanwhile", activityType: type)
        }
        // rename(2): the copy is replaced at once, never seen half written.
        guard rename(partial.path, copy.path) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: partial)
            throw HandoffError(.invalidConfiguration, "cannot move the document into \(copy.path): \(reason)", activityType: type)
        }
        record.write(version: document.version, sha256: document.sha256)
        return OpenedDocument(url: copy, source: .stream, version: document.version)
    }

    /// A file's SHA-256 and size, computed on a worker thread: reading a large file blocks, and a
    /// detached task would block one of the process's event loops (the global executor) meanwhile.
    static func hash(of url: URL) async throws(HandoffError) -> ([UInt8], UInt64) {
        try await fileWorkers.run { () -> Result<([UInt8], UInt64), HandoffError> in
            do throws(HandoffError) { return .success(try documentHashes.hash(of: url)) } catch { return .failure(error) }
        }.get()
    }

    /// The threads that hash documents, shared by every node of the process.
    static let fileWorkers = PluginWorkers(limit: 2, name: "handoff-files")
    /// The hashes of files not changed since they were hashed, shared by every node of the process.
    static let documentHashes = DocumentHashCache(capacity: 256)

    /// Writes what `input` carries to `file`, hashing it on the way; returns hash and size. Past
    /// `limit` bytes (the size advertised) it stops: an originator that lies about the size, or
    /// whose file grew, does not fill this node's disk.
    private static func receive(
        _ input: ContinuationInputStream, into file: URL, limit: UInt64, activityType: String
    ) async throws(HandoffError) -> ([UInt8], UInt64) {
        guard FileManager.default.createFile(atPath: file.path, contents: nil), let handle = try? FileHandle(forWritingTo: file) else {
            throw HandoffError(.invalidConfiguration, "cannot write \(file.path)")
        }
        defer { try? handle.close() }
        var hasher = DocumentHash.Hasher256()
        var size: UInt64 = 0
        do {
            for try await chunk in input {
                guard size + UInt64(chunk.count) <= limit else {
                    throw HandoffError(.documentConflict, "the document that arrives is longer than the \(limit) bytes the activity refers to: it changed at the originator meanwhile", activityType: activityType)
                }
                try handle.write(contentsOf: chunk)
                hasher.update(chunk)
                size += UInt64(chunk.count)
            }
            try handle.synchronize()
        } catch let error as HandoffError {
            throw error
        } catch {
            throw HandoffError(.invalidConfiguration, "cannot write \(file.path): \(error)")
        }
        return (hasher.finish(), size)
    }

    /// Originating side: sends the document's file on the pair's output, after checking it still
    /// is the content advertised (else the pair fails with documentConflict, and its peer is told).
    static func sendDocument(_ document: DocumentReference, on pair: ContinuationStreams, key: StreamKey, node: Node, activityType: String) async {
        let (hash, size): ([UInt8], UInt64)
        do { (hash, size) = try await Self.hash(of: document.url) } catch {
            await node.failStream(key, HandoffError(.documentConflict, "the document \(document.url.lastPathComponent) cannot be read at the originator any more", activityType: activityType))
            return
        }
        guard hash == document.sha256, size == document.size else {
            await node.failStream(key, HandoffError(.documentConflict, "the document \(document.url.lastPathComponent) changed at the originator since version \(document.version) was advertised; continue again for the new version", activityType: activityType))
            return
        }
        do throws(HandoffError) {
            guard let handle = try? FileHandle(forReadingFrom: document.url) else {
                throw HandoffError(.documentConflict, "the document \(document.url.lastPathComponent) cannot be read at the originator any more", activityType: activityType)
            }
            defer { try? handle.close() }
            while let piece = try? handle.read(upToCount: 256 * 1024), !piece.isEmpty {
                try await pair.output.write(piece)
            }
            try await pair.output.finish()
        } catch {
            await node.failStream(key, error)
        }
    }
}

/// What a folder records of a document copy taken from another node: its version and the hash it
/// had when taken (`.NAME.handoff`, one line: "VERSION SHA256HEX"), so that a copy changed here
/// since is never overwritten.
struct DocumentRecord {
    let file: URL

    init(folder: URL, name: String) {
        file = folder.appendingPathComponent(".\(name).handoff")
    }

    func read() -> (version: UInt64, sha256: [UInt8])? {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return nil }
        let parts = text.split(separator: " ")
        guard parts.count == 2, let version = UInt64(parts[0]), parts[1].count >= 64 else { return nil }
        let hex = Array(parts[1].prefix(64))
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(hex[index...index + 1]), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return (version, bytes)
    }

    func write(version: UInt64, sha256: [UInt8]) {
        let line = "\(version) \(DocumentHash.hex(sha256))\n"
        try? line.write(to: file, atomically: true, encoding: .utf8)
    }
}
