import Glibc

/// Names threads as `ps -L`, `top -H` and `/proc/self/task/*/comm` show them.
public enum ThreadName {
    /// Names the calling thread; at most 15 bytes are kept.
    ///
    /// Foundation's `Thread.current.name = …` inside a thread's own block names the kernel thread
    /// only when the `Thread` already knows its pthread, which its starter records after
    /// `pthread_create` returns: a thread that runs first stays unnamed (2 to 3 in 100 on this
    /// 2-core VM; seen in CI as a loop missing from EventLoopsTests' count). `pthread_setname_np`
    /// is not in Swift's Glibc module, so the name is written where the kernel keeps it.
    public static func setCurrent(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
