import Foundation
import Glibc
import Logging

/// What `handoff broker` and `handoff agent` do for systemd, without libsystemd: readiness over
/// `$NOTIFY_SOCKET` (units of `Type=notify`), and log lines the journal files at their own priority.
enum Systemd {
    /// Sends `state` (e.g. `READY=1`, `STOPPING=1`) to systemd's notification socket; does nothing
    /// when not started by systemd. Returns whether it was sent.
    @discardableResult
    static func notify(_ state: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard var path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        // "@name" is an abstract socket: a leading NUL byte instead of the @.
        let abstract = path.hasPrefix("@")
        if abstract { path.removeFirst() }
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path) - (abstract ? 1 : 0)
        guard bytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: (abstract ? [0] : []) + bytes)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 1 : 0) + (abstract ? 0 : 1))
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, message, message.count, Int32(MSG_NOSIGNAL), $0, length) }
        }
        return sent == message.count
    }

    /// Whether standard error is the journal: systemd sets `$JOURNAL_STREAM` to its device and inode.
    static func standardErrorIsJournal(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        guard let stream = environment["JOURNAL_STREAM"] else { return false }
        let parts = stream.split(separator: ":").compactMap { UInt64($0) }
        var status = stat()
        guard parts.count == 2, fstat(2, &status) == 0 else { return false }
        return UInt64(status.st_dev) == parts[0] && UInt64(status.st_ino) == parts[1]
    }
}

/// Log lines for the journal: each starts with its syslog priority (`<3>` for an error), which
/// journald reads (`SyslogLevelPrefix=`), so `journalctl -p warning` shows warnings and worse.
struct JournalLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The syslog priority of a level.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let line = "<\(Self.priority(event.level))>\(label): \(event.message)" + (fields.isEmpty ? "" : " [\(fields)]") + "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
