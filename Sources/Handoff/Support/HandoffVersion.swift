import HandoffWire
import ZeroMQ

/// What this build of Handoff is and speaks, for `handoff --version`, logs and the
/// `handoff_build_info` metric.
public enum HandoffVersion {
    /// The release. Bumped by hand at each release (the tag is `v` followed by it).
    public static let release = "0.1.0"

    /// The wire protocol version this build speaks (`WireProtocol.version`), e.g. `1`.
    public static var wire: String { "\(WireProtocol.version)" }

    /// The plugin ABI this build hosts, e.g. `1.1`.
    public static var abi: String {
        let abi = PluginLoader.abiVersion
        return "\(abi.major).\(abi.minor)"
    }

    /// The libzmq this process runs with (not the one it was built against), e.g. `4.3.4`.
    public static var libzmq: String {
        let zmq = ZeroMQLibrary.version
        return "\(zmq.major).\(zmq.minor).\(zmq.patch)"
    }

    /// One line: the release, the wire protocol and plugin ABI it speaks, and the libzmq it runs with.
    public static var description: String {
        "handoff \(release) (wire protocol \(wire), plugin ABI \(abi), libzmq \(libzmq))"
    }
}
