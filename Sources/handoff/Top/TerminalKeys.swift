import Glibc

/// The terminal's settings to put back when a signal ends `top` (read by the handler alone).
nonisolated(unsafe) private var terminalToRestore: termios?

/// Keys pressed in `handoff top`, read without waiting and without echo: standard input in
/// non-canonical mode while `top` runs, restored after (also when it stops on an error).
final class TerminalKeys {
    /// Whether standard input and output are a terminal (otherwise no keys, no screen clearing).
    let isTerminal: Bool
    private var saved = termios()

    init() {
        isTerminal = isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1
        guard isTerminal, tcgetattr(STDIN_FILENO, &saved) == 0 else { return }
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        // VMIN 0, VTIME 0: read returns at once with what is there.
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 0
            cc[Int(VTIME)] = 0
        }
        tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        // Ctrl-C (ISIG stays on) and SIGTERM give the terminal back before the process ends.
        terminalToRestore = saved
        for signal in [SIGINT, SIGTERM] {
            Glibc.signal(signal) { number in
                if var saved = terminalToRestore { tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
                _exit(128 + number)
            }
        }
    }

    /// The keys pressed since the last call.
    func read() -> [Character] {
        guard isTerminal else { return [] }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = Glibc.read(STDIN_FILENO, &buffer, buffer.count)
        guard count > 0 else { return [] }
        return buffer[..<count].map { Character(Unicode.Scalar($0)) }
    }

    func restore() {
        guard isTerminal else { return }
        tcsetattr(STDIN_FILENO, TCSANOW, &saved)
    }

    /// The terminal's width in columns (132 when not a terminal).
    static var width: Int {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 132 }
        return Int(size.ws_col)
    }
}
