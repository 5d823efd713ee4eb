// The cache's clock: durations and seconds as ``LastValueCache/Ticks``, nanoseconds compared as integers.

extension LastValueCache {
    /// A duration in nanoseconds, held within ±2⁶² (146 years).
    static func ticks(_ duration: Duration) -> Ticks {
        let (seconds, attoseconds) = duration.components
        let limit: Int64 = 1 << 62
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow, abs(nanoseconds) < limit else { return seconds < 0 ? -limit : limit }
        return nanoseconds + attoseconds / 1_000_000_000
    }

    /// Seconds (until an expiration date) in nanoseconds: 0 when none are left, at most 2⁶².
    static func ticks(seconds: Double) -> Ticks {
        guard seconds > 0 else { return 0 }
        return seconds < 4e9 ? Ticks(seconds * 1e9) : 1 << 62
    }
}
