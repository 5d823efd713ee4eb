import Foundation

/// The queue of events, soonest first, ties in the order queued: a binary heap of small keys (when,
/// the order queued, a slot), the events themselves kept in slots aside. Sifting whole events
/// (envelopes, frames) copied each one it compared, over a tenth of the simulator's time.
struct EventQueue {
    private struct Key {
        let at: Duration
        let order: UInt64
        let slot: Int

        static func before(_ a: Key, _ b: Key) -> Bool { a.at != b.at ? a.at < b.at : a.order < b.order }
    }

    private var heap: [Key] = []
    private var events: [SimulatedWorld.Event?] = []
    private var freeSlots: [Int] = []
    private var counter: UInt64 = 0

    mutating func nextOrder() -> UInt64 {
        counter += 1
        return counter
    }

    mutating func push(_ item: SimulatedWorld.Queued) {
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            events[slot] = item.event
        } else {
            slot = events.count
            events.append(item.event)
        }
        heap.append(Key(at: item.at, order: item.order, slot: slot))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Key.before(heap[child], heap[parent]) else { break }
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
            if left < heap.count, Key.before(heap[left], heap[smallest]) { smallest = left }
            if right < heap.count, Key.before(heap[right], heap[smallest]) { smallest = right }
            guard smallest != parent else { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        let event = events[top.slot].take()!
        freeSlots.append(top.slot)
        return SimulatedWorld.Queued(at: top.at, order: top.order, event: event)
    }
}
