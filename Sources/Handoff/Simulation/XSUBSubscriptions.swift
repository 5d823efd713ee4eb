/// An XSUB socket's subscriptions, counted as libzmq counts them: a subscription always goes out
/// to the publishers, an unsubscription only when the last of its topic goes.
struct XSUBSubscriptions {
    private var counts: [String: Int]

    init(_ topics: [String] = []) {
        counts = Dictionary(topics.map { ($0, 1) }, uniquingKeysWith: +)
    }

    /// Counts a subscription frame (1 or 0, then the topic); whether it goes out.
    mutating func passes(_ frame: [UInt8]) -> Bool {
        let topic = String(decoding: frame.dropFirst(), as: UTF8.self)
        if frame.first == 1 {
            counts[topic, default: 0] += 1
            return true
        }
        guard let count = counts[topic] else { return false }
        counts[topic] = count > 1 ? count - 1 : nil
        return count == 1
    }

    /// The topics subscribed, in order: what a new connection is sent.
    var topics: [String] { counts.keys.sorted() }
}
