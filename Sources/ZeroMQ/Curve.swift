import CZeroMQ

/// A 32-byte CURVE key, public or secret.
public struct CurveKey: Hashable, Sendable, CustomStringConvertible {
    /// The raw key.
    public let bytes: [UInt8]

    /// A key from its 32 raw bytes.
    ///
    /// - Throws: ``ZMQError`` with `invalidArgument` when `bytes` is not 32 bytes long.
    public init(bytes: [UInt8]) throws(ZMQError) {
        guard bytes.count == 32 else {
            throw ZMQError(.invalidArgument, operation: "CurveKey(bytes:) with \(bytes.count) bytes (a CURVE key is 32)")
        }
        self.bytes = bytes
    }

    /// A key from its 40-character Z85 text.
    ///
    /// - Throws: ``ZMQError`` with `invalidArgument` when `z85` is not a Z85-encoded 32-byte key.
    public init(z85: String) throws(ZMQError) {
        guard z85.utf8.count == 40 else {
            throw ZMQError(.invalidArgument, operation: "CurveKey(z85:) with \(z85.utf8.count) characters (a Z85 key has 40)")
        }
        var decoded = [UInt8](repeating: 0, count: 32)
        guard zmq_z85_decode(&decoded, z85) != nil else {
            throw ZMQError(.invalidArgument, operation: "CurveKey(z85:): not Z85 text")
        }
        bytes = decoded
    }

    /// The key as 40 characters of Z85 text, the form configuration files and `ZMQ_CURVE_*` options use.
    public var z85: String {
        var text = [CChar](repeating: 0, count: 41)
        zmq_z85_encode(&text, bytes, 32)
        return decodeCText(text)
    }

    /// The Z85 text; secret keys are printed too, so do not log them.
    public var description: String { z85 }
}

/// A CURVE key pair: a node's long-term identity.
public struct CurveKeyPair: Hashable, Sendable {
    public let publicKey: CurveKey
    public let secretKey: CurveKey

    public init(publicKey: CurveKey, secretKey: CurveKey) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// Makes a new random key pair.
    ///
    /// - Throws: ``ZMQError`` with `notSupported` when libzmq was built without CURVE.
    public static func generate() throws(ZMQError) -> CurveKeyPair {
        var publicText = [CChar](repeating: 0, count: 41)
        var secretText = [CChar](repeating: 0, count: 41)
        try zmqCall("zmq_curve_keypair") { zmq_curve_keypair(&publicText, &secretText) }
        return CurveKeyPair(
            publicKey: try CurveKey(z85: decodeCText(publicText)),
            secretKey: try CurveKey(z85: decodeCText(secretText)))
    }

    /// The key pair whose secret key is `secretKey` (the public key is derived from it).
    public init(secretKey: CurveKey) throws(ZMQError) {
        var publicText = [CChar](repeating: 0, count: 41)
        try zmqCall("zmq_curve_public") { zmq_curve_public(&publicText, secretKey.z85) }
        self.init(publicKey: try CurveKey(z85: decodeCText(publicText)), secretKey: secretKey)
    }
}

/// The text of a NUL-terminated C character buffer.
private func decodeCText(_ text: [CChar]) -> String {
    String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

extension Socket {
    /// Makes this socket a CURVE server with `keyPair`, its peers authenticated by the context's
    /// ``ZAPHandler`` under `zapDomain`. Set before `bind` (or `connect`).
    ///
    /// Without a ZAP handler in the context, libzmq lets in any client that knows the server's
    /// public key; a handler must be running (``ZAPHandler/shared(for:)``) for `zapDomain` to matter.
    public func makeCurveServer(_ keyPair: CurveKeyPair, zapDomain: String) throws(ZMQError) {
        try set(.curveServer, true)
        try set(.curveSecretKey, keyPair.secretKey.z85)
        try set(.curvePublicKey, keyPair.publicKey.z85)
        try set(.zapDomain, zapDomain)
    }

    /// Makes this socket a CURVE client with `keyPair`, talking only to the server whose public key
    /// is `serverKey` (the handshake fails against any other). Set before `connect` (or `bind`).
    public func makeCurveClient(_ keyPair: CurveKeyPair, serverKey: CurveKey) throws(ZMQError) {
        try set(.curveServerKey, serverKey.z85)
        try set(.curvePublicKey, keyPair.publicKey.z85)
        try set(.curveSecretKey, keyPair.secretKey.z85)
    }
}
