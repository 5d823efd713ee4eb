import Foundation
import Testing

/// Brokers without their last-value cache (`handoff-sim --no-cache`, `handoff broker --no-cache`):
/// each asks its publishers for the prefixes its subscribers follow (``ForwardedInterest``, with
/// XSUB's counting and libzmq's withdrawals), while the hostile node withdraws what others follow.
extension SimulatorTests {
    @Test("through a broker, a broker pair and a hub of four sites without their caches, fresh seeds pass every invariant: a follower learns what it missed by the origin's next refresh, and a member's withdrawals of what others follow stop nothing")
    func noCacheFreshSeeds() async throws {
        try await passesFreshSeeds(10, "--broker", "--no-cache")
        try await passesFreshSeeds(6, "--broker-pair", "--no-cache")
        try await passesFreshSeeds(6, "--sites", "4", "--no-cache")
    }

    /// Measured when it was written (seeds 1000..<1012): 69 messages no subscriber followed reached
    /// a caching broker (it subscribes to everything), none one without its cache, and 33 when the
    /// broker did not take libzmq's own withdrawals as a connection goes (prefixes stood forever).
    @Test("without its cache a broker is sent only what its subscribers follow: over the same 12 seeds, the messages it takes that no subscriber follows fall to a tenth of a caching broker's or fewer (none; 69 with the cache)")
    func noCacheForwardsOnlyWhatIsFollowed() async throws {
        let cached = try await unfollowedAtBrokers(["--seeds", "12", "--first", "1000", "--broker"])
        let uncached = try await unfollowedAtBrokers(["--seeds", "12", "--first", "1000", "--broker", "--no-cache"])
        #expect(cached > 30, "a caching broker took \(cached) messages no subscriber followed")
        #expect(Double(uncached) <= 0.1 * Double(cached), "without the cache \(uncached), with it \(cached)")
    }

    /// What a `handoff-sim --seeds` run through brokers says they took that no subscriber followed.
    func unfollowedAtBrokers(_ arguments: [String]) async throws -> Int {
        let run = try await runSimulator(arguments)
        #expect(run.status == 0, "\(run.output.suffix(3_000))")
        let prefix = "messages the brokers took that no subscriber followed "
        let line = try #require(run.output.split(separator: "\n").first { $0.hasPrefix(prefix) }, "\(run.output.suffix(1_000))")
        return try #require(Int(line.dropFirst(prefix.count)), "\(line)")
    }
}
