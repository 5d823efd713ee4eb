import HandoffTestSupport
import Testing

/// The places that `.exclusive` tests share (TaskLimit, Exclusive): no clock, the order of
/// events only.
@Suite("Test places: two at a time, all of them for a test alone")
struct TaskLimitTests {
    @Test("rule: tasks wanting a place run two at a time; one that wants every place waits for them all, and those that come after it wait behind it")
    func placesFirstComeFirstServed() async throws {
        let limit = TaskLimit(width: 2)
        let (started, starts) = AsyncStream<String>.makeStream()
        var order = started.makeAsyncIterator()
        let a = hold(limit, places: 1, name: "a", starts: starts)
        let b = hold(limit, places: 1, name: "b", starts: starts)
        let first = [await order.next(), await order.next()]
        #expect(Set(first) == ["a", "b"] && limit.held == 2)

        let c = hold(limit, places: 2, name: "c", starts: starts)
        try await until { limit.waiting == 1 }
        let d = hold(limit, places: 1, name: "d", starts: starts)
        try await until { limit.waiting == 2 }

        a.release.yield()
        await a.task.value
        #expect(limit.held == 1 && limit.waiting == 2, "d took the free place ahead of c, which waits for both")

        b.release.yield()
        await b.task.value
        #expect(await order.next() == "c")
        #expect(limit.held == 2 && limit.waiting == 1)

        c.release.yield()
        await c.task.value
        #expect(await order.next() == "d")
        #expect(limit.held == 1 && limit.waiting == 0)
        d.release.yield()
        await d.task.value
        #expect(limit.held == 0)
    }

    @Test("rule: a task asking for more places than there are takes them all, and gives them all back")
    func morePlacesThanTheWidth() async {
        let limit = TaskLimit(width: 2)
        let heldInside = await limit.run(places: 5) { limit.held }
        #expect(heldInside == 2 && limit.held == 0)
    }
}

/// An `.exclusive` suite's test marked `.exclusive(.alone)` holds every place, taken once: its
/// suite's trait leaves it to the test's own (holding one place while waiting for them all would
/// wait for ever beside another such test).
@Suite("Test places: a test alone in an exclusive suite", .exclusive)
struct ExclusivePlacesTests {
    @Test("a test of an .exclusive suite marked .exclusive(.alone) holds every place, and starts", .exclusive(.alone))
    func aloneTakesEveryPlace() {
        #expect(Exclusive.places.held == Exclusive.places.width)
    }

    @Test("a test of an .exclusive suite holds a place")
    func suiteTakesOnePlace() {
        #expect(Exclusive.places.held >= 1)
    }
}

/// A task that takes `places` of `limit`, says `name` on `starts` once it holds them, and holds
/// them until `release` is told.
private func hold(
    _ limit: TaskLimit, places: Int, name: String, starts: AsyncStream<String>.Continuation
) -> (task: Task<Void, Never>, release: AsyncStream<Void>.Continuation) {
    let (gate, release) = AsyncStream<Void>.makeStream()
    let task = Task {
        await limit.run(places: places) {
            starts.yield(name)
            for await _ in gate { break }
        }
    }
    return (task, release)
}

/// Yields until `condition` holds: the tasks above run on the pool, and reach their wait in their
/// own time. Fails rather than spinning for ever.
private func until(_ condition: () -> Bool) async throws {
    var yields = 0
    while !condition(), yields < 100_000 {
        await Task.yield()
        yields += 1
    }
    try #require(condition())
}
