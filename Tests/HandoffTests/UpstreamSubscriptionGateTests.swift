import Testing
@testable import Handoff

/// Which of an upstream's subscriptions a site's broker passes to its publishers
/// (``UpstreamSubscriptionGate``): with no socket and no clock, and round loops of links driven
/// through many delays, to show that a loop ends and a cascade of heals still arrives.
@Suite("Sites: an upstream's subscriptions passed on (state, no sockets)")
struct UpstreamSubscriptionGateTests {
    private static let start = ContinuousClock.now
    private static let all: [UInt8] = [1]

    private static func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test("a repeat within a second is held back, and passed when a link's connection comes up (a restarted upstream)")
    func repeatPassedWhenALinkConnects() {
        var gate = UpstreamSubscriptionGate()
        let first = gate.offer(Self.all, now: Self.at(0))
        let repeated = gate.offer(Self.all, now: Self.at(5))
        let again = gate.offer(Self.all, now: Self.at(6))
        #expect(first && !repeated && !again)
        let released = gate.linkConnected(now: Self.at(10))
        #expect(released == [Self.all])
        // From then on the next one passes; a repeat held longer than a second before a
        // connection is not the connection's.
        let next = gate.offer(Self.all, now: Self.at(20))
        let loop = gate.offer(Self.all, now: Self.at(30))
        let late = gate.linkConnected(now: Self.at(2_000))
        #expect(next && !loop && late.isEmpty)
    }

    @Test("a repeat within a second is passed once when the second ends (links healing one after another); a repeat of that pass is dropped")
    func repeatPassedWhenTheSecondEnds() {
        var gate = UpstreamSubscriptionGate()
        let first = gate.offer(Self.all, now: Self.at(0))
        // The site's upstream healed its own link 400 ms after this site's.
        let repeated = gate.offer(Self.all, now: Self.at(400))
        #expect(first && !repeated && gate.nextDue == Self.at(1_000))
        let early = gate.due(now: Self.at(999))
        let trailing = gate.due(now: Self.at(1_000))
        let once = gate.due(now: Self.at(1_001))
        #expect(early.isEmpty && trailing == [Self.all] && once.isEmpty && gate.nextDue == nil)
        // Within the trailing pass's second, a repeat is that pass's echo round a loop: dropped.
        let echo = gate.offer(Self.all, now: Self.at(1_300))
        let afterEcho = gate.due(now: Self.at(3_000))
        #expect(!echo && afterEcho.isEmpty)
        // After it, the next one passes as a first.
        let fresh = gate.offer(Self.all, now: Self.at(2_100))
        #expect(fresh)
    }

    @Test("a repeat arriving when a held one's trailing pass is due (before the loop ran it) is that pass")
    func arrivalWhenTrailingPassIsDue() {
        var gate = UpstreamSubscriptionGate()
        let first = gate.offer(Self.all, now: Self.at(0))
        let repeated = gate.offer(Self.all, now: Self.at(500))
        let trailing = gate.offer(Self.all, now: Self.at(1_100))
        let noneDue = gate.due(now: Self.at(1_200))
        let echo = gate.offer(Self.all, now: Self.at(1_300))
        let stillNone = gate.due(now: Self.at(5_000))
        #expect(first && !repeated && trailing && noneDue.isEmpty && !echo && stillNone.isEmpty)
    }

    @Test("each subscription has its own second: a re-advertising request does not hold back a subscribe-all")
    func subscriptionsApart() {
        var gate = UpstreamSubscriptionGate()
        let readvertise = Array("R:node-1".utf8)
        let all = gate.offer(Self.all, now: Self.at(0))
        let asked = gate.offer(readvertise, now: Self.at(1))
        let askedAgain = gate.offer(readvertise, now: Self.at(2))
        let due = gate.due(now: Self.at(1_001))
        #expect(all && asked && !askedAgain && due == [readvertise])
    }

    /// Brokers in a ring, each the next one's site (its up socket at the next one's frontend):
    /// each subscription one passes reaches the one before it after a delay. Every link connects
    /// at once; returns when each broker passed a subscribe-all, in milliseconds.
    private static func ring(of count: Int, delays: ClosedRange<Int>, seed: UInt64) -> [[Int]] {
        var random = SimulationRandom(seed: seed)
        var gates = Array(repeating: UpstreamSubscriptionGate(), count: count)
        var passes = Array(repeating: [Int](), count: count)
        // (time in ms, broker, whether it is a due check rather than an arrival)
        var events: [(at: Int, broker: Int, check: Bool)] = []
        func pass(_ broker: Int, at time: Int) {
            passes[broker].append(time)
            let before = (broker + count - 1) % count
            events.append((time + Int.random(in: delays, using: &random), before, false))
        }
        for broker in 0..<count {
            _ = gates[broker].linkConnected(now: at(0))
            events.append((Int.random(in: 0...2, using: &random), broker, false))
        }
        while let index = events.indices.min(by: { events[$0].at < events[$1].at }), events[index].at < 30_000 {
            let event = events.remove(at: index)
            if event.check {
                for _ in gates[event.broker].due(now: at(event.at)) { pass(event.broker, at: event.at) }
            } else if gates[event.broker].offer(all, now: at(event.at)) {
                pass(event.broker, at: event.at)
            }
            // The loop wakes at the next due pass, a little late as a loop is.
            if let due = gates[event.broker].nextDue, !events.contains(where: { $0.broker == event.broker && $0.check }) {
                events.append((Int((due - start) / .milliseconds(1)) + Int.random(in: 0...19, using: &random), event.broker, true))
            }
        }
        return passes
    }

    @Test("bounded: 10,000 subscriptions remembered at most; when every one waits for its trailing pass, a newcomer passes unremembered")
    func bounded() {
        var gate = UpstreamSubscriptionGate()
        let subscriptions = (0..<UpstreamSubscriptionGate.capacity).map { [1] + Array("R:node-\($0)".utf8) }
        for subscription in subscriptions {
            _ = gate.offer(subscription, now: Self.at(0))
            _ = gate.offer(subscription, now: Self.at(1))  // held: its trailing pass waits
        }
        let newcomers = (0..<100).map { gate.offer([1] + Array("R:new-\($0)".utf8), now: Self.at(2)) }
        #expect(newcomers.allSatisfy { $0 })
        #expect(gate.remembered == UpstreamSubscriptionGate.capacity)
        let trailing = gate.due(now: Self.at(1_000))
        #expect(trailing.count == UpstreamSubscriptionGate.capacity)
    }

    @Test("links misconfigured into a loop of two or three brokers stop passing a subscribe-all round within seconds, at any delay under a second round the loop")
    func loopsEnd() {
        for count in [2, 3] {
            for delays in [0...1, 1...5, 20...60, 100...300, 250...330] where delays.upperBound * count < 1_000 {
                for seed in UInt64(1)...40 {
                    let passes = Self.ring(of: count, delays: delays, seed: seed)
                    let last = passes.flatMap { $0 }.max() ?? 0
                    #expect(passes.allSatisfy { !$0.isEmpty })
                    #expect(last < 5_000, "a ring of \(count), delays \(delays) ms, seed \(seed): passes \(passes)")
                }
            }
        }
    }
}
