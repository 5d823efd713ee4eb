/*
 * handoff_plugin.h — the Handoff plugin ABI, version 1.2.
 *
 * A plugin is a shared object that teaches a Handoff node new activity types. It exports one
 * function, HANDOFF_PLUGIN_ENTRY_SYMBOL, which returns a descriptor: what the plugin is, which
 * activity types it handles (its NSUserActivityTypes), and its handlers. The host passes the plugin
 * a table of host functions when it initializes it.
 *
 * Only C types and protobuf bytes cross this boundary. Activities travel as serialized
 * handoff.v1.Activity messages (Proto/handoff/v1/activity.proto); decode them with any protobuf
 * library (protobuf-c, SwiftProtobuf, ...).
 *
 * Compatibility rules (see docs/plugin-abi.md):
 *  - The host accepts a plugin when abi_major equals the host's major and abi_minor is at most the
 *    host's minor. struct_size lets either side tell how much of a struct the other knows.
 *  - Structs are append-only: a new minor version only adds fields at the end, taking the place of
 *    `reserved` entries (so the struct keeps its size). Fields are never removed, reordered or
 *    retyped within a major version. The host copies min(struct_size, its own size) bytes of a
 *    plugin's descriptor and reads what the plugin's struct lacks as NULL; every `reserved` entry
 *    (and, in a 1.0 plugin, every field 1.1 added) must be NULL, or the plugin is refused.
 *  - 1.1 added: handoff_host.needs_save, and the descriptor's will_save, was_continued and
 *    did_update (the app delegate's will-save, was-continued and did-update). A 1.0 plugin loads
 *    on a 1.1 host unchanged; a 1.1 plugin checks host->abi_minor >= 1 before calling needs_save.
 *  - 1.2 added: handoff_host.continue_activity (a plugin's own command continues an activity of
 *    its types, e.g. a paste) and the descriptor's activity_changed (the activities of its types
 *    appearing, changing and going on the bus). 1.0 and 1.1 plugins load on a 1.2 host; a 1.2
 *    plugin checks host->abi_minor >= 2 before calling continue_activity.
 *  - Every string is UTF-8 and NUL-terminated. Strings and arrays in the descriptor must stay valid
 *    for the life of the process (plugins are never unloaded).
 *
 * Threads: the host calls init, restore, command, will_save, was_continued, did_update,
 * activity_changed and shutdown on a thread of its choosing, one call at a time per plugin unless
 * HANDOFF_PLUGIN_THREAD_SAFE is set (activity_changed is one at a time, in order, either way;
 * shutdown is the last call, made once every other has returned); write_stream and read_stream
 * are called on a thread of their own and may block for as long as the transfer takes. Host
 * functions may be called from any thread.
 */
#ifndef HANDOFF_PLUGIN_H
#define HANDOFF_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HANDOFF_PLUGIN_ABI_MAJOR 1
#define HANDOFF_PLUGIN_ABI_MINOR 2

/* The symbol every plugin exports: const handoff_plugin_descriptor *handoff_plugin_entry(void). */
#define HANDOFF_PLUGIN_ENTRY_SYMBOL "handoff_plugin_entry"

/* Status codes returned by handlers and host functions. */
typedef enum handoff_status {
    HANDOFF_OK = 0,
    HANDOFF_FAILED = 1,              /* anything else; the message says what */
    HANDOFF_INVALID_ARGUMENT = 2,    /* malformed bytes, unknown type, bad arguments */
    HANDOFF_NOT_FOUND = 3,           /* no such activity, contact, command */
    HANDOFF_STREAM_FAILED = 4,       /* the stream was cancelled, truncated, or its peer was lost */
    HANDOFF_UNSUPPORTED = 5          /* the host or plugin does not offer this */
} handoff_status;

/* Log levels for handoff_host.log. */
typedef enum handoff_log_level {
    HANDOFF_LOG_DEBUG = 0,
    HANDOFF_LOG_INFO = 1,
    HANDOFF_LOG_WARNING = 2,
    HANDOFF_LOG_ERROR = 3
} handoff_log_level;

/* Where a handler explains a failure: write a NUL-terminated message of at most capacity bytes. */
typedef struct handoff_error_buffer {
    char *message;
    size_t capacity;
} handoff_error_buffer;

/* Writes `message` into an error buffer: truncated to fit, always NUL-terminated. */
static inline void handoff_error_set(handoff_error_buffer error, const char *message) {
    if (error.message == NULL || error.capacity == 0) return;
    size_t length = 0;
    while (message != NULL && message[length] != '\0' && length + 1 < error.capacity) {
        error.message[length] = message[length];
        length++;
    }
    error.message[length] = '\0';
}

/* Bytes to the other side of a continuation stream. write blocks until the bytes are accepted
 * (flow control: the reader may be behind). Returns HANDOFF_OK or HANDOFF_STREAM_FAILED. */
typedef struct handoff_stream_writer {
    void *context;
    int32_t (*write)(void *context, const uint8_t *bytes, size_t length);
    /* Tells the reader the total length in advance (optional; for progress). */
    void (*set_expected_length)(void *context, uint64_t length);
} handoff_stream_writer;

/* Bytes from the other side of a continuation stream. read blocks until at least one byte
 * arrives, then copies up to capacity bytes; returns the count, 0 at the verified end of the
 * stream (length and checksum matched), or -1 when the stream failed (message in error). */
typedef struct handoff_stream_reader {
    void *context;
    int64_t (*read)(void *context, uint8_t *buffer, size_t capacity, handoff_error_buffer error);
} handoff_stream_reader;

/* Where will_save hands back the refreshed activity (ABI 1.1). set replaces the activity about to
 * be sent with `activity`, a serialized handoff.v1.Activity of the same id and type (its title,
 * userInfo, requiredUserInfoKeys, keywords, webpage URL and expiration are taken; nothing else).
 * Call it at most once (a second call replaces the first); not calling it sends the activity as it
 * is. Returns HANDOFF_OK, or HANDOFF_INVALID_ARGUMENT for bytes that do not decode. */
typedef struct handoff_activity_sink {
    void *context;
    int32_t (*set)(void *context, const uint8_t *activity, size_t length);
} handoff_activity_sink;

/* What happened to an activity, for the descriptor's activity_changed (ABI 1.2). */
typedef enum handoff_activity_change {
    HANDOFF_ACTIVITY_APPEARED = 1,
    HANDOFF_ACTIVITY_UPDATED = 2,
    HANDOFF_ACTIVITY_REMOVED = 3,
} handoff_activity_change;

/* Output of a plugin command: called once per line. */
typedef struct handoff_output {
    void *context;
    void (*line)(void *context, const char *text);
} handoff_output;

/* The host's functions, passed to the plugin's init. Keep the pointer: it stays valid. */
typedef struct handoff_host {
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t struct_size;                 /* sizeof(handoff_host) as the host knows it */
    uint32_t reserved_flags;
    void *context;                        /* pass back to every host function */

    /* A folder this plugin may keep its data in (created by the host), e.g. <data>/<plugin name>. */
    const char *data_directory;
    /* The node's name and id. */
    const char *node_name;
    const char *node_id;

    void (*log)(void *context, handoff_log_level level, const char *message);

    /* Makes an activity current on the node. `activity` is a serialized handoff.v1.Activity; the
     * host always assigns its id (an activity_id in the bytes is not kept) and writes it,
     * NUL-terminated, to id_out (at least 64 bytes). Only types the plugin declared may be made
     * current. */
    int32_t (*become_current)(void *context, const uint8_t *activity, size_t length, char *id_out,
                              size_t id_capacity, handoff_error_buffer error);

    /* Replaces a current activity's state (same activity_id); continuing nodes hear of it. */
    int32_t (*update_activity)(void *context, const uint8_t *activity, size_t length, handoff_error_buffer error);

    /* Resigns (invalidate == 0) or invalidates (invalidate != 0) a current activity. */
    int32_t (*end_activity)(void *context, const char *activity_id, int invalidate);

    /* ABI 1.1 (check abi_minor >= 1 first). Marks a current activity as needing save, Apple's
     * needsSave: its state changed, and the plugin would rather refresh it only when someone
     * continues it. Before the activity is next sent to a continuing node, the host calls the
     * descriptor's will_save. Returns HANDOFF_OK, or HANDOFF_NOT_FOUND for an activity that is not
     * current. */
    int32_t (*needs_save)(void *context, const char *activity_id);

    /* ABI 1.2 (check abi_minor >= 2 first). Continues an activity of one of the plugin's types,
     * as `handoff continue` does: the one with id `activity_id`, or (NULL or "") the newest of
     * `activity_type` this node knows on the bus, waiting up to timeout_ms for one to be known.
     * Returns once the plugin's restore (and read_stream, when the activity has streams) has
     * returned, so call it from command, never from a handler it would wait for. The plugin must
     * set HANDOFF_PLUGIN_THREAD_SAFE (its restore runs while its command waits). Returns HANDOFF_OK;
     * HANDOFF_NOT_FOUND when no such activity is known in time; HANDOFF_UNSUPPORTED for a type
     * that is not the plugin's or a plugin that is not thread-safe; HANDOFF_FAILED (the reason in
     * error) when the continuation failed. */
    int32_t (*continue_activity)(void *context, const char *activity_type, const char *activity_id,
                                 uint32_t timeout_ms, handoff_error_buffer error);

    void *reserved[6];
} handoff_host;

/* Flags in handoff_plugin_descriptor.flags. */
#define HANDOFF_PLUGIN_THREAD_SAFE 0x1u   /* handlers may be called concurrently */

/* What a plugin is and does. Returned by the entry point; must stay valid for the process's life. */
typedef struct handoff_plugin_descriptor {
    uint32_t abi_major;                   /* HANDOFF_PLUGIN_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor;                   /* HANDOFF_PLUGIN_ABI_MINOR the plugin was built with */
    uint32_t struct_size;                 /* sizeof(handoff_plugin_descriptor) as the plugin knows it */
    uint32_t flags;

    const char *name;                     /* required: short, unique, e.g. "contacts" */
    const char *version;                  /* required: e.g. "1.2.0" */
    const char *team_id;                  /* the team whose activities it may restore; may be NULL */

    /* The activity types the plugin handles (required, at least one); its NSUserActivityTypes. */
    const char *const *activity_types;
    size_t activity_type_count;

    /* Sets up the plugin; *state is passed to every other handler. Required. */
    int32_t (*init)(const handoff_host *host, void **state, handoff_error_buffer error);
    /* Called once when the node shuts down. Optional. */
    void (*shutdown)(void *state);

    /* Continuing side: restore a continued activity (a serialized handoff.v1.Activity). Required. */
    int32_t (*restore)(void *state, const uint8_t *activity, size_t length, handoff_error_buffer error);

    /* Streams, for activities with supports_continuation_streams, on either side. `activity` is the
     * activity the streams belong to. Optional; a plugin without them refuses streams. */
    int32_t (*write_stream)(void *state, const uint8_t *activity, size_t length, const handoff_stream_writer *writer,
                            handoff_error_buffer error);
    int32_t (*read_stream)(void *state, const uint8_t *activity, size_t length, const handoff_stream_reader *reader,
                           handoff_error_buffer error);

    /* A command from the command line (`handoff plugin <name> <args...>`): argv[0] is the
     * subcommand. Lines of output go to `output`. Optional. */
    int32_t (*command)(void *state, int argc, const char *const *argv, const handoff_output *output,
                       handoff_error_buffer error);

    /* ABI 1.1; NULL (reserved) in a 1.0 plugin. All optional. */

    /* Originating side, will-save: an activity marked with host->needs_save is about to be sent to
     * a continuing node. Refresh it through `sink` (see handoff_activity_sink). A failure is
     * logged with the message, and the activity is sent as it is. */
    int32_t (*will_save)(void *state, const uint8_t *activity, size_t length, const handoff_activity_sink *sink,
                         handoff_error_buffer error);
    /* Originating side, was-continued: node `by_node` (its name) continued this activity. */
    void (*was_continued)(void *state, const uint8_t *activity, size_t length, const char *by_node);
    /* Continuing side, did-update: the originator changed an activity this node continued (the
     * newer version, a serialized handoff.v1.Activity). */
    void (*did_update)(void *state, const uint8_t *activity, size_t length);

    /* ABI 1.2; NULL (reserved) in 1.0 and 1.1 plugins. Optional. */

    /* Continuing side: an activity of one of the plugin's types appeared on the bus
     * (HANDOFF_ACTIVITY_APPEARED), was advertised in a newer version (HANDOFF_ACTIVITY_UPDATED) or
     * is gone (HANDOFF_ACTIVITY_REMOVED), as this node knows it. `activity` is a serialized
     * handoff.v1.Activity of what the advertisement says (id, type, title, origin, version,
     * expiration, keywords, webpage URL, team, updated_at; never userInfo, which only a
     * continuation carries). Called one at a time per plugin, in order, on a host thread; keep it
     * short and never call continue_activity from it (a thread of the plugin's may). */
    void (*activity_changed)(void *state, const uint8_t *activity, size_t length, int32_t change);

    void *reserved[4];
} handoff_plugin_descriptor;

typedef const handoff_plugin_descriptor *(*handoff_plugin_entry_fn)(void);

/* For C authors: defines the entry point returning `descriptor` (a static handoff_plugin_descriptor).
 *   static const handoff_plugin_descriptor notes = { HANDOFF_PLUGIN_DESCRIPTOR_HEADER, .name = ... };
 *   HANDOFF_PLUGIN_DEFINE(notes)
 */
#define HANDOFF_PLUGIN_DESCRIPTOR_HEADER \
    .abi_major = HANDOFF_PLUGIN_ABI_MAJOR, .abi_minor = HANDOFF_PLUGIN_ABI_MINOR, \
    .struct_size = sizeof(handoff_plugin_descriptor)

#define HANDOFF_PLUGIN_DEFINE(descriptor) \
    __attribute__((visibility("default"))) const handoff_plugin_descriptor *handoff_plugin_entry(void) { \
        return &(descriptor); \
    }

#ifdef __cplusplus
}
#endif

#endif /* HANDOFF_PLUGIN_H */
