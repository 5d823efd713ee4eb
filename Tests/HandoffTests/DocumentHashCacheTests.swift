import Foundation
@testable import Handoff
import Testing

@Suite("Documents' hashes kept by file identity")
struct DocumentHashCacheTests {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hash-cache-\(UUID().uuidString)")

    init() throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    private func file(_ name: String, _ text: String) throws -> URL {
        let url = folder.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        return url
    }

    /// Well past the racy window of a file written just now.
    private var later: Date { Date().addingTimeInterval(DocumentHashCache.racyWindow + 3) }

    @Test("a file's hash is kept while the file is unchanged; new content of the same size is hashed anew")
    func keptUntilChanged() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = DocumentHashCache(capacity: 8)
        let url = try file("ledger.csv", "first")
        let first = try cache.hash(of: url, now: later)
        #expect(first.0 == (try DocumentHash.ofFile(at: url)).0 && first.1 == 5)
        #expect(cache.count == 1)
        #expect(try cache.hash(of: url, now: later) == first)
        _ = try file("ledger.csv", "later")
        let second = try cache.hash(of: url, now: later)
        #expect(second.0 == (try DocumentHash.ofFile(at: url)).0, "a changed file was answered from the cache")
        #expect(second.0 != first.0)
    }

    @Test("a hash taken within the racy window of the file's last change is not kept (a write in the same clock tick would go unseen)")
    func racyHashesNotKept() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = DocumentHashCache(capacity: 8)
        let url = try file("fresh.txt", "just written")
        #expect(try cache.hash(of: url, now: Date()).1 == 12)
        #expect(cache.count == 0)
    }

    @Test("at most capacity files are kept; a file that cannot be read is an error")
    func bounded() throws {
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = DocumentHashCache(capacity: 2)
        for index in 0..<5 {
            _ = try cache.hash(of: try file("file-\(index)", "content \(index)"), now: later)
        }
        #expect(cache.count == 2)
        #expect(throws: HandoffError.self) { try cache.hash(of: folder.appendingPathComponent("missing"), now: later) }
    }
}
