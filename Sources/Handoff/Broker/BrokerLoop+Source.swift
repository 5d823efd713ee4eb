extension BrokerLoop {
    /// Where a socket's messages come from.
    enum Source {
        case publishers, subscribers
        /// An upstream broker's XSUB, over the link's XPUB: its subscriptions.
        case upstreamSubscriber
        /// An upstream broker's XPUB, over the link's XSUB: bus messages.
        case upstream
        /// The capture's subscribers (operators' monitors): their subscriptions, counted and bounded.
        case captureSubscribers
    }
}
