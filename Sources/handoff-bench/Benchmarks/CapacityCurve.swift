import Foundation
import Handoff
import ZeroMQ

/// CURVE for `broker-capacity --curve`, as a deployment across hosts runs it: the broker's key
/// pair and one client's, in a folder that is the broker's account (the client's key in it, so
/// that ZAP lets the clients in); the records name the client's key as their sender's and origin's,
/// so that the sender check passes them.
struct CapacityCurve {
    let folder: URL
    let broker: CurveKeyPair
    let client: CurveKeyPair

    /// New key pairs in a temporary folder (``remove()`` deletes it).
    static func make() throws -> CapacityCurve {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("handoff-capacity-keys-\(getpid())")
        try? FileManager.default.removeItem(at: folder)
        let broker = try KeyFile.generate(name: "broker", in: folder).keyPair
        let client = try KeyFile.generate(name: "client", in: folder).keyPair
        return CapacityCurve(folder: folder, broker: broker, client: client)
    }

    func remove() { try? FileManager.default.removeItem(at: folder) }

    /// A `handoff broker`'s arguments: its key file, whose folder is its account.
    var brokerArguments: [String] { ["--key", folder.appendingPathComponent("broker.key").path] }

    /// The raw proxy's: its sockets CURVE servers with the broker's secret key (any client taken).
    var rawProxyArguments: [String] { ["--curve-secret", broker.secretKey.z85] }

    /// A capacity client's: the broker's public key, the client's pair.
    var clientArguments: [String] {
        ["--curve-server", broker.publicKey.z85, "--curve-public", client.publicKey.z85, "--curve-secret", client.secretKey.z85]
    }
}
