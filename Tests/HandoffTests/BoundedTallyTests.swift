import Foundation
import Handoff
import Testing

@Suite("A watching tool's counts by name are bounded")
struct BoundedTallyTests {
    @Test("past the capacity, new names count as one row of other types; names kept go on counting; the rows never pass the capacity")
    func bounded() {
        var tally = BoundedTally(capacity: 4, zero: 0)
        for index in 0..<100 { tally.add("org.flood.t\(index)") { $0 += 1 } }
        #expect(tally.counts.count == 4, "\(tally.counts)")
        #expect(tally[BoundedTally<Int>.overflowName] == 97)
        #expect(tally.add("org.flood.t1") { $0 += 1 } == "org.flood.t1")
        #expect(tally["org.flood.t1"] == 2)
        #expect(tally.add("org.new") { $0 += 1 } == BoundedTally<Int>.overflowName)
        #expect(tally.counts.values.reduce(0, +) == 102)
        tally.removeAll()
        #expect(tally.counts.isEmpty)
        #expect(tally.add("org.new") { $0 += 1 } == "org.new")
    }
}
