import Foundation
import Glibc
import Handoff

/// `HandoffTestNode watch -- <program> <arguments...>`: runs a program that is not ours (Xvfb,
/// xclip, sway, wl-copy) so that it ends with the test process, whatever ends that (a test
/// failing, the run interrupted, killed -9): the engineering rule that a test reaps what it
/// starts, for programs that cannot watch their parent themselves.
///
/// The program's parent-death signal is tied to the thread that started it. The tests start
/// processes from pool threads that come and go (which is why ``ParentWatch`` reads `getppid()`
/// instead), so the signal cannot be tied to them; here it is tied to this process's main thread,
/// which waits for the program and ends only after it:
/// - the test process gone: ``ParentWatch`` ends this process, and the kernel kills the program;
/// - this process killed (a test's `reap`, SIGKILL): the kernel kills the program;
/// - the program ends: this process ends with its status (128 + its signal when killed).
/// Its standard input, output and error are this process's, which it inherits.
enum WatchedChild {
    static func run(_ command: [String]) -> Never {
        // A test runner may ignore or block SIGTERM, and both are inherited: the watch's SIGTERM
        // must end this process at once (its program with it), not 3 s later.
        signal(SIGTERM, SIG_DFL)
        var terminate = sigset_t()
        sigemptyset(&terminate)
        sigaddset(&terminate, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &terminate, nil)
        ParentWatch.exitWithParentIfAsked(environment: [ParentWatch.variable: "1"])
        guard let program = command.first else {
            FileHandle.standardError.write(Data("watch: no program given\n".utf8))
            exit(2)
        }
        // setpriv sets the parent-death signal and then runs the program in its place.
        let arguments = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--", program] + command.dropFirst()
        var pid = pid_t()
        let status = withCStrings(arguments) { argv in posix_spawn(&pid, arguments[0], nil, nil, argv, environ) }
        guard status == 0 else {
            FileHandle.standardError.write(Data("watch: cannot start \(program): \(String(cString: strerror(status)))\n".utf8))
            exit(127)
        }
        var waited: Int32 = 0
        while waitpid(pid, &waited, 0) == -1 && errno == EINTR {}
        let signal = waited & 0x7F
        exit(signal == 0 ? (waited >> 8) & 0xFF : 128 + signal)
    }

    /// `body` with a NULL-terminated array of C strings.
    private static func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        return body(pointers)
    }
}
