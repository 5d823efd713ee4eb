/// The size limits of the wire contract (wire.proto, "Limits"): what a peer may send, and what a
/// node may put on the bus.
public enum WireLimits {
    /// The largest frame a peer may send on a bus socket (topic and envelope alike). Nodes and
    /// brokers set `ZMQ_MAXMSGSIZE` to it on every bus socket: a larger frame, or a larger
    /// handshake command, disconnects its sender before anything is buffered.
    public static let maxBusFrame = 65_536

    /// The most UTF-8 bytes an advertisement may carry in an activity's type, title, keywords and
    /// webpage URL together (what it carries besides fixed-size fields), well inside ``maxBusFrame``.
    public static let maxAdvertisedText = 16_384
}
