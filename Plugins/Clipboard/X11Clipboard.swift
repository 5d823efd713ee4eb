import CClipboardX11
import Foundation
import Glibc

/// The X11 CLIPBOARD of the display the agent runs on ($DISPLAY), on a thread of its own that
/// owns the X connection (Plugins/ClipboardX11): a copy by any X client there becomes this node's
/// copy (offered to the account); an offer newer than this node's copy makes this node own the
/// selection lazily, and the first paste there pulls the content and answers it.
final class X11Clipboard: DisplayClipboard, @unchecked Sendable {
    // Invariant for @unchecked Sendable: `commands` and `stopped` are touched only under `lock`;
    // the X connection and `lazyType` only by the thread.
    // (`.offer` owns CLIPBOARD with content; `.offerLazily` owns it for an offer elsewhere,
    // fetched when something here pastes: X11 asks the owner at paste time.)

    private let lock = NSLock()
    private var commands: [DisplayCommand] = []
    private var stopped = false
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let maxBytes: @Sendable () -> Int
    /// The type of the lazy offer the display's pastes ask for (the thread's alone).
    private var lazyType: String?

    init?(display: String, maxBytes: @escaping @Sendable () -> Int, handlers: DisplayHandlers) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        (wakeRead, wakeWrite) = (fds[0], fds[1])
        _ = fcntl(wakeRead, F_SETFL, O_NONBLOCK)
        self.maxBytes = maxBytes
        let thread = Thread { [self] in run(display: display, handlers: handlers) }
        thread.name = "handoff clipboard X11"
        thread.start()
    }

    func post(_ command: DisplayCommand) {
        lock.withLock { commands.append(command) }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    func stop() {
        lock.withLock { stopped = true }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private func run(display: String, handlers: DisplayHandlers) {
        var error = [CChar](repeating: 0, count: 512)
        guard let x = hx11_open(display, &error, error.count) else {
            handlers.log("no X11 clipboard: \(text(error))")
            return
        }
        defer {
            hx11_close(x)
            close(wakeRead)
            close(wakeWrite)
        }
        handlers.log("watching the X11 clipboard of display \(display)")
        while true {
            var descriptors = [pollfd(fd: hx11_fd(x), events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            _ = poll(&descriptors, 2, 250)
            var drain = [UInt8](repeating: 0, count: 64)
            while read(wakeRead, &drain, drain.count) > 0 {}
            let (pending, stop) = lock.withLock { () -> ([DisplayCommand], Bool) in
                defer { commands = [] }
                return (commands, stopped)
            }
            if stop { return }
            for command in pending { execute(command, on: x, handlers: handlers) }
            let events = hx11_process(x)
            if events & Int32(HX11_COPIED.rawValue) != 0 { readCopy(x, handlers: handlers) }
            if events & Int32(HX11_CONTENT_WANTED.rawValue) != 0 {
                if let type = lazyType, let content = handlers.wanted(type, nil) {
                    let bytes = content.isEmpty ? [UInt8(0)] : [UInt8](content)
                    _ = hx11_provide(x, bytes, content.count)
                } else {
                    hx11_refuse(x)
                }
            }
        }
    }

    private func execute(_ command: DisplayCommand, on x: OpaquePointer, handlers: DisplayHandlers) {
        var error = [CChar](repeating: 0, count: 512)
        let status: Int32
        switch command {
        case .offer(let type, let content):
            // (Never a null pointer, which means lazy: an empty copy is one byte's room, length 0.)
            let bytes = content.isEmpty ? [UInt8(0)] : [UInt8](content)
            status = hx11_offer(x, type, bytes, content.count, &error, error.count)
        case .offerLazily(let type):
            status = hx11_offer(x, type, nil, 0, &error, error.count)
        }
        if case .offerLazily(let type) = command, status == 0 { lazyType = type } else { lazyType = nil }
        if status != 0 { handlers.log("cannot own the X11 clipboard: \(text(error))") }
    }

    private func readCopy(_ x: OpaquePointer, handlers: DisplayHandlers) {
        var error = [CChar](repeating: 0, count: 512)
        var type = [CChar](repeating: 0, count: 128)
        var data: UnsafeMutablePointer<UInt8>?
        var length = 0
        let types = Self.readTypes.map { strdup($0) }
        defer { for type in types { free(type) } }
        var pointers = types.map { UnsafePointer($0) }
        let status = hx11_read(x, &pointers, pointers.count, maxBytes(), 5_000, &type, type.count, &data, &length, &error, error.count)
        defer { free(data) }
        switch status {
        case 0:
            handlers.copied(Data(bytes: data!, count: length), text(type))
        case 1:
            handlers.copied(nil, "")
        case 2:
            break  // nothing of the types the account shares
        default:
            handlers.log("could not read what was copied on the display: \(text(error))")
        }
    }
}

/// A C string in a buffer, as text.
private func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
