import Testing
@testable import Handoff

/// Names heard lately (RecentNames), bounded: with no clock, times passed in.
@Suite("Broker: names heard lately (state, no sockets)")
struct RecentNamesTests {
    private static let start = ContinuousClock.now
    private static func at(_ seconds: Int) -> ContinuousClock.Instant { start + .seconds(seconds) }

    @Test("full: the names not heard within its memory go; when that leaves over three quarters, the oldest down to half; the names heard lately are kept while they fit")
    func bounded() {
        var names = RecentNames<Int>(memory: .seconds(100), capacity: 100)
        // 30 of 100 heard long ago: forgetting them leaves room, and every name heard lately stays.
        for name in 0..<30 { names.heard(name, now: Self.at(0)) }
        for name in 30..<100 { names.heard(name, now: Self.at(150)) }
        names.heard(100, now: Self.at(150))
        #expect(names.count == 71)
        #expect((30...100).allSatisfy { names.contains($0, now: Self.at(150)) })
        // All heard lately: the newest half stays, and the newcomer.
        var recent = RecentNames<Int>(memory: .seconds(100), capacity: 100)
        for name in 0..<100 { recent.heard(name, now: Self.at(name)) }
        recent.heard(100, now: Self.at(100))
        #expect(recent.count == 51)
        #expect(recent.contains(99, now: Self.at(100)) && !recent.contains(10, now: Self.at(100)))
    }

    @Test("fresh names arriving as fast as others expire rebuild the table at most once every quarter of its capacity (it rebuilt at every name before)")
    func freshNamesAtTheExpiryRate() {
        var names = RecentNames<Int>(memory: .seconds(100), capacity: 1_000)
        for name in 0..<1_000 { names.heard(name, now: Self.at(name / 10)) }
        var rebuilds = 0, before = names.count
        for name in 1_000..<11_000 {
            names.heard(name, now: Self.at(name / 10))
            if names.count < before { rebuilds += 1 }
            before = names.count
        }
        #expect(rebuilds <= 10_000 / 250, "\(rebuilds) rebuilds")
    }
}
