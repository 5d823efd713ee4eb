/* The X11 CLIPBOARD for the clipboard plugin (see include/handoff_x11_clipboard.h): ICCCM
 * selections, INCR both ways, XFIXES for owner changes. One thread per connection. */
#include "handoff_x11_clipboard.h"

#include <X11/Xatom.h>
#include <X11/Xlib.h>
#include <X11/extensions/Xfixes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PENDING 16
#define MAX_TRANSFERS 8
#define TEXT_TYPE "text/plain;charset=utf-8"

/* One INCR transfer to a requestor: its own copy of the content, sent a chunk per PropertyDelete. */
typedef struct transfer {
    int active;
    Window requestor;
    Atom property;
    Atom type;
    uint8_t *data;
    size_t length;
    size_t offset;
} transfer;

struct hx11 {
    Display *display;
    Window window;
    int xfixes_event_base;
    Atom clipboard, targets, incr, utf8, string_atom, text_atom, text_plain_utf8, hint, property, timestamp;
    /* Largest property written at once; larger content goes by INCR. */
    size_t chunk;
    /* What this connection owns: content, or (lazy) only its type. */
    int owning;
    int lazy;
    Atom owned_type;
    int owned_text;
    uint8_t *owned;
    size_t owned_length;
    XSelectionRequestEvent pending[MAX_PENDING];
    int pending_count;
    transfer transfers[MAX_TRANSFERS];
    /* Events seen while hx11_read waited, reported by the next hx11_process. */
    int deferred;
};

static void set_error(char *error, size_t capacity, const char *format, ...) {
    if (!error || capacity == 0) return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error, capacity, format, arguments);
    va_end(arguments);
}

static long milliseconds_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec * 1000L + now.tv_nsec / 1000000L;
}

hx11 *hx11_open(const char *display_name, char *error, size_t error_capacity) {
    Display *display = XOpenDisplay(display_name);
    if (!display) {
        const char *name = display_name ? display_name : getenv("DISPLAY");
        set_error(error, error_capacity, "cannot open X display %s", name ? name : "(DISPLAY unset)");
        return NULL;
    }
    int event_base = 0, error_base = 0;
    if (!XFixesQueryExtension(display, &event_base, &error_base)) {
        set_error(error, error_capacity, "the X server has no XFIXES extension (needed to notice copies)");
        XCloseDisplay(display);
        return NULL;
    }
    hx11 *x = calloc(1, sizeof *x);
    if (!x) {
        XCloseDisplay(display);
        set_error(error, error_capacity, "out of memory");
        return NULL;
    }
    x->display = display;
    x->xfixes_event_base = event_base;
    x->window = XCreateSimpleWindow(display, DefaultRootWindow(display), -10, -10, 1, 1, 0, 0, 0);
    XSelectInput(display, x->window, PropertyChangeMask);
    x->clipboard = XInternAtom(display, "CLIPBOARD", False);
    x->targets = XInternAtom(display, "TARGETS", False);
    x->incr = XInternAtom(display, "INCR", False);
    x->utf8 = XInternAtom(display, "UTF8_STRING", False);
    x->string_atom = XA_STRING;
    x->text_atom = XInternAtom(display, "TEXT", False);
    x->text_plain_utf8 = XInternAtom(display, TEXT_TYPE, False);
    x->hint = XInternAtom(display, "x-kde-passwordManagerHint", False);
    x->property = XInternAtom(display, "HANDOFF_CLIPBOARD", False);
    x->timestamp = XInternAtom(display, "TIMESTAMP", False);
    XFixesSelectSelectionInput(display, x->window, x->clipboard, XFixesSetSelectionOwnerNotifyMask);
    long maximum = XExtendedMaxRequestSize(display);
    if (maximum == 0) maximum = XMaxRequestSize(display);
    size_t limit = (size_t)maximum * 4 - 1024;
    x->chunk = limit < 256 * 1024 ? limit : 256 * 1024;
    XFlush(display);
    return x;
}

static void refuse_pending(hx11 *x);

static void drop_owned(hx11 *x) {
    refuse_pending(x);
    free(x->owned);
    x->owned = NULL;
    x->owned_length = 0;
    x->owning = 0;
    x->lazy = 0;
}

void hx11_close(hx11 *x) {
    if (!x) return;
    drop_owned(x);
    for (int index = 0; index < MAX_TRANSFERS; index++) free(x->transfers[index].data);
    XDestroyWindow(x->display, x->window);
    XCloseDisplay(x->display);
    free(x);
}

int hx11_fd(const hx11 *x) { return ConnectionNumber(x->display); }

/* Tells a requestor its request is answered in `property` (None: refused). */
static void notify(hx11 *x, const XSelectionRequestEvent *request, Atom property) {
    XEvent reply;
    memset(&reply, 0, sizeof reply);
    reply.xselection.type = SelectionNotify;
    reply.xselection.display = x->display;
    reply.xselection.requestor = request->requestor;
    reply.xselection.selection = request->selection;
    reply.xselection.target = request->target;
    reply.xselection.property = property;
    reply.xselection.time = request->time;
    XSendEvent(x->display, request->requestor, False, NoEventMask, &reply);
}

static void refuse_pending(hx11 *x) {
    for (int index = 0; index < x->pending_count; index++) notify(x, &x->pending[index], None);
    x->pending_count = 0;
}

static int offers_target(const hx11 *x, Atom target) {
    if (target == x->owned_type) return 1;
    return x->owned_text && (target == x->utf8 || target == x->string_atom || target == x->text_atom || target == x->text_plain_utf8);
}

/* The owned content to one requestor: at once when it fits a request, else by INCR. */
static void send_content(hx11 *x, const XSelectionRequestEvent *request, Atom property) {
    Atom type = request->target == x->text_atom ? x->utf8 : request->target;
    if (x->owned_length <= x->chunk) {
        XChangeProperty(x->display, request->requestor, property, type, 8, PropModeReplace, x->owned, (int)x->owned_length);
        notify(x, request, property);
        return;
    }
    transfer *slot = NULL;
    for (int index = 0; index < MAX_TRANSFERS; index++) {
        if (!x->transfers[index].active) {
            slot = &x->transfers[index];
            break;
        }
    }
    uint8_t *copy = slot ? malloc(x->owned_length) : NULL;
    if (!copy) {
        notify(x, request, None);
        return;
    }
    memcpy(copy, x->owned, x->owned_length);
    free(slot->data);
    *slot = (transfer){.active = 1, .requestor = request->requestor, .property = property, .type = type, .data = copy, .length = x->owned_length};
    XSelectInput(x->display, request->requestor, PropertyChangeMask);
    long size = (long)x->owned_length;
    XChangeProperty(x->display, request->requestor, property, x->incr, 32, PropModeReplace, (unsigned char *)&size, 1);
    notify(x, request, property);
}

/* The requestor deleted what it read: the next chunk of its INCR transfer, or the empty end. */
static void continue_transfer(hx11 *x, Window window, Atom property) {
    for (int index = 0; index < MAX_TRANSFERS; index++) {
        transfer *t = &x->transfers[index];
        if (!t->active || t->requestor != window || t->property != property) continue;
        size_t left = t->length - t->offset;
        size_t count = left < x->chunk ? left : x->chunk;
        XChangeProperty(x->display, window, property, t->type, 8, PropModeReplace, t->data + t->offset, (int)count);
        t->offset += count;
        if (count == 0) {
            free(t->data);
            t->data = NULL;
            t->active = 0;
        }
        return;
    }
}

static int serve(hx11 *x, const XSelectionRequestEvent *request) {
    /* An obsolete client names no property: answer in the target's name. */
    Atom property = request->property == None ? request->target : request->property;
    if (!x->owning || request->selection != x->clipboard) {
        notify(x, request, None);
        return HX11_NOTHING;
    }
    if (request->target == x->targets) {
        Atom list[6];
        int count = 0;
        list[count++] = x->targets;
        list[count++] = x->owned_type;
        if (x->owned_text) {
            if (x->owned_type != x->utf8) list[count++] = x->utf8;
            if (x->owned_type != x->text_plain_utf8) list[count++] = x->text_plain_utf8;
            list[count++] = x->string_atom;
        }
        XChangeProperty(x->display, request->requestor, property, XA_ATOM, 32, PropModeReplace, (unsigned char *)list, count);
        notify(x, request, property);
        return HX11_NOTHING;
    }
    if (!offers_target(x, request->target)) {
        notify(x, request, None);
        return HX11_NOTHING;
    }
    if (x->lazy) {
        if (x->pending_count == MAX_PENDING) {
            notify(x, request, None);
            return HX11_NOTHING;
        }
        x->pending[x->pending_count] = *request;
        x->pending[x->pending_count].property = property;
        x->pending_count++;
        return HX11_CONTENT_WANTED;
    }
    send_content(x, request, property);
    return HX11_NOTHING;
}

static int handle(hx11 *x, XEvent *event) {
    if (event->type == x->xfixes_event_base + XFixesSelectionNotify) {
        XFixesSelectionNotifyEvent *change = (XFixesSelectionNotifyEvent *)event;
        if (change->selection == x->clipboard && change->owner != None && change->owner != x->window) return HX11_COPIED;
        return HX11_NOTHING;
    }
    switch (event->type) {
    case SelectionClear:
        if (event->xselectionclear.selection == x->clipboard) drop_owned(x);
        return HX11_NOTHING;
    case SelectionRequest:
        return serve(x, &event->xselectionrequest);
    case PropertyNotify:
        if (event->xproperty.state == PropertyDelete && event->xproperty.window != x->window) {
            continue_transfer(x, event->xproperty.window, event->xproperty.atom);
        }
        return HX11_NOTHING;
    default:
        return HX11_NOTHING;
    }
}

int hx11_process(hx11 *x) {
    int result = x->deferred;
    x->deferred = 0;
    while (XPending(x->display)) {
        XEvent event;
        XNextEvent(x->display, &event);
        result |= handle(x, &event);
    }
    XFlush(x->display);
    return result;
}

/* Waits for the event `wanted` picks, handling (and deferring the outcome of) every other one. */
typedef int (*event_filter)(const hx11 *x, const XEvent *event, Atom atom);

static int is_selection_notify(const hx11 *x, const XEvent *event, Atom target) {
    return event->type == SelectionNotify && event->xselection.requestor == x->window && event->xselection.target == target;
}

static int is_new_value(const hx11 *x, const XEvent *event, Atom property) {
    return event->type == PropertyNotify && event->xproperty.window == x->window && event->xproperty.atom == property &&
           event->xproperty.state == PropertyNewValue;
}

static int wait_for(hx11 *x, event_filter wanted, Atom atom, XEvent *out, long deadline) {
    for (;;) {
        while (XPending(x->display)) {
            XNextEvent(x->display, out);
            if (wanted(x, out, atom)) return 1;
            x->deferred |= handle(x, out);
        }
        long left = deadline - milliseconds_now();
        if (left <= 0) return 0;
        XFlush(x->display);
        struct pollfd descriptor = {.fd = ConnectionNumber(x->display), .events = POLLIN};
        poll(&descriptor, 1, (int)(left < INT_MAX ? left : INT_MAX));
    }
}

/* Asks the owner for `target` and reads the answer (INCR included, up to max_bytes): 0 with the
 * bytes, 2 refused, -1 error. For format-32 answers (TARGETS), the items are longs. The answer must
 * begin by `deadline`; an INCR transfer then has `patience_ms` for each chunk, so that a large copy
 * on a busy machine is read as long as it moves (a 20 MiB image is hundreds of chunks, each a round
 * trip through the X server), within ten times that in all. */
static int convert(hx11 *x, Atom target, size_t max_bytes, long deadline, int patience_ms, uint8_t **data, size_t *length,
                   int *format_out, char *error, size_t error_capacity) {
    XDeleteProperty(x->display, x->window, x->property);
    XConvertSelection(x->display, x->clipboard, target, x->property, x->window, CurrentTime);
    XFlush(x->display);
    XEvent event;
    if (!wait_for(x, is_selection_notify, target, &event, deadline)) {
        set_error(error, error_capacity, "the clipboard's owner did not answer in time");
        return -1;
    }
    if (event.xselection.property == None) return 2;
    Atom type;
    int format;
    unsigned long items, after;
    unsigned char *property = NULL;
    if (XGetWindowProperty(x->display, x->window, x->property, 0, LONG_MAX / 4, True, AnyPropertyType, &type, &format, &items,
                           &after, &property) != Success) {
        set_error(error, error_capacity, "cannot read the clipboard's answer");
        return -1;
    }
    *format_out = format;
    if (type != x->incr) {
        size_t unit = format == 32 ? sizeof(long) : (size_t)format / 8;
        size_t size = items * unit;
        if (size > max_bytes) {
            XFree(property);
            set_error(error, error_capacity, "the clipboard holds %zu bytes, over the limit of %zu", size, max_bytes);
            return -1;
        }
        *data = malloc(size ? size : 1);
        if (size) memcpy(*data, property, size);
        *length = size;
        XFree(property);
        return 0;
    }
    /* INCR: the owner sends chunks, each after this side deleted the last; an empty one ends it. */
    XFree(property);
    size_t capacity = 64 * 1024, size = 0;
    uint8_t *buffer = malloc(capacity);
    long last_chunk = milliseconds_now() + 10L * patience_ms;
    for (;;) {
        long next_chunk = milliseconds_now() + patience_ms;
        if (!buffer || !wait_for(x, is_new_value, x->property, &event, next_chunk < last_chunk ? next_chunk : last_chunk)) {
            free(buffer);
            set_error(error, error_capacity, buffer ? "the clipboard's owner stopped sending (INCR) in time" : "out of memory");
            return -1;
        }
        if (XGetWindowProperty(x->display, x->window, x->property, 0, LONG_MAX / 4, True, AnyPropertyType, &type, &format, &items,
                               &after, &property) != Success) {
            free(buffer);
            set_error(error, error_capacity, "cannot read a chunk of the clipboard");
            return -1;
        }
        XFlush(x->display);
        size_t chunk = items * (size_t)(format / 8);
        if (chunk == 0) {
            XFree(property);
            break;
        }
        if (size + chunk > max_bytes) {
            XFree(property);
            free(buffer);
            set_error(error, error_capacity, "the clipboard holds more than the limit of %zu bytes", max_bytes);
            return -1;
        }
        if (size + chunk > capacity) {
            while (size + chunk > capacity) capacity *= 2;
            uint8_t *grown = realloc(buffer, capacity);
            if (!grown) {
                XFree(property);
                free(buffer);
                set_error(error, error_capacity, "out of memory");
                return -1;
            }
            buffer = grown;
        }
        memcpy(buffer + size, property, chunk);
        size += chunk;
        XFree(property);
    }
    *data = buffer;
    *length = size;
    return 0;
}

int hx11_read(hx11 *x, const char *const *types, size_t type_count, size_t max_bytes, int timeout_ms, char *type_out,
              size_t type_capacity, uint8_t **data, size_t *length, char *error, size_t error_capacity) {
    *data = NULL;
    *length = 0;
    Window owner = XGetSelectionOwner(x->display, x->clipboard);
    if (owner == None || owner == x->window) return 2;
    long deadline = milliseconds_now() + timeout_ms;
    uint8_t *list = NULL;
    size_t list_length = 0;
    int format = 0;
    int status = convert(x, x->targets, 64 * 1024, deadline, timeout_ms, &list, &list_length, &format, error, error_capacity);
    if (status != 0) return status;
    const Atom *offered = (const Atom *)list;
    size_t count = format == 32 ? list_length / sizeof(long) : 0;
    int secret_hint = 0;
    Atom chosen = None;
    const char *chosen_type = NULL;
    for (size_t index = 0; index < count; index++) {
        if (offered[index] == x->hint) secret_hint = 1;
    }
    for (size_t wanted = 0; wanted < type_count && chosen == None; wanted++) {
        Atom atom = XInternAtom(x->display, types[wanted], False);
        int text = strcmp(types[wanted], TEXT_TYPE) == 0;
        for (size_t index = 0; index < count && chosen == None; index++) {
            if (offered[index] == atom || (text && offered[index] == x->utf8)) {
                chosen = offered[index];
                chosen_type = types[wanted];
            }
        }
    }
    free(list);
    if (secret_hint) {
        uint8_t *hint = NULL;
        size_t hint_length = 0;
        if (convert(x, x->hint, 1024, deadline, timeout_ms, &hint, &hint_length, &format, error, error_capacity) == 0) {
            int secret = hint_length >= 6 && memcmp(hint, "secret", 6) == 0;
            free(hint);
            if (secret) return 1;
        }
    }
    if (chosen == None) return 2;
    status = convert(x, chosen, max_bytes, deadline, timeout_ms, data, length, &format, error, error_capacity);
    if (status == 0) snprintf(type_out, type_capacity, "%s", chosen_type);
    return status;
}

int hx11_offer(hx11 *x, const char *type, const uint8_t *data, size_t length, char *error, size_t error_capacity) {
    drop_owned(x);
    x->owned_type = XInternAtom(x->display, type, False);
    x->owned_text = strncmp(type, "text/", 5) == 0;
    if (data) {
        x->owned = malloc(length ? length : 1);
        if (!x->owned) {
            set_error(error, error_capacity, "out of memory");
            return -1;
        }
        memcpy(x->owned, data, length);
        x->owned_length = length;
    } else {
        x->lazy = 1;
    }
    XSetSelectionOwner(x->display, x->clipboard, x->window, CurrentTime);
    if (XGetSelectionOwner(x->display, x->clipboard) != x->window) {
        drop_owned(x);
        set_error(error, error_capacity, "the X server did not give this client the CLIPBOARD selection");
        return -1;
    }
    x->owning = 1;
    XFlush(x->display);
    return 0;
}

int hx11_provide(hx11 *x, const uint8_t *data, size_t length) {
    if (!x->owning || !x->lazy) {
        refuse_pending(x);
        XFlush(x->display);
        return -1;
    }
    x->owned = malloc(length ? length : 1);
    if (!x->owned) {
        refuse_pending(x);
        XFlush(x->display);
        return -1;
    }
    memcpy(x->owned, data, length);
    x->owned_length = length;
    x->lazy = 0;
    for (int index = 0; index < x->pending_count; index++) send_content(x, &x->pending[index], x->pending[index].property);
    x->pending_count = 0;
    XFlush(x->display);
    return 0;
}

void hx11_refuse(hx11 *x) {
    refuse_pending(x);
    XFlush(x->display);
}
