import Foundation
import Glibc

/// A process that asks for it (`HANDOFF_EXIT_WITH_PARENT=1` in its environment) ends when the
/// process that started it is gone, whatever killed that one: a test run interrupted or killed,
/// a supervisor script killed with -9. Without it a broker or agent outlives whoever started it
/// (a shell that exits, `nohup`), as a daemon should.
///
/// Linux's parent-death signal (PR_SET_PDEATHSIG) is not used: it fires when the *thread* that
/// started the child ends, and a Swift program starts its children from pool threads that come
/// and go. The watch reads `getppid()` instead: it changes (to init or a subreaper) only when
/// the parent process is gone.
public enum ParentWatch {
    public static let variable = "HANDOFF_EXIT_WITH_PARENT"

    /// Starts the watch when the environment asks for it; call first thing in `main`. When the
    /// parent goes, the process gets SIGTERM (a graceful stop: an agent withdraws its activities),
    /// and ends at once if it still runs 3 s later.
    public static func exitWithParentIfAsked(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard environment[variable] == "1" else { return }
        let parent = getppid()
        let thread = Thread {
            while getppid() == parent && parent > 1 {
                usleep(200_000)
            }
            kill(getpid(), SIGTERM)
            sleep(3)
            _exit(128 + SIGTERM)
        }
        thread.name = "handoff parent watch"
        thread.start()
    }
}
