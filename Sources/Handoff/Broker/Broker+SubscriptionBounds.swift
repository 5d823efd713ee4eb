extension Broker {
    /// How many distinct subscriptions a subscriber may hold at the broker, and how many bytes of
    /// topic they may take, on one connection and over all the connections of one CURVE key.
    ///
    /// libzmq keeps every distinct subscription of a connected subscriber, in a trie costing about
    /// 35 bytes of memory per byte of topic (docs/operations.md), and bounds neither their number
    /// nor their size. The broker counts what each connection to its backend holds (the
    /// subscriptions it made and has not withdrawn), and apart from them each connection to its
    /// capture (``Configuration/capture``), and cuts off the connection whose subscription
    /// goes past a bound: libzmq then frees all it kept for it. What an honest subscriber holds is
    /// far below these: a node follows a few prefixes per activity type it watches, a
    /// `handoff monitor` one; the keys of ``Configuration/relayKeys`` (site brokers, which pass up
    /// the interests of a whole site) are not bounded.
    public struct SubscriptionBounds: Hashable, Sendable {
        /// The most distinct subscriptions one connection holds.
        public var perConnection: Int
        /// The most bytes of topic one connection's subscriptions take.
        public var bytesPerConnection: Int
        /// The most distinct subscriptions held over all the connections of one key (a secure
        /// broker's; without ``Configuration/security`` nothing proves a key, and it does not apply).
        public var perKey: Int
        /// The most bytes of topic held over all the connections of one key.
        public var bytesPerKey: Int

        /// How many of one subscriber's (un)subscriptions libzmq reads off its connection ahead of
        /// the broker (the receive high-water mark of its backend and capture). An XPUB adds each
        /// to its trie as it takes it from that queue, before the broker reads it, and takes on
        /// while the queue refills: with 100,000 (the bus's high-water mark) a flood was all in the
        /// trie before the broker read the subscription past the flooder's bound
        /// (``SubscriptionLedger``; docs/operations.md). A short queue keeps libzmq a few steps
        /// ahead, and TCP holds the rest back at the subscriber. An honest subscriber sends a
        /// handful, and a SUB or XSUB that sends more than its own send high-water mark at once
        /// (1,000 by default) loses the rest before they leave it anyway. (A node's publisher takes
        /// them two at a time: ``Node``'s `publisherSubscriptionQueue`.)
        static let receiveQueue: Int32 = 10

        /// At most 12,000 subscriptions and 1 MiB of topic a connection (libzmq's trie: about
        /// 35 MiB at most), four times that a key: room for a site broker's link on a bus without
        /// CURVE (no relay keys), which holds up to 10,000 prefixes its site follows
        /// (`SiteInterests`), besides its snapshot and request topics.
        public init(perConnection: Int = 12_000, bytesPerConnection: Int = 1 << 20, perKey: Int = 48_000, bytesPerKey: Int = 4 << 20) {
            self.perConnection = perConnection
            self.bytesPerConnection = bytesPerConnection
            self.perKey = perKey
            self.bytesPerKey = bytesPerKey
        }
    }
}
