import Testing
@testable import Handoff

@Suite("Hashed table (a node's tables that grow with the bus)")
struct HashedTableTests {
    /// A key whose hash the test chooses, so that keys collide as often as it likes.
    private struct ChosenKey: HashedKey, Hashable {
        var name: String
        var hashWord: Int
    }

    /// Random inserts, updates, removals (by key, by position, by predicate) against a `Dictionary`.
    private static func check(operations: Int, keys: Int, seed: UInt64, hash: (Int) -> Int) {
        var generator = SimulationRandom(seed: seed)
        var table = HashedTable<ChosenKey, Int>()
        var model: [ChosenKey: Int] = [:]
        for step in 0..<operations {
            let number = Int(generator.next() % UInt64(keys))
            let key = ChosenKey(name: "key-\(number)", hashWord: hash(number))
            switch generator.next() % 8 {
            case 0, 1:
                #expect(table.removeValue(forKey: key) == model.removeValue(forKey: key), "step \(step): remove \(number)")
            case 2:
                if let position = table.position(of: key) {
                    #expect(table.key(at: position) == key)
                    #expect(table.remove(at: position) == model.removeValue(forKey: key), "step \(step): remove at")
                }
            case 3 where step % 500 == 0:
                let cut = Int(generator.next() % UInt64(step + 1))
                table.removeAll { _, value in value < cut }
                model = model.filter { $0.value >= cut }
            default:
                #expect(table.updateValue(step, forKey: key) == model.updateValue(step, forKey: key), "step \(step): set \(number)")
            }
            #expect(table.count == model.count)
            let probeNumber = Int(generator.next() % UInt64(keys))
            let probe = ChosenKey(name: "key-\(probeNumber)", hashWord: hash(probeNumber))
            #expect(table[probe] == model[probe], "step \(step): find \(probeNumber)")
        }
        #expect(Dictionary(uniqueKeysWithValues: zip(table.keys, table.values)) == model)
        for (key, value) in model { #expect(table[key] == value) }
    }

    @Test("finds what was set and nothing removed, through growth and every way of removing, against a dictionary")
    func matchesADictionary() {
        Self.check(operations: 20_000, keys: 3_000, seed: 11) { HashedID("id-\($0)").hash }
    }

    @Test("keys that share a hash or its low 32 bits stay apart and findable (the key compared, not the hash)")
    func collidingHashes() {
        Self.check(operations: 5_000, keys: 200, seed: 12) { $0 % 5 }
        // Equal low words, different high ones: the index keeps only the low 32 bits.
        Self.check(operations: 5_000, keys: 200, seed: 13) { ($0 % 4) << 40 | 7 }
    }

    @Test("iterates in insertion order, and a removal moves the last entry into the gap")
    func order() {
        var table = HashedTable<HashedID, Int>()
        for number in 0..<6 { table.insertNew(HashedID("a\(number)"), number) }
        #expect(table.values == [0, 1, 2, 3, 4, 5])
        table.removeValue(forKey: HashedID("a1"))
        #expect(table.values == [0, 5, 2, 3, 4])
        #expect(table.position(of: HashedID("a5")) == 1)
        table.removeAll()
        #expect(table.isEmpty && table[HashedID("a0")] == nil)
        table.insertNew(HashedID("b"), 9)
        #expect(table[HashedID("b")] == 9)
    }

    @Test("as a set: insert once, contains, remove")
    func asASet() {
        var set = HashedTable<HashedID, Void>()
        #expect(!set.contains(HashedID("x")))
        let first = set.insert(HashedID("x")), again = set.insert(HashedID("x"))
        #expect(first && !again)
        #expect(set.count == 1 && set.contains(HashedID("x")))
        let removed = set.remove(HashedID("x")), removedAgain = set.remove(HashedID("x"))
        #expect(removed && !removedAgain)
        #expect(set.isEmpty)
    }
}
