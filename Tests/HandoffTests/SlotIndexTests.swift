import Testing
@testable import Handoff

@Suite("Slot index (the broker cache's ids)")
struct SlotIndexTests {
    /// Keys are the slots' numbers here; `hash` chooses how many collide.
    private static func check(
        operations: Int, keys: Int32, seed: UInt64, hash: (Int32) -> UInt32
    ) {
        var generator = SimulationRandom(seed: seed)
        var index = SlotIndex(minimumCapacity: 4)
        var model = Set<Int32>()
        for step in 0..<operations {
            let key = Int32(generator.next() % UInt64(keys))
            if generator.next() % 3 == 0 {
                let removed = index.remove(key, hash: hash(key))
                #expect(removed == model.contains(key), "step \(step): remove \(key)")
                model.remove(key)
            } else if !model.contains(key) {
                index.insert(key, hash: hash(key))
                model.insert(key)
            }
            #expect(index.count == model.count)
            // Every key present is found, and one absent is not.
            let probe = Int32(generator.next() % UInt64(keys))
            #expect((index.slot(hash: hash(probe)) { $0 == probe } != nil) == model.contains(probe), "step \(step): find \(probe)")
        }
        for key in model { #expect(index.slot(hash: hash(key)) { $0 == key } == key) }
        #expect(Set(index.slots) == model)
    }

    @Test("finds what was inserted and nothing removed, through growth, against a set")
    func matchesASet() {
        Self.check(operations: 20_000, keys: 3_000, seed: 1) { SlotIndex.hash(String($0)) }
    }

    @Test("keys that share a hash, or a home bucket, stay findable as others are removed around them (shifting back, wrapping round the end)")
    func collisionsAndWrapping() {
        // Seven hashes for every key: long runs of equal hashes.
        Self.check(operations: 5_000, keys: 200, seed: 2) { UInt32($0 % 7) }
        // Homes at the table's last buckets whatever its size: runs wrap round to the front.
        Self.check(operations: 5_000, keys: 200, seed: 3) { UInt32.max - UInt32($0 % 3) }
        // Distinct hashes that share home buckets (equal low bits).
        Self.check(operations: 5_000, keys: 200, seed: 4) { UInt32($0) << 20 }
    }

    @Test("a removed key leaves the others of its run where lookups find them")
    func removalInTheMiddleOfARun() {
        var index = SlotIndex(minimumCapacity: 4)
        for slot: Int32 in 0..<5 { index.insert(slot, hash: 3) }
        let first = index.remove(2, hash: 3), second = index.remove(2, hash: 3)
        #expect(first && !second)
        for slot: Int32 in [0, 1, 3, 4] { #expect(index.slot(hash: 3) { $0 == slot } == slot) }
        #expect(index.slot(hash: 3) { $0 == 2 } == nil)
        #expect(index.count == 4)
    }

    @Test("an index made empty allocates on its first insert; a slot moved is found at its new number only")
    func emptyStartAndMove() {
        var index = SlotIndex(minimumCapacity: 0)
        #expect(index.slot(hash: 5) { _ in true } == nil)
        let removedFromEmpty = index.remove(0, hash: 5), movedInEmpty = index.move(0, to: 1, hash: 5)
        #expect(!removedFromEmpty && !movedInEmpty)
        for slot: Int32 in 0..<40 { index.insert(slot, hash: UInt32(slot % 3)) }
        let moved = index.move(7, to: 100, hash: 1)
        #expect(moved)
        #expect(index.slot(hash: 1) { $0 == 7 } == nil)
        #expect(index.slot(hash: 1) { $0 == 100 } == 100)
        let movedAgain = index.move(7, to: 101, hash: 1)
        #expect(!movedAgain)
        index.removeAll()
        #expect(index.count == 0 && index.slot(hash: 1) { _ in true } == nil)
        index.insert(3, hash: 9)
        #expect(index.slot(hash: 9) { $0 == 3 } == 3)
    }
}
