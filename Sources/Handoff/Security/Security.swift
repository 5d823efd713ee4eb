import Foundation
import Logging
import ZeroMQ

/// Who may take part: this process's CURVE key pair and its *account* — the public keys of every
/// node (and broker) allowed in, like the devices of one iCloud account.
///
/// With security, every socket a ``Node`` or ``Broker`` uses runs CURVE: traffic is encrypted and
/// both ends are authenticated. Servers (a broker's sockets, a node's continuation ROUTER, a direct
/// bus XPUB) let in only clients whose key is in ``authorizedKeys`` — a ZAP handler checks every
/// handshake, refuses the rest, logs and counts them. Clients connect only to servers whose key
/// they know: the broker's (``brokerKey``), a direct peer's (``peerKeys``), or an originator's, which
/// its advertisements carry and which must itself be in the account.
///
/// ```swift
/// let security = try Security(
///     keyPair: KeyFile.readKeyPair(at: "/etc/handoff/laptop.key"),
///     authorizedKeys: KeyFile.readPublicKeys(at: "/etc/handoff/account"),
///     brokerKey: KeyFile.readPublicKey("/etc/handoff/account/broker.pub"))
/// ```
public struct Security: Sendable, Hashable {
    /// This process's long-term key pair (from `handoff keygen`).
    public var keyPair: CurveKeyPair
    /// The account: public keys allowed to connect. This process's own key is always allowed.
    public var authorizedKeys: Set<CurveKey>
    /// The broker's public key, for a node on a broker bus.
    public var brokerKey: CurveKey?
    /// Direct bus: each peer endpoint's public key (its node's key).
    public var peerKeys: [String: CurveKey]

    public init(
        keyPair: CurveKeyPair, authorizedKeys: Set<CurveKey>, brokerKey: CurveKey? = nil,
        peerKeys: [String: CurveKey] = [:]
    ) {
        self.keyPair = keyPair
        self.authorizedKeys = authorizedKeys
        self.brokerKey = brokerKey
        self.peerKeys = peerKeys
    }

    /// The same security, with `keys` let in too (a broker's relays: its sites' brokers).
    func admitting(_ keys: Set<CurveKey>) -> Security {
        var security = self
        security.authorizedKeys.formUnion(keys)
        return security
    }

    /// Whether `key` belongs to the account.
    public func authorizes(_ key: CurveKey) -> Bool {
        key == keyPair.publicKey || authorizedKeys.contains(key)
    }

    /// The ZAP policy for this account: allows account keys over CURVE (their Z85 text becomes each
    /// frame's "User-Id"), refuses everything else, and logs the refusals at most once a minute per
    /// peer address (``RefusalLog``; ZAP's counters count every one).
    func zapPolicy(logger: Logger, what: String) -> ZAPHandler.Policy {
        let security = self
        // The policy runs on the ZAP handler's thread; its log is its own, under a lock.
        let log = SharedRefusalLog()
        return { request in
            let address = request.address.isEmpty ? nil : request.address
            // Only a server socket that runs no CURVE itself asks about another mechanism (a CURVE
            // server refuses it at the greeting, before ZAP): a configuration error, not a peer's.
            guard request.mechanism == "CURVE", let key = request.publicKey else {
                logger.error("refused a \(request.mechanism) handshake from \(request.address) at \(what): a socket of its ZAP domain runs without CURVE")
                return .deny("CURVE required")
            }
            guard security.authorizes(key) else {
                if let line = log.line(.keyNotInAccount, from: address, at: what, detail: " (key \(key.z85))") {
                    logger.warning("\(line)")
                }
                return .deny("key not in this account")
            }
            return .allow(userID: key.z85)
        }
    }

    /// Makes `socket` a CURVE server for this account under `domain`.
    func secureServer(_ socket: Socket, domain: String) throws(ZMQError) {
        try socket.makeCurveServer(keyPair, zapDomain: domain)
    }

    /// Makes `socket` a CURVE client of the server with `serverKey`.
    func secureClient(_ socket: Socket, serverKey: CurveKey) throws(ZMQError) {
        try socket.makeCurveClient(keyPair, serverKey: serverKey)
    }

    // MARK: Loopback

    /// The ZeroMQ transports that reach other machines.
    static let networkTransports = ["tcp", "ws", "wss", "udp", "pgm", "epgm", "norm", "tipc", "vmci"]

    /// Whether `endpoint` names a transport that can leave this machine (TCP and its kin), wherever
    /// its address points. Unknown schemes are not: libzmq refuses them with its own error.
    static func isNetwork(_ endpoint: String) -> Bool {
        guard let scheme = endpoint.range(of: "://").map({ endpoint[..<$0.lowerBound] }) else { return false }
        return networkTransports.contains(scheme.lowercased())
    }

    /// Whether `endpoint` stays on this machine: `inproc://`, `ipc://`, or TCP on a loopback address.
    public static func isLocal(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("inproc://") || endpoint.hasPrefix("ipc://") { return true }
        guard endpoint.hasPrefix("tcp://") else { return false }
        var address = endpoint.dropFirst("tcp://".count)
        // "tcp://interface;host:port" connects from an interface to a host: the host is what counts.
        if let semicolon = address.lastIndex(of: ";") { address = address[address.index(after: semicolon)...] }
        let host: Substring
        if address.hasPrefix("[") {
            host = address.dropFirst().prefix { $0 != "]" }
        } else {
            host = address.prefix { $0 != ":" }
        }
        return host.hasPrefix("127.") || host == "localhost" || host == "::1" || host == "lo"
    }

    /// Refuses to go beyond loopback without security, unless insecure operation was asked for.
    ///
    /// - Throws: ``HandoffError`` with ``HandoffError/Code-swift.struct/invalidConfiguration`` naming
    ///   the first endpoint that leaves the machine.
    public static func requireSecurity(
        for endpoints: [String], security: Security?, allowInsecure: Bool, what: String
    ) throws(HandoffError) {
        guard security == nil, !allowInsecure else { return }
        if let open = endpoints.first(where: { isNetwork($0) && !isLocal($0) }) {
            throw HandoffError(.invalidConfiguration, "\(what) would use \(open) without CURVE: anything beyond loopback runs secure by default. Give it a key pair and the account's public keys (`handoff keygen`), or allow insecure operation explicitly (--insecure) for local development")
        }
    }
}

/// Key files as `handoff keygen` writes them: text, one `name = "Z85"` pair a line, `#` comments.
///
/// - `NAME.key` (mode 0600): `public-key` and `secret-key`, the node's identity; keep it secret.
/// - `NAME.pub`: `public-key` only; copy it to every machine of the account. A folder of `.pub`
///   files is an account (an allow-list).
///
/// A public key can also be given as its bare 40-character Z85 text wherever a path is expected.
public enum KeyFile {
    /// Makes a new key pair and writes `NAME.key` and `NAME.pub` into `directory`.
    ///
    /// - Returns: The key pair and the two files' paths.
    /// - Throws: ``HandoffError`` (``HandoffError/Code-swift.struct/invalidConfiguration``) when a
    ///   file exists already (unless `overwrite`), or cannot be written.
    @discardableResult
    public static func generate(name: String, in directory: URL, overwrite: Bool = false) throws -> (keyPair: CurveKeyPair, secret: URL, public: URL) {
        let keyPair = try CurveKeyPair.generate()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let secretURL = directory.appendingPathComponent("\(name).key")
        let publicURL = directory.appendingPathComponent("\(name).pub")
        for url in [secretURL, publicURL] where !overwrite && FileManager.default.fileExists(atPath: url.path) {
            throw HandoffError(.invalidConfiguration, "\(url.path) exists already; not overwriting a key (pass --force to replace it)")
        }
        let stamp = Date().formatted(.iso8601)
        let secretText = """
            # Handoff CURVE key pair of "\(name)", made by `handoff keygen` on \(stamp).
            # SECRET: whoever holds this file is "\(name)" to the whole account. Share NAME.pub instead.
            public-key = "\(keyPair.publicKey.z85)"
            secret-key = "\(keyPair.secretKey.z85)"

            """
        let publicText = """
            # Handoff CURVE public key of "\(name)", made by `handoff keygen` on \(stamp).
            public-key = "\(keyPair.publicKey.z85)"

            """
        try write(secretText, to: secretURL, permissions: 0o600)
        try write(publicText, to: publicURL, permissions: 0o644)
        return (keyPair, secretURL, publicURL)
    }

    /// Reads a key pair from a `.key` file.
    public static func readKeyPair(at path: String) throws -> CurveKeyPair {
        let fields = try read(path)
        guard let secret = fields["secret-key"] else {
            throw HandoffError(.invalidConfiguration, "\(path) has no secret-key (is it a .pub file? a node needs its .key file)")
        }
        let keyPair = try CurveKeyPair(secretKey: key(secret, in: path))
        if let stated = fields["public-key"], stated != keyPair.publicKey.z85 {
            throw HandoffError(.invalidConfiguration, "\(path): its public-key does not belong to its secret-key")
        }
        return keyPair
    }

    /// A public key: bare Z85 text, or the `public-key` of a `.pub` or `.key` file.
    public static func readPublicKey(_ textOrPath: String) throws -> CurveKey {
        if textOrPath.utf8.count == 40, !FileManager.default.fileExists(atPath: textOrPath),
           let key = try? CurveKey(z85: textOrPath) {
            return key
        }
        guard let text = try read(textOrPath)["public-key"] else {
            throw HandoffError(.invalidConfiguration, "\(textOrPath) has no public-key")
        }
        return try key(text, in: textOrPath)
    }

    /// The public keys of an account: a folder (every `*.pub` in it), one key file, or bare Z85 text.
    public static func readPublicKeys(at textOrPath: String) throws -> Set<CurveKey> {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: textOrPath, isDirectory: &isDirectory), isDirectory.boolValue {
            let files = try FileManager.default.contentsOfDirectory(atPath: textOrPath)
                .filter { $0.hasSuffix(".pub") }.sorted()
            return Set(try files.map { try readPublicKey(textOrPath + "/" + $0) })
        }
        return [try readPublicKey(textOrPath)]
    }

    private static func key(_ z85: String, in path: String) throws -> CurveKey {
        do {
            return try CurveKey(z85: z85)
        } catch {
            throw HandoffError(.invalidConfiguration, "\(path): \"\(z85)\" is not a Z85 CURVE key (40 characters)")
        }
    }

    private static func read(_ path: String) throws -> [String: String] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw HandoffError(.invalidConfiguration, "cannot read the key file \(path): \(error.localizedDescription)")
        }
        var fields: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.isEmpty, !trimmed.hasPrefix("#"), let equals = trimmed.firstIndex(of: "=") else { continue }
            let name = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            let value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
                .trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            fields[name] = value
        }
        return fields
    }

    private static func write(_ text: String, to url: URL, permissions: Int) throws {
        // Created with its final permissions, so a secret is never readable by others, even briefly.
        let descriptor = open(url.path, O_WRONLY | O_CREAT | O_TRUNC, mode_t(permissions))
        guard descriptor >= 0 else {
            throw HandoffError(.invalidConfiguration, "cannot write \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        fchmod(descriptor, mode_t(permissions))
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Foundation.write(descriptor, $0.baseAddress, $0.count) }) == bytes.count,
              fsync(descriptor) == 0 else {
            throw HandoffError(.invalidConfiguration, "cannot write \(url.path): \(String(cString: strerror(errno)))")
        }
    }
}
