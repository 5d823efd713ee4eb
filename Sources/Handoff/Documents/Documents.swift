import CHandoffChecksum
import Foundation
import HandoffWire

/// A document an activity refers to: where its originator has it, its version, and what its
/// content hashes to (activity.proto, `DocumentRef`).
public struct DocumentReference: Hashable, Sendable {
    /// Where the originator has the document (a file URL).
    public let url: URL
    /// The originator's version of it: higher is newer.
    public let version: UInt64
    /// SHA-256 of the content.
    public let sha256: [UInt8]
    /// The content's size in bytes.
    public let size: UInt64

    /// A reference to the file at `url` as it is now (its hash and size read from it).
    ///
    /// - Throws: ``HandoffError`` (``HandoffError/Code-swift.struct/invalidConfiguration``) when the file cannot be read.
    public static func file(at url: URL, version: UInt64) throws(HandoffError) -> DocumentReference {
        let (hash, size) = try DocumentHash.ofFile(at: url)
        return DocumentReference(url: url, version: version, sha256: hash, size: size)
    }

    init(url: URL, version: UInt64, sha256: [UInt8], size: UInt64) {
        self.url = url
        self.version = version
        self.sha256 = sha256
        self.size = size
    }

    init(wire: WireDocumentRef, activityType: String) throws(HandoffError) {
        guard let url = URL(string: wire.url), url.isFileURL, wire.sha256.count == 32 else {
            throw HandoffError(.malformedMessage, "the activity's document is not a file URL with a 32-byte SHA-256: \(wire.url)", activityType: activityType)
        }
        self.init(url: url, version: wire.version, sha256: Array(wire.sha256), size: wire.size)
    }

    var wire: WireDocumentRef {
        var wire = WireDocumentRef()
        wire.url = url.absoluteString
        wire.version = version
        wire.sha256 = Data(sha256)
        wire.size = size
        return wire
    }

    /// The hash in hexadecimal, for messages and the local copy's record.
    public var sha256Hex: String { DocumentHash.hex(sha256) }
}

/// A document as the continuing node opened it.
public struct OpenedDocument: Hashable, Sendable {
    /// Where it came from.
    public enum Source: Hashable, Sendable {
        /// The originator's own file, reached on storage this node shares with it.
        case sharedStorage
        /// A copy this node already had, with the same content.
        case localCopy
        /// Pulled over a continuation stream just now, into the folder given.
        case stream
    }

    /// The file to open: the shared one, or this node's copy.
    public let url: URL
    /// How it got here.
    public let source: Source
    /// The document's version.
    public let version: UInt64
}

/// SHA-256 of files and bytes, on the C implementation (CHandoffChecksum).
enum DocumentHash {
    /// The hash and size of a file, read in 1 MiB pieces.
    static func ofFile(at url: URL) throws(HandoffError) -> ([UInt8], UInt64) {
        guard let handle = try? FileHandle(forReadingFrom: url) else {
            throw HandoffError(.invalidConfiguration, "cannot read the document \(url.path)")
        }
        defer { try? handle.close() }
        var hasher = Hasher256()
        var size: UInt64 = 0
        while true {
            let piece: Data?
            do { piece = try handle.read(upToCount: 1 << 20) } catch {
                throw HandoffError(.invalidConfiguration, "cannot read the document \(url.path): \(error)")
            }
            guard let piece, !piece.isEmpty else { break }
            hasher.update(piece)
            size += UInt64(piece.count)
        }
        return (hasher.finish(), size)
    }

    /// Bytes in lowercase hexadecimal, as the hash is shown and recorded.
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// SHA-256 in pieces.
    struct Hasher256 {
        private var context = handoff_sha256()

        init() { handoff_sha256_init(&context) }

        mutating func update(_ bytes: some ContiguousBytes) {
            bytes.withUnsafeBytes { handoff_sha256_update(&context, $0.baseAddress, $0.count) }
        }

        mutating func finish() -> [UInt8] {
            var digest = [UInt8](repeating: 0, count: 32)
            handoff_sha256_final(&context, &digest)
            return digest
        }
    }
}
