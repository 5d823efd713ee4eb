import Testing
@testable import Handoff

@Suite("Min-heap (the schedules' order)")
struct MinHeapTests {
    @Test("pops every element in ascending order, whatever order they went in, duplicates included")
    func popsInOrder() {
        var generator = SimulationRandom(seed: 7)
        for size in [0, 1, 2, 3, 17, 1_000] {
            let values = (0..<size).map { _ in Int(generator.next() % 100) }
            var heap = MinHeap<Int>()
            for value in values { heap.insert(value) }
            #expect(heap.count == size)
            var popped: [Int] = []
            while let value = heap.popMin() { popped.append(value) }
            #expect(popped == values.sorted())
            #expect(heap.isEmpty && heap.min == nil)
        }
    }

    @Test("built from a sequence, it orders as inserting one by one does")
    func builtFromSequence() {
        var generator = SimulationRandom(seed: 11)
        let values = (0..<513).map { _ in Int(generator.next() % 1_000) }
        var heap = MinHeap(values)
        #expect(heap.min == values.min())
        var popped: [Int] = []
        while !heap.isEmpty { popped.append(heap.removeMin()) }
        #expect(popped == values.sorted())
    }

    @Test("inserts and removals interleaved keep the smallest first")
    func interleaved() {
        var generator = SimulationRandom(seed: 3)
        var heap = MinHeap<Int>()
        var model: [Int] = []
        for _ in 0..<5_000 {
            if generator.next() % 3 == 0, let smallest = model.min() {
                model.remove(at: model.firstIndex(of: smallest)!)
                #expect(heap.removeMin() == smallest)
            } else {
                let value = Int(generator.next() % 500)
                heap.insert(value)
                model.append(value)
            }
            #expect(heap.min == model.min())
        }
    }
}
