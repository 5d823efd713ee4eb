import Foundation
import ZeroMQ

extension Node {
    /// Replaces the node's account — the public keys allowed in — without a restart: handshakes at
    /// this node's sockets, and the originators it will continue from, are checked against
    /// `authorizedKeys` from now on (the node's own key is always allowed).
    ///
    /// - Throws: ``HandoffError`` (``HandoffError/Code-swift.struct/invalidConfiguration``) when the
    ///   node runs without CURVE.
    public func updateAccount(_ authorizedKeys: Set<CurveKey>) throws(HandoffError) {
        guard var updated = security, let zap = access.zap else {
            throw HandoffError(.invalidConfiguration, "node \(own.configuration.name) runs without CURVE: it has no account to update")
        }
        updated.authorizedKeys = authorizedKeys
        security = updated
        zap.setPolicy(forDomain: zapDomain, updated.zapPolicy(logger: logger, what: "node \(own.configuration.name)"))
    }
}
