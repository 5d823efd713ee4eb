import ArgumentParser
import Foundation
import Handoff
import ZeroMQ

/// `handoff keygen`: a node's (or the broker's) CURVE key pair.
struct KeygenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keygen",
        abstract: "Make a CURVE key pair: NAME.key (secret, mode 0600) and NAME.pub (share it).",
        discussion: """
            An account is a folder of .pub files: copy every node's and the broker's NAME.pub into it on \
            every machine, and give each process its own NAME.key with --key. By default a process takes \
            the folder of its key file as its account, and broker.pub there as the broker's key.
            """)

    @Argument(help: "The key's name, e.g. the node's or host's name, or `broker`.") var name: String
    @Option(help: "The folder to write the two files into.") var out = "."
    @Flag(help: "Replace existing files.") var force = false
    @Flag(help: "Print one JSON object: name, publicKey, secretFile, publicFile.") var json = false

    func run() throws {
        let (keyPair, secret, publicURL) = try KeyFile.generate(name: name, in: URL(fileURLWithPath: out), overwrite: force)
        if json {
            print(jsonLine(KeyLine(name: name, publicKey: keyPair.publicKey.z85, secretFile: secret.path, publicFile: publicURL.path)))
            return
        }
        print("public key \(keyPair.publicKey.z85)")
        print("wrote \(secret.path) (secret) and \(publicURL.path)")
    }
}

/// `keygen --json`: the key pair made.
private struct KeyLine: Encodable {
    let name: String
    let publicKey: String
    let secretFile: String
    let publicFile: String
}
