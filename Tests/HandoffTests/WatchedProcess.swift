import Foundation

extension Process {
    /// A process for a program that is not ours (Xvfb, xclip, sway, wl-copy, a fixture), started
    /// through `HandoffTestNode watch` so that it ends with the test process whatever ends that:
    /// a failed or interrupted run leaves no X server or clipboard owner behind. Reaping the
    /// returned process (SIGKILL) ends the program too.
    static func watched(_ program: URL, _ arguments: [String] = []) -> Process {
        let process = Process()
        process.executableURL = ChildProcess.testNodeURL
        process.arguments = ["watch", "--", program.path] + arguments
        return process
    }
}
