// What a snapshot answer reads of the cache: the live envelopes under a type prefix, all at once
// or a slice at a time, and how many there are.

import ZeroMQ

extension LastValueCache {
    /// The envelope of every unexpired entry whose topic starts with `prefix`, but those that came
    /// from `excludingSite` (a site's broker asking for what the others have).
    func live(matching prefix: [UInt8], now: ContinuousClock.Instant, excludingSite: String? = nil) -> [[UInt8]] {
        var envelopes: [[UInt8]] = []
        _ = live(matching: prefix, from: 0, looking: .max, now: now, excludingSite: excludingSite) {
            envelopes.append($0)
            return true
        }
        return envelopes
    }

    /// ``live(matching:now:excludingSite:)`` a part at a time (a snapshot answered in slices): from
    /// slot `cursor` on, each envelope handed to `take` until it returns false or `limit` slots
    /// were looked at. Returns the slot to go on from, `nil` past the last. An activity stored
    /// later in a slot already passed is not handed over: its asker hears it live.
    func live<Failure: Error>(
        matching prefix: [UInt8], from cursor: Int, looking limit: Int, now: ContinuousClock.Instant, excludingSite: String?,
        _ take: ([UInt8]) throws(Failure) -> Bool
    ) throws(Failure) -> Int? {
        let now = ticks(now)
        let excluded = excludingSite.flatMap { siteIndex[$0] } ?? -2
        var slot = cursor, looked = 0
        while slot < slots.end, looked < limit {
            defer { (slot, looked) = (slot + 1, looked + 1) }
            guard let entry = slots[Int32(slot)], entry.expiry > now, entry.site != excluded,
                  entry.frames.firstFrameStarts(with: prefix) else { continue }
            guard try take(entry.frames.afterFirstFrame) else { return slot + 1 }
        }
        return slot < slots.end ? slot : nil
    }

    /// How many ``live(matching:now:excludingSite:)`` holds, none copied (a busy snapshot reply's count).
    func liveCount(matching prefix: [UInt8], now: ContinuousClock.Instant) -> Int {
        let now = ticks(now)
        return slots.live.reduce(0) { count, item in
            count + (item.value.expiry > now && item.value.frames.firstFrameStarts(with: prefix) ? 1 : 0)
        }
    }
}
