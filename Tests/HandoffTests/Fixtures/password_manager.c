/* A password manager's copy on an X display, for X11ClipboardTests: owns CLIPBOARD offering the
 * text as UTF8_STRING and x-kde-passwordManagerHint = "secret" (as KeePassXC marks a password), says
 * READY, and serves requests until another client copies. Built with gcc -lX11 by the test. */
#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *text = argc > 1 ? argv[1] : "hunter2";
    Display *display = XOpenDisplay(NULL);
    if (!display) return 1;
    Window window = XCreateSimpleWindow(display, DefaultRootWindow(display), 0, 0, 1, 1, 0, 0, 0);
    Atom clipboard = XInternAtom(display, "CLIPBOARD", False);
    Atom targets = XInternAtom(display, "TARGETS", False);
    Atom utf8 = XInternAtom(display, "UTF8_STRING", False);
    Atom hint = XInternAtom(display, "x-kde-passwordManagerHint", False);
    XSetSelectionOwner(display, clipboard, window, CurrentTime);
    if (XGetSelectionOwner(display, clipboard) != window) return 2;
    printf("READY\n");
    fflush(stdout);
    for (;;) {
        XEvent event;
        XNextEvent(display, &event);
        if (event.type == SelectionClear) return 0;
        if (event.type != SelectionRequest) continue;
        XSelectionRequestEvent *request = &event.xselectionrequest;
        Atom property = request->property == None ? request->target : request->property;
        if (request->target == targets) {
            Atom list[3] = {targets, utf8, hint};
            XChangeProperty(display, request->requestor, property, XA_ATOM, 32, PropModeReplace, (unsigned char *)list, 3);
        } else if (request->target == utf8) {
            XChangeProperty(display, request->requestor, property, utf8, 8, PropModeReplace, (const unsigned char *)text, (int)strlen(text));
        } else if (request->target == hint) {
            XChangeProperty(display, request->requestor, property, utf8, 8, PropModeReplace, (const unsigned char *)"secret", 6);
        } else {
            property = None;
        }
        XEvent reply;
        memset(&reply, 0, sizeof reply);
        reply.xselection.type = SelectionNotify;
        reply.xselection.requestor = request->requestor;
        reply.xselection.selection = request->selection;
        reply.xselection.target = request->target;
        reply.xselection.property = property;
        reply.xselection.time = request->time;
        XSendEvent(display, request->requestor, False, NoEventMask, &reply);
        XFlush(display);
    }
}
