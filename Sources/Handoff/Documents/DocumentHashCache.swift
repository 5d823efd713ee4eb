import Foundation
import Glibc
import Synchronization

/// Documents' hashes by file identity, so that hashing an unchanged file again costs a `stat`.
///
/// An originator checks a document against its advertised hash before each send, and a peer may
/// open the document's pair and cancel it as fast as it likes: without this, each open was a
/// whole pass over the file. A file is taken as unchanged while its device, inode, size,
/// modification and status-change times are. A hash taken within ``racyWindow`` of the file's last
/// change is not kept: a write in the same clock tick as the hash leaves the times as they were
/// (git's "racily clean" files), and filesystems with coarse times make that tick long.
final class DocumentHashCache: Sendable {
    /// What identifies a file's content without reading it.
    struct Identity: Hashable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: timespec
        let changed: timespec

        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            modified = info.st_mtim
            changed = info.st_ctim
        }

        /// The later of the two times, in seconds since 1970.
        var lastChange: Double {
            max(Double(modified.tv_sec) + Double(modified.tv_nsec) / 1e9, Double(changed.tv_sec) + Double(changed.tv_nsec) / 1e9)
        }

        static func == (a: Identity, b: Identity) -> Bool {
            a.device == b.device && a.inode == b.inode && a.size == b.size
                && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
                && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(device)
            hasher.combine(inode)
            hasher.combine(size)
            hasher.combine(modified.tv_nsec)
        }
    }

    private struct Entry {
        let identity: Identity
        let sha256: [UInt8]
        let size: UInt64
    }

    /// How long after a file's last change its hash is trusted to stay its hash.
    static let racyWindow: Double = 2
    let capacity: Int
    private let entries = Mutex<[String: Entry]>([:])

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// The file's SHA-256 and size: kept from an earlier pass while the file is unchanged, else
    /// read now (on the caller's thread: call it on a worker).
    func hash(of url: URL, now: Date = Date()) throws(HandoffError) -> ([UInt8], UInt64) {
        let path = url.path
        let before = Identity(path: path)
        if let before, let kept = entries.withLock({ $0[path] }), kept.identity == before {
            return (kept.sha256, kept.size)
        }
        let (sha256, size) = try DocumentHash.ofFile(at: url)
        // Kept only when nothing changed while it was read, and not within the racy window.
        guard let before, Identity(path: path) == before, UInt64(before.size) == size,
              now.timeIntervalSince1970 - before.lastChange >= Self.racyWindow else { return (sha256, size) }
        entries.withLock { entries in
            if entries.count >= capacity, entries[path] == nil, let any = entries.keys.first { entries[any] = nil }
            entries[path] = Entry(identity: before, sha256: sha256, size: size)
        }
        return (sha256, size)
    }

    /// How many files' hashes are kept (for tests).
    var count: Int { entries.withLock { $0.count } }
}
