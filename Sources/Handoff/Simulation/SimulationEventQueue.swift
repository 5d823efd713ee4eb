import Foundation

/// The queue of events, soonest first, ties in the order queued: a binary heap.
struct EventQueue {
    private var heap: [SimulatedWorld.Queued] = []
    private var counter: UInt64 = 0

    mutating func nextOrder() -> UInt64 {
        counter += 1
        return counter
    }

    private static func before(_ a: SimulatedWorld.Queued, _ b: SimulatedWorld.Queued) -> Bool {
        a.at != b.at ? a.at < b.at : a.order < b.order
    }

    mutating func push(_ item: SimulatedWorld.Queued) {
        heap.append(item)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.before(heap[child], heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> SimulatedWorld.Queued? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let top = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, Self.before(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count, Self.before(heap[right], heap[smallest]) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
