import Foundation

extension Node {
    /// Bounds on what one connection of the continuation sockets may queue here.
    struct ContinuationLimits {
        /// Messages queued per connection: every chunk one peer's pairs may have in flight
        /// (its window per pair), twice over, and room for requests.
        let receiveHighWaterMark: Int32
        /// The largest frame accepted: a stream chunk of this node's size, or a continue reply
        /// (userInfo is small, the rest of an activity smaller still), with room for the envelope.
        let maxMessageSize: Int64

        init(_ configuration: Configuration) {
            receiveHighWaterMark = Int32(clamping: 2 * configuration.streamWindow * configuration.maxStreamsPerPeer + 64)
            maxMessageSize = Int64(max(configuration.streamChunkSize, 1 << 20) + 64 * 1024)
        }
    }

    var continuationLimits: ContinuationLimits { ContinuationLimits(configuration) }
}
