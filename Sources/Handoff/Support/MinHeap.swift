/// A binary min-heap: the smallest element first, inserts and removals in O(log n).
///
/// The schedules that use it (the broker cache's expiries, a node's lease checks) insert times
/// that mostly grow: here such an insert compares with one parent and stops. swift-collections'
/// `Heap` is a min-max heap, where the largest element must climb to the top max level, so the
/// same insert swaps its way up half the tree's height through cold memory: it was 5 % of the
/// broker's thread in `handoff-bench broker-capacity`.
struct MinHeap<Element: Comparable> {
    private var storage: [Element] = []

    init() {}

    /// A heap of these elements (built in O(n)).
    init<S: Sequence>(_ elements: S) where S.Element == Element {
        storage = Array(elements)
        var index = storage.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }

    /// The smallest element.
    var min: Element? { storage.first }

    mutating func reserveCapacity(_ count: Int) { storage.reserveCapacity(count) }

    /// Takes the element (consuming): appending a borrowed one would copy it, a reference count
    /// for each reference it holds (a lease check's activity id, on every advertisement heard).
    mutating func insert(_ element: consuming Element) {
        storage.append(element)
        var child = storage.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard storage[child] < storage[parent] else { break }
            storage.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the smallest element; `nil` when empty.
    mutating func popMin() -> Element? {
        guard !storage.isEmpty else { return nil }
        if storage.count == 1 { return storage.removeLast() }
        storage.swapAt(0, storage.count - 1)
        let smallest = storage.removeLast()
        siftDown(from: 0)
        return smallest
    }

    /// Removes the smallest element (the heap must not be empty).
    @discardableResult
    mutating func removeMin() -> Element {
        guard let smallest = popMin() else { preconditionFailure("removeMin() on an empty heap") }
        return smallest
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        let count = storage.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            let right = left + 1
            let smaller = right < count && storage[right] < storage[left] ? right : left
            guard storage[smaller] < storage[parent] else { return }
            storage.swapAt(parent, smaller)
            parent = smaller
        }
    }
}
