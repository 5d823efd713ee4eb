// What a snapshot answer reads of the cache: the live entries under a type prefix, one walk
// serving all at once, a slice at a time, and a count.

import ZeroMQ

extension LastValueCache {
    /// From slot `cursor` on, each unexpired entry whose topic starts with `prefix`, but those that
    /// came from `excludingSite` (a site's broker asking for what the others have), handed to
    /// `take` until it returns false or `limit` slots were looked at. Returns the slot to go on
    /// from, `nil` past the last. An activity stored later in a slot already passed is not handed
    /// over: a snapshot's asker hears it live.
    func forEachLive<Failure: Error>(
        matching prefix: [UInt8], from cursor: Int = 0, looking limit: Int = .max, now: ContinuousClock.Instant,
        excludingSite: String? = nil, _ take: (Entry) throws(Failure) -> Bool
    ) throws(Failure) -> Int? {
        let now = ticks(now)
        let excluded = excludingSite.flatMap { siteIndex[$0] } ?? -2
        var slot = cursor, looked = 0
        while slot < slots.end, looked < limit {
            defer { (slot, looked) = (slot + 1, looked + 1) }
            guard let entry = slots[Int32(slot)], entry.expiry > now, entry.site != excluded,
                  entry.frames.firstFrameStarts(with: prefix) else { continue }
            guard try take(entry) else { return slot + 1 }
        }
        return slot < slots.end ? slot : nil
    }

    /// The envelope of every live entry ``forEachLive(matching:from:looking:now:excludingSite:_:)`` hands over.
    func live(matching prefix: [UInt8], now: ContinuousClock.Instant, excludingSite: String? = nil) -> [[UInt8]] {
        var envelopes: [[UInt8]] = []
        _ = forEachLive(matching: prefix, now: now, excludingSite: excludingSite) {
            envelopes.append($0.frames.afterFirstFrame)
            return true
        }
        return envelopes
    }

    /// How many of them there are, none copied (a busy snapshot reply's count).
    func liveCount(matching prefix: [UInt8], now: ContinuousClock.Instant) -> Int {
        var count = 0
        _ = forEachLive(matching: prefix, now: now) { _ in
            count += 1
            return true
        }
        return count
    }
}
