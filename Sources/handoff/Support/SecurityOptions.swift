import ArgumentParser
import Dispatch
import Foundation
import Logging
import Handoff
import ZeroMQ

/// Keys and account, for every command that joins the bus or serves it.
struct SecurityOptions: ParsableArguments {
    @Option(help: ArgumentHelp("This process's key file from `handoff keygen` (or $HANDOFF_KEY). With it, every socket runs CURVE.", valueName: "file"))
    var key: String?
    @Option(name: .customLong("account"), help: ArgumentHelp("The account's public keys: a folder of .pub files, a .pub file, or Z85 text (repeatable; or $HANDOFF_ACCOUNT). Default: the key file's folder.", valueName: "keys"))
    var account: [String] = []
    @Option(help: ArgumentHelp("The broker's public key: a .pub file or Z85 text (or $HANDOFF_BROKER_KEY). Default: broker.pub in the key file's folder.", valueName: "key"))
    var brokerKey: String?
    @Flag(help: "Allow running without CURVE beyond loopback (local development only).")
    var insecure = false

    /// The security these options (then the environment, then `fallback` from a configuration
    /// file) describe, or `nil` when no key is given anywhere.
    func resolve(fallback: SecurityFile? = nil, needsBrokerKey: Bool) throws -> Security? {
        let environment = ProcessInfo.processInfo.environment
        guard let keyPath = key ?? environment["HANDOFF_KEY"] ?? fallback?.key else { return nil }
        let keyPair = try KeyFile.readKeyPair(at: keyPath)
        let folder = URL(fileURLWithPath: keyPath).deletingLastPathComponent().path
        var sources = account
        if sources.isEmpty, let listed = environment["HANDOFF_ACCOUNT"] { sources = listed.split(separator: ":").map(String.init) }
        if sources.isEmpty { sources = fallback?.account ?? [folder] }
        var keys = Set<CurveKey>()
        for source in sources { keys.formUnion(try KeyFile.readPublicKeys(at: source)) }
        var broker: CurveKey?
        if let text = brokerKey ?? environment["HANDOFF_BROKER_KEY"] ?? fallback?.brokerKey {
            broker = try KeyFile.readPublicKey(text)
        } else if needsBrokerKey {
            let beside = folder + "/broker.pub"
            guard FileManager.default.fileExists(atPath: beside) else {
                throw ValidationError("secure, a node needs the broker's public key: --broker-key FILE, or broker.pub beside \(keyPath)")
            }
            broker = try KeyFile.readPublicKey(beside)
        }
        return Security(keyPair: keyPair, authorizedKeys: keys, brokerKey: broker)
    }

    /// `$HANDOFF_INSECURE` is 1 (allow) or 0 (do not); anything else is refused with its value,
    /// rather than read as "secure" (`true`, `yes`) and found out only beyond loopback.
    func validate() throws {
        guard let text = ProcessInfo.processInfo.environment["HANDOFF_INSECURE"], !text.isEmpty else { return }
        guard text == "0" || text == "1" else { throw ValidationError("HANDOFF_INSECURE must be 1 (allow running without CURVE beyond loopback) or 0, not \"\(text)\"") }
    }

    /// Whether insecure operation was asked for here, in the environment, or in a configuration file.
    func allowsInsecure(fallback: Bool? = nil) -> Bool {
        insecure || ProcessInfo.processInfo.environment["HANDOFF_INSECURE"] == "1" || fallback == true
    }
}

/// The `security` object of an agent's configuration file.
struct SecurityFile: Codable {
    /// The node's key file.
    var key: String?
    /// Folders, files or Z85 texts of the account's public keys.
    var account: [String]?
    /// The broker's public key (file or Z85).
    var brokerKey: String?
}

extension BusOptions {
    /// A node configuration for this bus, with the security the options ask for.
    func configuration(name: String, subscriptions: [String] = [""]) throws -> Node.Configuration {
        var configuration = Node.Configuration(name: name, bus: bus, subscriptions: subscriptions)
        configuration.security = try security.resolve(needsBrokerKey: true)
        configuration.allowInsecure = security.allowsInsecure()
        return configuration
    }
}

/// Reloads the account on SIGHUP, as daemons reload their configuration: `reload` reads it again
/// and applies it. Returns the signal source; keep it for as long as reloading should work.
///
/// A process without a key (`hasAccount` false) takes the signal too and says there is nothing
/// to reload: SIGHUP's default action ends a process, and `systemctl reload` sends it to any unit.
func reloadAccountOnHangup(logger: Logger, hasAccount: Bool, _ reload: @escaping @Sendable () async throws -> Int) -> any DispatchSourceSignal {
    signal(SIGHUP, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
    source.setEventHandler {
        guard hasAccount else {
            logger.notice("SIGHUP: this process runs without a key (no --key), so it has no account: nothing to reload")
            return
        }
        Task {
            do {
                let count = try await reload()
                logger.notice("SIGHUP: account reloaded, \(count) public keys allowed in")
            } catch {
                logger.error("SIGHUP: the account was not reloaded (the old one stays): \(error)")
            }
        }
    }
    source.resume()
    return source
}
