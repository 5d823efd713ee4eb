import HandoffWire
import ZeroMQ

/// What this build of Handoff is and speaks, for `handoff --version` and logs.
public enum HandoffVersion {
    /// The release. Bumped by hand at each release (the tag is `v` followed by it).
    public static let release = "0.1.0"

    /// One line: the release, the wire protocol and plugin ABI it speaks, and the libzmq it runs with.
    public static var description: String {
        let zmq = ZeroMQLibrary.version
        let abi = PluginLoader.abiVersion
        return "handoff \(release) (wire protocol \(WireProtocol.version), plugin ABI \(abi.major).\(abi.minor), libzmq \(zmq.major).\(zmq.minor).\(zmq.patch))"
    }
}
