import ZeroMQ

/// The shell's side of ``SubscriptionLedger``: a subscription frame as an XPUB hands it over,
/// with the connection it came in on (asked of the kernel: ``SourceConnection``), counted.
extension SubscriptionLedger where Peer == [UInt8] {
    /// What became of a frame the owner of the XPUB read.
    struct Admission {
        /// Whether the owner handles it as usual; if not, it does nothing with it (its connection
        /// was cut, now or before, or has gone since it was sent).
        var goesOn: Bool
        /// The connection this frame took past a bound, cut (its peer's address as ZAP names
        /// it, asked before the cut): for the owner to count and log, with the bound in words.
        var cut: (address: String?, bound: String)?
    }

    /// How often the owner asks the kernel which counted connections have gone (``forgetGone()``).
    static var pruneInterval: Duration { .seconds(10) }

    /// Counts an (un)subscription frame from connection-holding `key` (`nil` without CURVE), and
    /// cuts the connection that goes past a bound with it (``SourceConnection/cut()``).
    mutating func admit(_ frame: Frame, key: [UInt8]?) -> Admission {
        // The socket's own withdrawals (a topic's last subscriber went) come in on no connection.
        guard let descriptor = frame.sourceDescriptor else { return Admission(goesOn: true) }
        guard let connection = SourceConnection(descriptor: descriptor) else {
            // Its connection has gone since (or is going, cut): libzmq lets go of what it
            // subscribed, so a subscription asks nothing of anyone; a withdrawal is as it was.
            return Admission(goesOn: frame.withUnsafeBytes { $0.first } != 1)
        }
        let verdict = frame.withUnsafeBytes { bytes -> Verdict in
            let topic = UnsafeRawBufferPointer(rebasing: bytes.dropFirst())
            switch bytes.first {
            case 1: return subscribed(topic, descriptor: connection.descriptor, peer: connection.peer, key: key)
            case 0: unsubscribed(topic, descriptor: connection.descriptor, peer: connection.peer)
            default: break
            }
            return .within
        }
        switch verdict {
        case .within:
            return Admission(goesOn: true)
        case .refused:
            return Admission(goesOn: false)
        case .cut(let held, let overKey):
            let address = connection.peerAddress  // (asked first: a socket shut down has no peer)
            connection.cut()
            return Admission(goesOn: false, cut: (address, boundText(held: held, overKey: overKey)))
        }
    }

    /// ``forgetGone()`` at most once per ``pruneInterval``, the first an interval after the first
    /// call: the owner calls it as often as it likes (each round of its loop, each frame it reads).
    mutating func forgetGoneIfDue(now: ContinuousClock.Instant) {
        guard let due = nextPrune else {
            nextPrune = now + Self.pruneInterval
            return
        }
        guard now >= due else { return }
        nextPrune = now + Self.pruneInterval
        forgetGone()
    }

    /// Lets go of the connections that have gone, or whose descriptor is now another's.
    mutating func forgetGone() {
        forget { descriptor, peer in SourceConnection(descriptor: descriptor)?.peer != peer }
    }

    /// The bound a cut connection went past, in words for the log.
    private func boundText(held: Held, overKey: Bool) -> String {
        overKey
            ? "its key's bound of \(bounds.perKey) subscriptions and \(bounds.bytesPerKey) bytes of topic over all its connections"
            : "the bound of \(bounds.perConnection) subscriptions and \(bounds.bytesPerConnection) bytes of topic a connection (\(held.subscriptions), \(held.bytes) bytes)"
    }
}
