import Testing
@testable import Handoff

@Suite("Table keys hashed once (HashedID)")
struct HashedIDTests {
    @Test("the same id is the same key, whenever hashed; another id is another key")
    func identity() {
        let ids = (0..<10_000).map { _ in ActivityIDs.make() }
        let keys = Set(ids.map(HashedID.init))
        #expect(keys.count == ids.count)
        for id in ids.prefix(100) {
            #expect(keys.contains(HashedID(id)))
            #expect(HashedID(id) == HashedID(String(decoding: Array(id.utf8), as: UTF8.self)), "equal content, another string's storage")
            #expect(HashedID(id).hash == HashedID(id).hash)
            #expect(!keys.contains(HashedID(id.lowercased())))
        }
        #expect("\(HashedID("node-a"))" == "node-a")
    }

    @Test("keys of ids that differ only where a table might not look are apart")
    func wholeIDHashed() {
        // The hash covers every byte: ids differing only in their last character are still apart.
        let base = String(repeating: "A", count: 35)
        let keys = Set("0123456789ABCDEF".map { HashedID(base + String($0)) })
        #expect(keys.count == 16)
        #expect(Set(keys.map(\.hash)).count == 16)
    }
}
