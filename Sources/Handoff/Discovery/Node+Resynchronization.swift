import Foundation
import Logging

// Recovering what the bus lost while originators lived: the follower asks for its snapshots again
// (``Resynchronization``); the advertiser advertises everything again when a broker asks.
extension Node {
    /// A bus subscriber connected again (a broker restarted, the network came back): what was
    /// advertised meanwhile went past this node.
    func busReconnected(to endpoint: String) {
        perform(follower.busReconnected(to: endpoint, now: .now))
    }
}
