import Foundation
import Glibc
import Synchronization

/// A child process started with `posix_spawn`, every descriptor above standard error closed in it
/// by the kernel (`posix_spawn_file_actions_addclosefrom_np`).
///
/// Not Foundation's `Process`: on Linux its `run()` lists /proc/self/fd to close each descriptor in
/// the child, copying each entry's whole 256-byte name, which reads past glibc's buffer once more
/// than about 1,360 descriptors are open (swift-corelibs-foundation#5472, not in Swift 6.3.1): a
/// crash at random in the benchmarks that start a `handoff` while they hold thousands of sockets
/// (`hostile`'s 2,000 DEALERs, a fleet's joiners). As `Process` does, the child is put in a process
/// group of its own and inherits standard input, output and error unless `output` is given.
final class SpawnedProcess: Sendable {
    let processIdentifier: pid_t
    /// The status `waitpid` reported, once it has.
    private let reaped = Mutex<Int32?>(nil)

    init(_ executable: URL, arguments: [String], environment: [String: String], output: FileHandle? = nil) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let output, output.fileDescriptor >= 0 {
            posix_spawn_file_actions_adddup2(&actions, output.fileDescriptor, STDOUT_FILENO)
            posix_spawn_file_actions_adddup2(&actions, output.fileDescriptor, STDERR_FILENO)
        } else if output != nil {
            // `FileHandle.nullDevice` has no descriptor (-1): Process opens /dev/null for it.
            posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO)
        }
        guard let closeFrom = Self.addCloseFrom else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(ENOSYS), userInfo: [
                NSLocalizedDescriptionKey: "cannot start \(executable.path): glibc has no posix_spawn_file_actions_addclosefrom_np (2.34 and later do)"])
        }
        _ = closeFrom(&actions, STDERR_FILENO + 1)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)

        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid = pid_t()
        let result = posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(result), userInfo: [
                NSLocalizedDescriptionKey: "cannot start \(executable.path): \(String(cString: strerror(result)))"])
        }
        processIdentifier = pid
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), looked up at run time:
    /// spawn.h declares it only for `_GNU_SOURCE`, which Swift's Glibc module is not read with.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32)? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32).self)
    }()

    /// Waits for the process to end and reaps it.
    func waitUntilExit() {
        reaped.withLock { status in
            guard status == nil else { return }
            var raw: Int32 = 0
            while waitpid(processIdentifier, &raw, 0) == -1 && errno == EINTR {}
            status = raw
        }
    }

    /// Whether the process has not ended yet (reaping it if it has).
    var isRunning: Bool {
        reaped.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            guard waitpid(processIdentifier, &raw, WNOHANG) == processIdentifier else { return true }
            status = raw
            return false
        }
    }

    /// The exit status, or the signal that ended it, as `Process` reports them; after
    /// ``waitUntilExit()``.
    var terminationStatus: Int32 {
        guard let raw = reaped.withLock({ $0 }) else { preconditionFailure("the process has not been waited for") }
        let signal = raw & 0x7F
        return signal == 0 ? (raw >> 8) & 0xFF : signal
    }

    /// Sends SIGTERM.
    func terminate() { kill(processIdentifier, SIGTERM) }
}
