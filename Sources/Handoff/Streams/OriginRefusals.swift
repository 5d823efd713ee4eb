import Foundation

/// When an originator whose pairs wait for a resume is taken as gone, decided with no I/O: libzmq
/// failing to reconnect is not enough (a link that is merely cut fails the same way, and the
/// originator may be alive behind it), so the kernel is asked whether anything listens there
/// (``EndpointProbe``); a refusal twice in a row, a retry apart, means its process is gone. One
/// could be a port being rebound in a restart. The node carries it out
/// (``Node/reconnectFailed(to:client:)``); the rule is tested without a socket (OriginRefusalsTests).
struct OriginRefusals: Equatable {
    /// How many refusals in a row mean the originator's process is gone.
    static let meaningGone = 2

    /// Refusals in a row so far.
    private(set) var inARow = 0
    /// A probe is under way (one at a time).
    private(set) var probing = false

    /// libzmq failed to reconnect. Returns whether to probe the endpoint now: only while pairs
    /// wait for this originator to come back, and not while a probe runs. With no pair waiting the
    /// count starts again.
    mutating func reconnectFailed(pairsAwaitResume: Bool) -> Bool {
        guard !probing else { return false }
        guard pairsAwaitResume else {
            inARow = 0
            return false
        }
        probing = true
        return true
    }

    /// The probe's answer (`refused`: nothing listens there). Returns whether the originator's
    /// process is now taken as gone; anything but a refusal (it answers, or nothing answers at all,
    /// a cut link) starts the count again.
    mutating func probed(refused: Bool) -> Bool {
        probing = false
        guard refused else {
            inARow = 0
            return false
        }
        inARow += 1
        return inARow >= Self.meaningGone
    }
}
