import Foundation
import Glibc

/// Copied files as one stream: what a file manager's copy (`text/uri-list` of `file://` URIs)
/// becomes on the wire, read from disk and written to disk a chunk at a time (never whole in
/// memory).
///
///     "HFB1"                                     magic and version
///     then records, each:
///       kind    u8      1 folder, 2 file, 0 end
///       path    u16 length (big-endian), UTF-8   relative, '/'-separated, each part a plain name
///       (file)  mode u16 (the permission bits), size u64 (big-endian), then size bytes
///
/// A folder is listed before what it holds. The reader trusts nothing: every path is checked to
/// stay inside the folder it writes to, counts and sizes are bounded by what was offered.
enum FileBundle {
    static let magic: [UInt8] = Array("HFB1".utf8)
    static let maxEntries = 100_000
    static let maxPathBytes = 4_096

    /// One item of a copy: a file or a folder, by its path on this node and its path in the bundle.
    struct Item: Equatable {
        enum Kind: UInt8 { case folder = 1, file = 2 }
        var kind: Kind
        var source: URL
        var path: String
        var size: UInt64
        var mode: UInt16
    }

    /// What was copied, walked: every folder and regular file under the given files (symbolic
    /// links and devices are left out), and the bundle's exact size.
    static func walk(_ roots: [URL]) throws -> (items: [Item], bytes: UInt64) {
        var items: [Item] = []
        var names = Set<String>()
        func visit(_ url: URL, as path: String) throws {
            var info = stat()
            guard lstat(url.path, &info) == 0 else { throw FileBundleError.unreadable(url.path, String(cString: strerror(errno))) }
            let mode = UInt16(info.st_mode & 0o777)
            switch info.st_mode & S_IFMT {
            case S_IFREG:
                items.append(Item(kind: .file, source: url, path: path, size: UInt64(info.st_size), mode: mode))
            case S_IFDIR:
                items.append(Item(kind: .folder, source: url, path: path, size: 0, mode: mode))
                let children = try FileManager.default.contentsOfDirectory(atPath: url.path).sorted()
                for child in children { try visit(url.appendingPathComponent(child), as: path + "/" + child) }
            default:
                return
            }
            guard items.count <= maxEntries else { throw FileBundleError.tooMany(maxEntries) }
        }
        for root in roots {
            let name = root.lastPathComponent
            guard names.insert(name).inserted else { throw FileBundleError.duplicateName(name) }
            try visit(root, as: name)
        }
        let bytes = items.reduce(UInt64(magic.count + 1)) { total, item in
            total + 3 + UInt64(item.path.utf8.count) + (item.kind == .file ? 10 + item.size : 0)
        }
        return (items, bytes)
    }

    /// Writes the bundle of `items` through `emit`, in chunks of at most `chunk` bytes. Throws when
    /// a file no longer has the size it had when walked (the stream's length is promised up front).
    static func write(_ items: [Item], chunk: Int = 256 * 1024, emit: (Data) throws -> Void) throws {
        var buffer = Data(magic)
        func flush(over limit: Int) throws {
            guard buffer.count >= limit, !buffer.isEmpty else { return }
            try emit(buffer)
            buffer.removeAll(keepingCapacity: true)
        }
        for item in items {
            buffer.append(item.kind.rawValue)
            append(UInt16(item.path.utf8.count), to: &buffer)
            buffer.append(contentsOf: item.path.utf8)
            guard item.kind == .file else { continue }
            append(item.mode, to: &buffer)
            append(item.size, to: &buffer)
            guard let file = FileHandle(forReadingAtPath: item.source.path) else {
                throw FileBundleError.unreadable(item.source.path, "cannot open")
            }
            defer { try? file.close() }
            var left = item.size
            while left > 0 {
                try flush(over: chunk)
                let piece = try file.read(upToCount: Int(min(left, UInt64(chunk)))) ?? Data()
                guard !piece.isEmpty else { throw FileBundleError.changed(item.source.path) }
                buffer.append(piece)
                left -= UInt64(piece.count)
            }
            if try file.read(upToCount: 1)?.isEmpty == false { throw FileBundleError.changed(item.source.path) }
            try flush(over: chunk)
        }
        buffer.append(0)
        try emit(buffer)
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to data: inout Data) {
        withUnsafeBytes(of: value.bigEndian) { data.append(contentsOf: $0) }
    }
}

/// Why copied files could not be bundled or unbundled.
enum FileBundleError: Error, CustomStringConvertible {
    case unreadable(String, String)
    case changed(String)
    case duplicateName(String)
    case tooMany(Int)
    case malformed(String)
    case unsafePath(String)

    var description: String {
        switch self {
        case .unreadable(let path, let why): "cannot read \(path): \(why)"
        case .changed(let path): "\(path) changed size after it was copied"
        case .duplicateName(let name): "two copied files are named \(name)"
        case .tooMany(let limit): "more than \(limit) files and folders"
        case .malformed(let why): "the copied files arrived malformed: \(why)"
        case .unsafePath(let path): "a copied file's path leaves its folder: \(path)"
        }
    }
}

/// Reads a bundle as it arrives, chunk by chunk, into a folder: files are written as their bytes
/// come, so memory holds one chunk whatever the size.
struct FileBundleReader {
    let folder: URL
    /// The top-level items written, in order (what the clipboard lists).
    private(set) var roots: [URL] = []
    private(set) var finished = false
    /// Bytes received and not yet taken, from `cursor` on (compacted once a chunk is taken, so a
    /// chunk of many small items is not moved once per item).
    private var pending = Data()
    private var cursor = 0
    private var sawMagic = false
    private var entries = 0
    private var file: (handle: FileHandle, left: UInt64, path: String)?

    init(folder: URL) { self.folder = folder }

    mutating func feed(_ chunk: Data) throws {
        pending.append(chunk)
        while try step() {}
        pending.removeFirst(cursor)
        cursor = 0
        // What is left is less than one header: never more than a path's length.
        guard pending.count <= FileBundle.maxPathBytes + 16 else { throw FileBundleError.malformed("a header too long") }
    }

    /// Checks that the bundle ended where the stream did.
    func finish() throws {
        guard finished else { throw FileBundleError.malformed("it ended early") }
    }

    /// Takes one step from `pending`; false when it needs more bytes.
    private mutating func step() throws -> Bool {
        let available = pending.count - cursor
        let start = pending.startIndex + cursor
        if finished {
            guard available == 0 else { throw FileBundleError.malformed("bytes after its end") }
            return false
        }
        if !sawMagic {
            guard available >= FileBundle.magic.count else { return false }
            guard Array(pending[start..<start + FileBundle.magic.count]) == FileBundle.magic else { throw FileBundleError.malformed("not a bundle of files") }
            cursor += FileBundle.magic.count
            sawMagic = true
            return true
        }
        if var open = file {
            guard available > 0 else { return false }
            let take = Int(min(open.left, UInt64(available)))
            try open.handle.write(contentsOf: pending[start..<start + take])
            cursor += take
            open.left -= UInt64(take)
            if open.left == 0 {
                try open.handle.close()
                file = nil
            } else {
                file = open
            }
            return true
        }
        guard available > 0 else { return false }
        let kind = pending[start]
        if kind == 0 {
            cursor += 1
            finished = true
            return true
        }
        guard let itemKind = FileBundle.Item.Kind(rawValue: kind) else { throw FileBundleError.malformed("an item of kind \(kind)") }
        guard available >= 3 else { return false }
        let length = Int(number(UInt16.self, at: 1))
        guard length > 0, length <= FileBundle.maxPathBytes else { throw FileBundleError.malformed("a path of \(length) bytes") }
        let header = 3 + length + (itemKind == .file ? 10 : 0)
        guard available >= header else { return false }
        let path = try checked(String(decoding: pending[start + 3..<start + 3 + length], as: UTF8.self))
        entries += 1
        guard entries <= FileBundle.maxEntries else { throw FileBundleError.tooMany(FileBundle.maxEntries) }
        let target = folder.appendingPathComponent(path)
        if !path.contains("/") { roots.append(target) }
        switch itemKind {
        case .folder:
            guard mkdir(target.path, 0o755) == 0 || errno == EEXIST else { throw FileBundleError.unreadable(target.path, String(cString: strerror(errno))) }
        case .file:
            let mode = number(UInt16.self, at: 3 + length) & 0o777
            let size = number(UInt64.self, at: 5 + length)
            // O_EXCL: a name sent twice, or a link planted by an earlier item, is refused.
            let descriptor = open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode_t(mode | 0o600))
            guard descriptor >= 0 else { throw FileBundleError.unsafePath(path + ": " + String(cString: strerror(errno))) }
            let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            if size == 0 { try handle.close() } else { file = (handle, size, path) }
        }
        cursor += header
        return true
    }

    /// A path that stays inside the folder: plain names, no `.`, `..` or empty parts, and its
    /// parent already written by an earlier item of this bundle.
    private func checked(_ path: String) throws -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." || $0.contains("\0") }) else {
            throw FileBundleError.unsafePath(path)
        }
        if parts.count > 1 {
            let parent = parts.dropLast().joined(separator: "/")
            var info = stat()
            guard lstat(folder.appendingPathComponent(parent).path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                throw FileBundleError.unsafePath(path)
            }
        }
        return path
    }

    private func number<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        var value = T.zero
        let start = pending.startIndex + cursor + offset
        for byte in pending[start..<start + MemoryLayout<T>.size] { value = value << 8 | T(byte) }
        return value
    }
}
