/*
 * The X11 CLIPBOARD selection for the clipboard plugin: notice when another client copies
 * (XFIXES selection-owner events), read what it copied (INCR for large content), and own the
 * selection to serve pastes (INCR too), lazily when the content is elsewhere.
 *
 * Not thread-safe: one thread owns a connection and makes every call on it (as with a ZeroMQ
 * socket). Errors come back as a message in the caller's buffer.
 */
#ifndef HANDOFF_X11_CLIPBOARD_H
#define HANDOFF_X11_CLIPBOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct hx11 hx11;

/* What hx11_process saw that the caller acts on (flags). */
typedef enum hx11_event {
    HX11_NOTHING = 0,
    /* Another client owns CLIPBOARD now: something was copied on this display. */
    HX11_COPIED = 1,
    /* A paste asks for content this connection offered lazily (hx11_offer with no data): fetch it,
     * then hx11_provide (or hx11_refuse). */
    HX11_CONTENT_WANTED = 2,
} hx11_event;

/* Opens `display` (NULL: $DISPLAY), makes a hidden window, asks XFIXES for CLIPBOARD's owner
 * changes. NULL on failure, with the reason in error. */
hx11 *hx11_open(const char *display, char *error, size_t error_capacity);
void hx11_close(hx11 *x);

/* The connection's file descriptor: poll it for reading, then call hx11_process. */
int hx11_fd(const hx11 *x);

/* Handles every event waiting (serving pastes of what this connection owns, INCR steps); never
 * blocks. Returns what the caller acts on: hx11_event flags, or-ed (HX11_NOTHING for none). */
int hx11_process(hx11 *x);

/* Reads CLIPBOARD in the first of `types` (MIME types; text/plain;charset=utf-8 also matches
 * UTF8_STRING) its owner offers, waiting up to timeout_ms for each answer (for each chunk of an INCR
 * transfer, and ten times that for the whole of one). Returns 0 with malloc'd content in
 * *data (free() it) and its type in type_out; 1 when the owner marked it secret
 * (x-kde-passwordManagerHint: secret), nothing read; 2 when it offers none of `types` (or nobody
 * owns it); -1 on error or over max_bytes (error says). Content this connection owns is not read. */
int hx11_read(hx11 *x, const char *const *types, size_t type_count, size_t max_bytes, int timeout_ms,
              char *type_out, size_t type_capacity, uint8_t **data, size_t *length,
              char *error, size_t error_capacity);

/* Owns CLIPBOARD with content of `type` (copied here), or, with data NULL, lazily: pastes ask
 * for it through HX11_CONTENT_WANTED. Returns 0, or -1 (error says). */
int hx11_offer(hx11 *x, const char *type, const uint8_t *data, size_t length, char *error, size_t error_capacity);

/* The content a lazy offer's pastes wait for: answers them (and later ones). */
int hx11_provide(hx11 *x, const uint8_t *data, size_t length);

/* The pastes waiting for a lazy offer get nothing (the content could not be fetched). */
void hx11_refuse(hx11 *x);

#endif
