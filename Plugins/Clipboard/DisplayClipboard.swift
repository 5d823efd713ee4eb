import Foundation

/// A desktop's clipboard the plugin watches and serves: the X11 display's CLIPBOARD
/// (X11Clipboard) or a Wayland compositor's (WaylandClipboard). Each runs on a thread of its own;
/// the plugin posts it commands and it calls the plugin's handlers.
protocol DisplayClipboard: AnyObject, Sendable {
    func post(_ command: DisplayCommand)
    func stop()
}

/// What the plugin asks of the desktop's clipboard.
enum DisplayCommand: Sendable {
    /// Hold this content (a paste or copy here by command).
    case offer(type: String, content: Data)
    /// An offer newer than this node's copy is on the bus: make it pastable here, its content
    /// fetched (`wanted`) when the desktop can wait for it, or at once when it cannot.
    case offerLazily(type: String)
}

/// What the plugin does for the desktop's clipboard.
struct DisplayHandlers: Sendable {
    /// Something on the desktop copied: content (nil when secret, not read), its type.
    var copied: @Sendable (Data?, String) -> Void
    /// The newest offer's content in this type, pulled when another node's (nil when it cannot be
    /// had in that type, or is over `limit` bytes).
    var wanted: @Sendable (_ type: String, _ limit: Int?) -> Data?
    var log: @Sendable (String) -> Void
}

extension DisplayClipboard {
    /// The types read from a copy, best first (files before their names as text).
    static var readTypes: [String] { ["image/png", "text/uri-list", ContentType.text] }
}

/// The desktop's clipboard for this agent: Wayland's where a compositor is named
/// (HANDOFF_CLIPBOARD_WAYLAND_DISPLAY, else WAYLAND_DISPLAY), X11's where a display is
/// (HANDOFF_CLIPBOARD_DISPLAY, else DISPLAY); an empty value turns either off.
func desktopClipboard(environment: [String: String], maxBytes: @escaping @Sendable () -> Int, prefetchBytes: @escaping @Sendable () -> Int,
                      handlers: DisplayHandlers) -> (any DisplayClipboard)? {
    if let wayland = environment["HANDOFF_CLIPBOARD_WAYLAND_DISPLAY"] ?? environment["WAYLAND_DISPLAY"], !wayland.isEmpty {
        return WaylandClipboard(display: wayland, maxBytes: maxBytes, prefetchBytes: prefetchBytes, handlers: handlers)
    }
    if let display = environment["HANDOFF_CLIPBOARD_DISPLAY"] ?? environment["DISPLAY"], !display.isEmpty {
        return X11Clipboard(display: display, maxBytes: maxBytes, handlers: handlers)
    }
    return nil
}
