import Glibc

/// One event-loop thread's own state, read when a job is queued from that thread.
final class LoopThread {
    /// The group the thread belongs to.
    unowned let group: EventLoopGroup
    /// Whether the thread is inside a job (not handling readiness between jobs).
    var inJob = false
    /// Nesting depth of ``EventLoopGroup/handingOff(_:)``.
    var handingOff = 0

    init(group: EventLoopGroup) {
        self.group = group
    }

    /// Whether a job this thread queues now runs next here: between jobs (handling readiness), or
    /// handing off.
    var runsNext: Bool { !inJob || handingOff > 0 }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// The calling thread's, when it is an event loop.
    static var current: LoopThread? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<LoopThread>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Makes `self` the calling thread's for good (loop threads never end).
    func adopt() {
        pthread_setspecific(Self.key, Unmanaged.passRetained(self).toOpaque())
    }
}
