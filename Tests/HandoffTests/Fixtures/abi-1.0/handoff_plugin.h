/*
 * handoff_plugin.h — the Handoff plugin ABI, version 1.0.
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
 *  - Structs are append-only: a new minor version only adds fields at the end, before `reserved`
 *    shrinks. Fields are never removed, reordered or retyped within a major version.
 *  - Every string is UTF-8 and NUL-terminated. Strings and arrays in the descriptor must stay valid
 *    for the life of the process (plugins are never unloaded).
 *
 * Threads: the host calls init, restore and command on a thread of its choosing, one call at a
 * time per plugin unless HANDOFF_PLUGIN_THREAD_SAFE is set; write_stream and read_stream are called
 * on a thread of their own and may block for as long as the transfer takes. Host functions may be
 * called from any thread.
 */
#ifndef HANDOFF_PLUGIN_H
#define HANDOFF_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HANDOFF_PLUGIN_ABI_MAJOR 1
#define HANDOFF_PLUGIN_ABI_MINOR 0

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

    /* Makes an activity current on the node. `activity` is a serialized handoff.v1.Activity; an
     * empty activity_id asks the host to assign one, written to id_out (at least 64 bytes). Only
     * types the plugin declared may be made current. */
    int32_t (*become_current)(void *context, const uint8_t *activity, size_t length, char *id_out,
                              size_t id_capacity, handoff_error_buffer error);

    /* Replaces a current activity's state (same activity_id); continuing nodes hear of it. */
    int32_t (*update_activity)(void *context, const uint8_t *activity, size_t length, handoff_error_buffer error);

    /* Resigns (invalidate == 0) or invalidates (invalidate != 0) a current activity. */
    int32_t (*end_activity)(void *context, const char *activity_id, int invalidate);

    void *reserved[8];
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

    void *reserved[8];
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
