/*
 * notes.c — the Notes plugin: a Handoff plugin written in plain C on protobuf-c.
 *
 * It handles one activity type, org.handoff.notes.edit-note. When a node continues such an
 * activity, `restore` writes every field of it to <data_directory>/restored/<activity_id>.txt in
 * the fixed line format described in README.md ("The restored file"). The command line offers
 * `show <activity_id>`, `list` and `new <title> <text>`.
 *
 * Only C types and protobuf bytes cross the plugin boundary (handoff_plugin.h); the Activity is
 * decoded and encoded with the protobuf-c code generated into generated/ by Proto/generate.sh.
 *
 * Threads: the descriptor does not set HANDOFF_PLUGIN_THREAD_SAFE, so the host calls one handler
 * at a time. The only mutable state is the struct allocated in init (read-only afterwards).
 */
#define _GNU_SOURCE /* mkostemp, O_CLOEXEC, GNU strerror_r */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "handoff_plugin.h"
#include "handoff/v1/activity.pb-c.h"

#define NOTES_NAME "notes"
#define NOTES_VERSION "1.0.0"
#define NOTES_TEAM_ID "NOTES-TEAM"
#define NOTES_ACTIVITY_TYPE "org.handoff.notes.edit-note"
#define NOTES_WEB_BASE "https://notes.example.org/notes?title="
#define NOTES_USAGE "usage: show <activity_id> | list | new <title> <text>"

/* Longest activity id the plugin accepts as a file name (UUIDs are 36 characters). */
#define NOTES_MAX_ID_LENGTH 128
/* Deepest user_info nesting rendered (SwiftProtobuf's default decoding limit is 100 too). */
#define NOTES_MAX_DEPTH 100
/* Most keywords `new` derives from a title (after "notes"). */
#define NOTES_MAX_TITLE_KEYWORDS 16

/* Everything the plugin keeps between calls; allocated in init, freed in shutdown. */
typedef struct notes_state {
    const handoff_host *host;  /* the host's table: valid for the life of the process */
    char *data_directory;      /* our copy of host->data_directory */
    char *restored_directory;  /* <data_directory>/restored */
} notes_state;

/* True when the host's table is new enough to have `member` and the host filled it in. */
#define HOST_HAS(host, member)                                                                  \
    ((host)->struct_size >= offsetof(handoff_host, member) + sizeof((host)->member) &&          \
     (host)->member != NULL)

/* ---------------------------------------------------------------------------------------------
 * Errors and small helpers
 * ------------------------------------------------------------------------------------------- */

/* Writes a message into the error buffer (always NUL-terminated within its capacity) and returns
 * `status`, so a handler can `return fail(error, HANDOFF_..., "...", ...)`. */
__attribute__((format(printf, 3, 4))) static int32_t fail(handoff_error_buffer error, int32_t status,
                                                          const char *format, ...) {
    if (error.message != NULL && error.capacity > 0) {
        va_list arguments;
        va_start(arguments, format);
        vsnprintf(error.message, error.capacity, format, arguments);
        va_end(arguments);
    }
    return status;
}

/* strerror, without strerror's shared buffer. */
static const char *errno_text(int number, char *buffer, size_t capacity) {
#if defined(__GLIBC__)
    return strerror_r(number, buffer, capacity); /* GNU variant: returns the text */
#else
    if (strerror_r(number, buffer, capacity) != 0) snprintf(buffer, capacity, "errno %d", number);
    return buffer;
#endif
}

/* printf into a new malloc'd string; NULL when out of memory. */
__attribute__((format(printf, 1, 2))) static char *format_new(const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(NULL, 0, format, arguments);
    va_end(arguments);
    if (length < 0) return NULL;
    char *text = malloc((size_t)length + 1);
    if (text == NULL) return NULL;
    va_start(arguments, format);
    vsnprintf(text, (size_t)length + 1, format, arguments);
    va_end(arguments);
    return text;
}

static void host_log(const notes_state *state, handoff_log_level level, const char *message) {
    if (HOST_HAS(state->host, log)) state->host->log(state->host->context, level, message);
}

/* An activity id doubles as a file name, and it comes from another node: accept only
 * [A-Za-z0-9._-], 1 to NOTES_MAX_ID_LENGTH characters, not starting with '.'. UUIDs pass. */
static bool is_safe_activity_id(const char *id) {
    size_t length = id == NULL ? 0 : strlen(id);
    if (length == 0 || length > NOTES_MAX_ID_LENGTH || id[0] == '.') return false;
    for (size_t i = 0; i < length; i++) {
        char c = id[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                  c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

/* Counts the Unicode scalar values of well-formed UTF-8 (no overlongs, surrogates or values past
 * U+10FFFF); returns false for anything else. protobuf strings must be valid UTF-8. */
static bool utf8_scalar_count(const char *text, size_t *count) {
    const unsigned char *s = (const unsigned char *)text;
    size_t n = 0;
    while (*s != 0) {
        unsigned char c = *s;
        size_t extra;
        uint32_t scalar, minimum;
        if (c < 0x80) {
            s++;
            n++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            extra = 1, scalar = c & 0x1F, minimum = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            extra = 2, scalar = c & 0x0F, minimum = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            extra = 3, scalar = c & 0x07, minimum = 0x10000;
        } else {
            return false;
        }
        for (size_t i = 1; i <= extra; i++) {
            if ((s[i] & 0xC0) != 0x80) return false; /* also stops at the NUL */
            scalar = (scalar << 6) | (s[i] & 0x3F);
        }
        if (scalar < minimum || scalar > 0x10FFFF || (scalar >= 0xD800 && scalar <= 0xDFFF)) return false;
        s += extra + 1;
        n++;
    }
    *count = n;
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * A growable text buffer
 * ------------------------------------------------------------------------------------------- */

typedef struct text {
    char *data;
    size_t length;
    size_t capacity;
    bool out_of_memory;
} text;

static bool text_reserve(text *t, size_t more) {
    if (t->out_of_memory) return false;
    if (t->length + more + 1 <= t->capacity) return true;
    size_t capacity = t->capacity == 0 ? 256 : t->capacity;
    while (capacity < t->length + more + 1) capacity *= 2;
    char *data = realloc(t->data, capacity);
    if (data == NULL) {
        t->out_of_memory = true;
        return false;
    }
    t->data = data;
    t->capacity = capacity;
    return true;
}

static void text_append_bytes(text *t, const char *bytes, size_t length) {
    if (!text_reserve(t, length)) return;
    memcpy(t->data + t->length, bytes, length);
    t->length += length;
    t->data[t->length] = 0;
}

static void text_append(text *t, const char *s) { text_append_bytes(t, s, strlen(s)); }

__attribute__((format(printf, 2, 3))) static void text_printf(text *t, const char *format, ...) {
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(NULL, 0, format, arguments);
    va_end(arguments);
    if (length < 0 || !text_reserve(t, (size_t)length)) return;
    va_start(arguments, format);
    vsnprintf(t->data + t->length, (size_t)length + 1, format, arguments);
    va_end(arguments);
    t->length += (size_t)length;
}

/* ---------------------------------------------------------------------------------------------
 * Rendering an Activity as `key: value` lines (format documented in README.md)
 * ------------------------------------------------------------------------------------------- */

/* Strings are written as they are, except that '\\' becomes "\\\\", newline "\\n", carriage
 * return "\\r", tab "\\t" and any other byte below 0x20 or 0x7F "\\xHH": one entry stays one line. */
static void render_string(text *t, const char *s) {
    if (s == NULL) return;
    for (const unsigned char *p = (const unsigned char *)s; *p != 0; p++) {
        switch (*p) {
        case '\\': text_append(t, "\\\\"); break;
        case '\n': text_append(t, "\\n"); break;
        case '\r': text_append(t, "\\r"); break;
        case '\t': text_append(t, "\\t"); break;
        default:
            if (*p < 0x20 || *p == 0x7F) {
                text_printf(t, "\\x%02x", *p);
            } else {
                text_append_bytes(t, (const char *)p, 1);
            }
        }
    }
}

/* seconds.nanos, nanos zero-padded to 9 digits: the two fields as they are on the wire. */
static void render_timestamp(text *t, const Handoff__V1__Timestamp *timestamp) {
    if (timestamp == NULL) {
        text_append(t, "none");
    } else {
        text_printf(t, "%" PRId64 ".%09" PRId32, timestamp->seconds, timestamp->nanos);
    }
}

static void render_string_list(text *t, char *const *strings, size_t count) {
    text_append(t, "[");
    for (size_t i = 0; i < count; i++) {
        if (i > 0) text_append(t, ", ");
        render_string(t, strings[i]);
    }
    text_append(t, "]");
}

/* A map entry of either map type (Activity.user_info, ValueMap.entries): same shape. */
typedef struct entry {
    const char *key;
    const Handoff__V1__Value *value;
    size_t index; /* position on the wire: among equal keys the last one wins, as in protobuf */
} entry;

static int compare_entries(const void *a, const void *b) {
    const entry *x = a, *y = b;
    int order = strcmp(x->key, y->key);
    if (order != 0) return order;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorts entries by key (bytewise, strcmp) and drops all but the last of equal keys; returns how
 * many are left. */
static size_t sort_entries(entry *entries, size_t count) {
    if (count == 0) return 0;
    qsort(entries, count, sizeof *entries, compare_entries);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        if (i + 1 < count && strcmp(entries[i].key, entries[i + 1].key) == 0) continue;
        entries[kept++] = entries[i];
    }
    return kept;
}

/* The entries of a ValueMap (NULL = empty), sorted; *count receives how many. NULL with
 * *count == 0 for an empty map; NULL with t->out_of_memory set when malloc failed. */
static entry *value_map_entries(text *t, const Handoff__V1__ValueMap *map, size_t *count) {
    *count = 0;
    if (map == NULL || map->n_entries == 0) return NULL;
    entry *entries = malloc(map->n_entries * sizeof *entries);
    if (entries == NULL) {
        t->out_of_memory = true;
        return NULL;
    }
    for (size_t i = 0; i < map->n_entries; i++) {
        const Handoff__V1__ValueMap__EntriesEntry *e = map->entries[i];
        entries[i] = (entry){.key = e->key != NULL ? e->key : "", .value = e->value, .index = i};
    }
    *count = sort_entries(entries, map->n_entries);
    return entries;
}

/* A value on the rest of a line: scalars as documented, lists as [a, b], maps as {k: v, ...}. */
static bool render_value_inline(text *t, const Handoff__V1__Value *value, int depth) {
    if (depth > NOTES_MAX_DEPTH) return false;
    if (value == NULL) {
        text_append(t, "null");
        return true;
    }
    switch (value->kind_case) {
    case HANDOFF__V1__VALUE__KIND_STRING_VALUE: render_string(t, value->string_value); break;
    case HANDOFF__V1__VALUE__KIND_INT_VALUE: text_printf(t, "%" PRId64, value->int_value); break;
    case HANDOFF__V1__VALUE__KIND_DOUBLE_VALUE: text_printf(t, "%.17g", value->double_value); break;
    case HANDOFF__V1__VALUE__KIND_BOOL_VALUE: text_append(t, value->bool_value ? "true" : "false"); break;
    case HANDOFF__V1__VALUE__KIND_BYTES_VALUE:
        for (size_t i = 0; i < value->bytes_value.len; i++) text_printf(t, "%02x", value->bytes_value.data[i]);
        break;
    case HANDOFF__V1__VALUE__KIND_URL_VALUE: render_string(t, value->url_value); break;
    case HANDOFF__V1__VALUE__KIND_DATE_VALUE: {
        static const Handoff__V1__Timestamp zero = HANDOFF__V1__TIMESTAMP__INIT;
        render_timestamp(t, value->date_value != NULL ? value->date_value : &zero);
        break;
    }
    case HANDOFF__V1__VALUE__KIND_LIST_VALUE: {
        const Handoff__V1__ValueList *list = value->list_value;
        size_t count = list != NULL ? list->n_values : 0;
        text_append(t, "[");
        for (size_t i = 0; i < count; i++) {
            if (i > 0) text_append(t, ", ");
            if (!render_value_inline(t, list->values[i], depth + 1)) return false;
        }
        text_append(t, "]");
        break;
    }
    case HANDOFF__V1__VALUE__KIND_MAP_VALUE: {
        size_t count;
        entry *entries = value_map_entries(t, value->map_value, &count);
        bool ok = true;
        text_append(t, "{");
        for (size_t i = 0; i < count && ok; i++) {
            if (i > 0) text_append(t, ", ");
            render_string(t, entries[i].key);
            text_append(t, ": ");
            ok = render_value_inline(t, entries[i].value, depth + 1);
        }
        text_append(t, "}");
        free(entries);
        if (!ok) return false;
        break;
    }
    case HANDOFF__V1__VALUE__KIND__NOT_SET:
    default: /* null, or a kind from a newer contract */
        text_append(t, "null");
        break;
    }
    return true;
}

/* Ends a line begun with line_begin: "key: value\n", or "key:\n" when the value is empty. */
static size_t line_begin(text *t, const char *key) {
    text_append(t, key);
    text_append(t, ": ");
    return t->length;
}

static void line_end(text *t, size_t mark) {
    if (!t->out_of_memory && t->length == mark) t->data[--t->length] = 0; /* drop the space */
    text_append(t, "\n");
}

/* One line per entry under `path` (e.g. "user_info.contact"): a non-empty map value expands into
 * lines of its own ("<path>.<key>.<subkey>: ..."); everything else is rendered inline. An empty
 * map is the single line "<path>: {}". `path` is a text buffer restored before returning. */
static bool render_map_lines(text *t, text *path, const entry *entries, size_t count, int depth) {
    if (depth > NOTES_MAX_DEPTH) return false;
    if (count == 0) {
        text_append(t, path->data);
        text_append(t, ": {}\n");
        return true;
    }
    size_t path_length = path->length;
    for (size_t i = 0; i < count; i++) {
        text_append(path, ".");
        render_string(path, entries[i].key);
        if (path->out_of_memory) {
            t->out_of_memory = true;
            return true;
        }
        const Handoff__V1__Value *value = entries[i].value;
        bool ok;
        if (value != NULL && value->kind_case == HANDOFF__V1__VALUE__KIND_MAP_VALUE && value->map_value != NULL &&
            value->map_value->n_entries > 0) {
            size_t sub_count;
            entry *sub = value_map_entries(t, value->map_value, &sub_count);
            ok = t->out_of_memory || render_map_lines(t, path, sub, sub_count, depth + 1);
            free(sub);
        } else {
            size_t mark = line_begin(t, path->data);
            ok = render_value_inline(t, value, depth + 1);
            line_end(t, mark);
        }
        path->length = path_length;
        path->data[path_length] = 0;
        if (!ok) return false;
    }
    return true;
}

/* Renders every field of the activity. Returns HANDOFF_OK, or an error with the message set. */
static int32_t render_activity(text *t, const Handoff__V1__Activity *a, handoff_error_buffer error) {
    size_t mark;

    mark = line_begin(t, "activity_id"), render_string(t, a->activity_id), line_end(t, mark);
    mark = line_begin(t, "activity_type"), render_string(t, a->activity_type), line_end(t, mark);
    mark = line_begin(t, "title"), render_string(t, a->title), line_end(t, mark);

    entry *entries = NULL;
    if (a->n_user_info > 0) {
        entries = malloc(a->n_user_info * sizeof *entries);
        if (entries == NULL) return fail(error, HANDOFF_FAILED, "notes: out of memory rendering user_info");
        for (size_t i = 0; i < a->n_user_info; i++) {
            const Handoff__V1__Activity__UserInfoEntry *e = a->user_info[i];
            entries[i] = (entry){.key = e->key != NULL ? e->key : "", .value = e->value, .index = i};
        }
    }
    size_t count = sort_entries(entries, a->n_user_info);
    text path = {0};
    text_append(&path, "user_info");
    bool ok = !path.out_of_memory && render_map_lines(t, &path, entries, count, 0);
    bool path_out_of_memory = path.out_of_memory;
    free(path.data);
    free(entries);
    if (path_out_of_memory) t->out_of_memory = true;
    if (!ok && !t->out_of_memory) {
        return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: user_info is nested deeper than %d levels",
                    NOTES_MAX_DEPTH);
    }

    mark = line_begin(t, "required_user_info_keys");
    render_string_list(t, a->required_user_info_keys, a->n_required_user_info_keys);
    line_end(t, mark);
    mark = line_begin(t, "webpage_url"), render_string(t, a->webpage_url), line_end(t, mark);
    mark = line_begin(t, "keywords"), render_string_list(t, a->keywords, a->n_keywords), line_end(t, mark);
    mark = line_begin(t, "expiration"), render_timestamp(t, a->expiration), line_end(t, mark);
    text_printf(t, "eligible_for_handoff: %s\n", a->eligible_for_handoff ? "true" : "false");
    text_printf(t, "supports_continuation_streams: %s\n", a->supports_continuation_streams ? "true" : "false");
    mark = line_begin(t, "team_id"), render_string(t, a->team_id), line_end(t, mark);
    if (a->origin == NULL) {
        text_append(t, "origin: none\n");
    } else {
        mark = line_begin(t, "origin.node_id"), render_string(t, a->origin->node_id), line_end(t, mark);
        mark = line_begin(t, "origin.name"), render_string(t, a->origin->name), line_end(t, mark);
        mark = line_begin(t, "origin.host"), render_string(t, a->origin->host), line_end(t, mark);
    }
    text_printf(t, "version: %" PRIu64 "\n", a->version);
    mark = line_begin(t, "updated_at"), render_timestamp(t, a->updated_at), line_end(t, mark);

    if (t->out_of_memory) return fail(error, HANDOFF_FAILED, "notes: out of memory rendering the activity");
    return HANDOFF_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Files
 * ------------------------------------------------------------------------------------------- */

/* mkdir -p: creates `path` and its missing parents (mode 0755 before the umask). */
static int32_t make_directories(const char *path, handoff_error_buffer error) {
    char reason[128];
    char *copy = strdup(path);
    if (copy == NULL) return fail(error, HANDOFF_FAILED, "notes: out of memory");
    for (char *p = copy + 1;; p++) {
        if (*p != '/' && *p != 0) continue;
        char saved = *p;
        *p = 0;
        if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
            int number = errno;
            int32_t status = fail(error, HANDOFF_FAILED, "notes: cannot create directory %s: %s", copy,
                                  errno_text(number, reason, sizeof reason));
            free(copy);
            return status;
        }
        *p = saved;
        if (saved == 0) break;
    }
    free(copy);
    struct stat info;
    if (stat(path, &info) != 0 || !S_ISDIR(info.st_mode)) {
        return fail(error, HANDOFF_FAILED, "notes: %s exists but is not a directory", path);
    }
    return HANDOFF_OK;
}

static bool write_all(int fd, const char *data, size_t length) {
    while (length > 0) {
        ssize_t written = write(fd, data, length);
        if (written < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        data += written;
        length -= (size_t)written;
    }
    return true;
}

/* Writes `data` to directory/name atomically: a temporary file in the same directory (named
 * ".<name>.XXXXXX", so `list` never sees it), fsync, rename over the target, fsync the directory.
 * Readers see the old file or the new one, never a part. */
static int32_t write_file_atomically(const char *directory, const char *name, const char *data, size_t length,
                                     handoff_error_buffer error) {
    char reason[128];
    char *final_path = format_new("%s/%s", directory, name);
    char *temporary_path = format_new("%s/.%s.XXXXXX", directory, name);
    int32_t status = HANDOFF_OK;
    int fd = -1;
    if (final_path == NULL || temporary_path == NULL) {
        status = fail(error, HANDOFF_FAILED, "notes: out of memory");
        goto done;
    }
    fd = mkostemp(temporary_path, O_CLOEXEC);
    if (fd < 0) {
        int number = errno;
        status = fail(error, HANDOFF_FAILED, "notes: cannot create a file in %s: %s", directory,
                      errno_text(number, reason, sizeof reason));
        goto done;
    }
    if (!write_all(fd, data, length) || fsync(fd) != 0) {
        int number = errno;
        status = fail(error, HANDOFF_FAILED, "notes: cannot write %s: %s", temporary_path,
                      errno_text(number, reason, sizeof reason));
        goto done;
    }
    int closed = close(fd);
    fd = -1;
    if (closed != 0) {
        int number = errno;
        status = fail(error, HANDOFF_FAILED, "notes: cannot write %s: %s", temporary_path,
                      errno_text(number, reason, sizeof reason));
        goto done;
    }
    if (rename(temporary_path, final_path) != 0) {
        int number = errno;
        status = fail(error, HANDOFF_FAILED, "notes: cannot rename %s to %s: %s", temporary_path, final_path,
                      errno_text(number, reason, sizeof reason));
        goto done;
    }
    free(temporary_path);
    temporary_path = NULL; /* renamed: nothing to clean up */
    int directory_fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory_fd >= 0) { /* makes the rename durable; best effort */
        (void)fsync(directory_fd);
        close(directory_fd);
    }
done:
    if (fd >= 0) close(fd);
    if (temporary_path != NULL && status != HANDOFF_OK) unlink(temporary_path);
    free(temporary_path);
    free(final_path);
    return status;
}

/* ---------------------------------------------------------------------------------------------
 * Handlers
 * ------------------------------------------------------------------------------------------- */

static int32_t notes_init(const handoff_host *host, void **state_out, handoff_error_buffer error) {
    if (host == NULL || state_out == NULL) return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: init without a host");
    if (host->abi_major != HANDOFF_PLUGIN_ABI_MAJOR) {
        return fail(error, HANDOFF_UNSUPPORTED, "notes: host speaks plugin ABI %" PRIu32 ".%" PRIu32 ", notes needs %d.x",
                    host->abi_major, host->abi_minor, HANDOFF_PLUGIN_ABI_MAJOR);
    }
    if (host->struct_size < offsetof(handoff_host, data_directory) + sizeof host->data_directory ||
        host->data_directory == NULL || host->data_directory[0] == 0) {
        return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: the host gave no data directory");
    }

    notes_state *state = calloc(1, sizeof *state);
    if (state == NULL) return fail(error, HANDOFF_FAILED, "notes: out of memory");
    state->host = host;
    state->data_directory = strdup(host->data_directory);
    state->restored_directory = format_new("%s/restored", host->data_directory);
    if (state->data_directory == NULL || state->restored_directory == NULL) {
        free(state->data_directory);
        free(state->restored_directory);
        free(state);
        return fail(error, HANDOFF_FAILED, "notes: out of memory");
    }
    int32_t status = make_directories(state->restored_directory, error);
    if (status != HANDOFF_OK) {
        free(state->data_directory);
        free(state->restored_directory);
        free(state);
        return status;
    }
    *state_out = state;
    return HANDOFF_OK;
}

static void notes_shutdown(void *opaque) {
    notes_state *state = opaque;
    if (state == NULL) return;
    free(state->data_directory);
    free(state->restored_directory);
    free(state);
}

static int32_t notes_restore(void *opaque, const uint8_t *bytes, size_t length, handoff_error_buffer error) {
    notes_state *state = opaque;
    if (bytes == NULL && length > 0) return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: restore without bytes");

    Handoff__V1__Activity *activity = handoff__v1__activity__unpack(NULL, length, bytes);
    if (activity == NULL) {
        return fail(error, HANDOFF_INVALID_ARGUMENT,
                    "notes: the %zu bytes to restore are not a serialized handoff.v1.Activity", length);
    }

    int32_t status = HANDOFF_OK;
    text file = {0};
    char *name = NULL;
    if (strcmp(activity->activity_type, NOTES_ACTIVITY_TYPE) != 0) {
        status = fail(error, HANDOFF_INVALID_ARGUMENT, "notes: cannot restore activity type '%s' (notes handles %s)",
                      activity->activity_type, NOTES_ACTIVITY_TYPE);
        goto done;
    }
    if (!is_safe_activity_id(activity->activity_id)) {
        status = fail(error, HANDOFF_INVALID_ARGUMENT,
                      "notes: activity id '%.*s' is not usable as a file name (1 to %d of A-Z a-z 0-9 . _ -, "
                      "not starting with '.')",
                      64, activity->activity_id, NOTES_MAX_ID_LENGTH);
        goto done;
    }
    status = render_activity(&file, activity, error);
    if (status != HANDOFF_OK) goto done;
    name = format_new("%s.txt", activity->activity_id);
    if (name == NULL) {
        status = fail(error, HANDOFF_FAILED, "notes: out of memory");
        goto done;
    }
    status = write_file_atomically(state->restored_directory, name, file.data, file.length, error);
    if (status != HANDOFF_OK) goto done;

    text message = {0};
    text_printf(&message, "notes: restored %s (\"", activity->activity_id);
    render_string(&message, activity->title); /* escaped: a title cannot forge log lines */
    text_printf(&message, "\") to %s/%s", state->restored_directory, name);
    if (!message.out_of_memory) host_log(state, HANDOFF_LOG_INFO, message.data);
    free(message.data);
done:
    free(name);
    free(file.data);
    handoff__v1__activity__free_unpacked(activity, NULL);
    return status;
}

/* show <activity_id>: the restored file's lines, one output line each. */
static int32_t command_show(notes_state *state, const char *id, const handoff_output *output,
                            handoff_error_buffer error) {
    if (!is_safe_activity_id(id)) {
        return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: '%s' is not an activity id", id);
    }
    char *path = format_new("%s/%s.txt", state->restored_directory, id);
    if (path == NULL) return fail(error, HANDOFF_FAILED, "notes: out of memory");
    FILE *file = fopen(path, "re");
    if (file == NULL) {
        int number = errno;
        char reason[128];
        int32_t status = number == ENOENT
                             ? fail(error, HANDOFF_NOT_FOUND, "notes: no restored note %s (looked for %s)", id, path)
                             : fail(error, HANDOFF_FAILED, "notes: cannot read %s: %s", path,
                                    errno_text(number, reason, sizeof reason));
        free(path);
        return status;
    }
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, file)) >= 0) {
        if (length > 0 && line[length - 1] == '\n') line[length - 1] = 0;
        output->line(output->context, line);
    }
    int32_t status = HANDOFF_OK;
    if (ferror(file)) status = fail(error, HANDOFF_FAILED, "notes: error reading %s", path);
    free(line);
    fclose(file);
    free(path);
    return status;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* list: the ids of the restored notes, sorted. */
static int32_t command_list(notes_state *state, const handoff_output *output, handoff_error_buffer error) {
    char reason[128];
    DIR *directory = opendir(state->restored_directory);
    if (directory == NULL) {
        int number = errno;
        return fail(error, HANDOFF_FAILED, "notes: cannot read %s: %s", state->restored_directory,
                    errno_text(number, reason, sizeof reason));
    }
    char **ids = NULL;
    size_t count = 0, capacity = 0;
    int32_t status = HANDOFF_OK;
    struct dirent *item;
    while ((item = readdir(directory)) != NULL) {
        size_t length = strlen(item->d_name);
        if (length <= 4 || strcmp(item->d_name + length - 4, ".txt") != 0) continue;
        char *id = strndup(item->d_name, length - 4);
        if (id == NULL) {
            status = fail(error, HANDOFF_FAILED, "notes: out of memory");
            break;
        }
        if (!is_safe_activity_id(id)) { /* temporary files (".x.txt.XXXXXX") and strays */
            free(id);
            continue;
        }
        if (count == capacity) {
            capacity = capacity == 0 ? 16 : capacity * 2;
            char **grown = realloc(ids, capacity * sizeof *ids);
            if (grown == NULL) {
                free(id);
                status = fail(error, HANDOFF_FAILED, "notes: out of memory");
                break;
            }
            ids = grown;
        }
        ids[count++] = id;
    }
    closedir(directory);
    if (status == HANDOFF_OK && count > 0) {
        qsort(ids, count, sizeof *ids, compare_strings);
        for (size_t i = 0; i < count; i++) output->line(output->context, ids[i]);
    }
    for (size_t i = 0; i < count; i++) free(ids[i]);
    free(ids);
    return status;
}

/* Percent-encodes everything but RFC 3986's unreserved characters. */
static void append_percent_encoded(text *t, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p != 0; p++) {
        unsigned char c = *p;
        bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                          c == '.' || c == '_' || c == '~';
        if (unreserved) {
            text_append_bytes(t, (const char *)p, 1);
        } else {
            text_printf(t, "%%%02X", c);
        }
    }
}

/* new <title> <text>: makes a new note activity current on the node; prints its id. */
static int32_t command_new(notes_state *state, const char *title, const char *body, const handoff_output *output,
                           handoff_error_buffer error) {
    size_t title_length, body_length;
    if (!utf8_scalar_count(title, &title_length)) return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: the title is not valid UTF-8");
    if (!utf8_scalar_count(body, &body_length)) return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: the text is not valid UTF-8");
    if (!HOST_HAS(state->host, become_current)) {
        return fail(error, HANDOFF_UNSUPPORTED, "notes: this host cannot make activities current");
    }

    /* user_info: {"text": <text> (string), "length": <Unicode scalars in text> (int)} */
    Handoff__V1__Value text_value = HANDOFF__V1__VALUE__INIT;
    text_value.kind_case = HANDOFF__V1__VALUE__KIND_STRING_VALUE;
    text_value.string_value = (char *)body;
    Handoff__V1__Value length_value = HANDOFF__V1__VALUE__INIT;
    length_value.kind_case = HANDOFF__V1__VALUE__KIND_INT_VALUE;
    length_value.int_value = (int64_t)body_length;
    Handoff__V1__Activity__UserInfoEntry text_entry = HANDOFF__V1__ACTIVITY__USER_INFO_ENTRY__INIT;
    text_entry.key = "text";
    text_entry.value = &text_value;
    Handoff__V1__Activity__UserInfoEntry length_entry = HANDOFF__V1__ACTIVITY__USER_INFO_ENTRY__INIT;
    length_entry.key = "length";
    length_entry.value = &length_value;
    Handoff__V1__Activity__UserInfoEntry *user_info[] = {&text_entry, &length_entry};
    char *required_keys[] = {"text"};

    /* keywords: "notes", then the title's words (split at ASCII white space, duplicates dropped). */
    char *title_copy = strdup(title);
    char *keywords[1 + NOTES_MAX_TITLE_KEYWORDS];
    size_t keyword_count = 0;
    text url = {0};
    int32_t status = HANDOFF_OK;
    uint8_t *packed = NULL;
    if (title_copy == NULL) {
        status = fail(error, HANDOFF_FAILED, "notes: out of memory");
        goto done;
    }
    keywords[keyword_count++] = "notes";
    char *saved = NULL;
    for (char *word = strtok_r(title_copy, " \t\n\r\f\v", &saved);
         word != NULL && keyword_count < 1 + NOTES_MAX_TITLE_KEYWORDS; word = strtok_r(NULL, " \t\n\r\f\v", &saved)) {
        bool seen = false;
        for (size_t i = 0; i < keyword_count && !seen; i++) seen = strcmp(keywords[i], word) == 0;
        if (!seen) keywords[keyword_count++] = word;
    }

    text_append(&url, NOTES_WEB_BASE);
    append_percent_encoded(&url, title);
    if (url.out_of_memory) {
        status = fail(error, HANDOFF_FAILED, "notes: out of memory");
        goto done;
    }

    Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
    activity.activity_id = "";  /* the host assigns one */
    activity.activity_type = NOTES_ACTIVITY_TYPE;
    activity.title = (char *)title;
    activity.n_user_info = sizeof user_info / sizeof user_info[0];
    activity.user_info = user_info;
    activity.n_required_user_info_keys = 1;
    activity.required_user_info_keys = required_keys;
    activity.webpage_url = url.data;
    activity.n_keywords = keyword_count;
    activity.keywords = keywords;
    activity.eligible_for_handoff = 1;
    activity.team_id = NOTES_TEAM_ID;
    /* origin, version and updated_at are the host's to fill in. */

    size_t packed_length = handoff__v1__activity__get_packed_size(&activity);
    packed = malloc(packed_length > 0 ? packed_length : 1);
    if (packed == NULL) {
        status = fail(error, HANDOFF_FAILED, "notes: out of memory");
        goto done;
    }
    handoff__v1__activity__pack(&activity, packed);

    char id[128] = "";
    char host_message[512] = "";
    handoff_error_buffer host_error = {.message = host_message, .capacity = sizeof host_message};
    status = state->host->become_current(state->host->context, packed, packed_length, id, sizeof id, host_error);
    if (status != HANDOFF_OK) {
        host_message[sizeof host_message - 1] = 0;
        status = fail(error, status, "notes: the node did not make the note current: %s",
                      host_message[0] != 0 ? host_message : "(no reason given)");
        goto done;
    }
    id[sizeof id - 1] = 0;
    if (id[0] == 0) {
        status = fail(error, HANDOFF_FAILED, "notes: the node made the note current but returned no id");
        goto done;
    }
    output->line(output->context, id);
done:
    free(packed);
    free(url.data);
    free(title_copy);
    return status;
}

static int32_t notes_command(void *opaque, int argc, const char *const *argv, const handoff_output *output,
                             handoff_error_buffer error) {
    notes_state *state = opaque;
    if (argc < 1 || argv == NULL || argv[0] == NULL) return fail(error, HANDOFF_NOT_FOUND, "notes: %s", NOTES_USAGE);
    if (output == NULL || output->line == NULL) {
        return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: command without an output");
    }
    const char *subcommand = argv[0];
    if (strcmp(subcommand, "show") == 0) {
        if (argc != 2) return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: usage: show <activity_id>");
        return command_show(state, argv[1], output, error);
    }
    if (strcmp(subcommand, "list") == 0) {
        if (argc != 1) return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: usage: list");
        return command_list(state, output, error);
    }
    if (strcmp(subcommand, "new") == 0) {
        if (argc != 3) return fail(error, HANDOFF_INVALID_ARGUMENT, "notes: usage: new <title> <text>");
        return command_new(state, argv[1], argv[2], output, error);
    }
    return fail(error, HANDOFF_NOT_FOUND, "notes: unknown command '%s'; %s", subcommand, NOTES_USAGE);
}

/* ---------------------------------------------------------------------------------------------
 * The descriptor and entry point
 * ------------------------------------------------------------------------------------------- */

static const char *const notes_activity_types[] = {NOTES_ACTIVITY_TYPE};

static const handoff_plugin_descriptor notes_descriptor = {
    HANDOFF_PLUGIN_DESCRIPTOR_HEADER,
    .flags = 0, /* one call at a time */
    .name = NOTES_NAME,
    .version = NOTES_VERSION,
    .team_id = NOTES_TEAM_ID,
    .activity_types = notes_activity_types,
    .activity_type_count = sizeof notes_activity_types / sizeof notes_activity_types[0],
    .init = notes_init,
    .shutdown = notes_shutdown,
    .restore = notes_restore,
    .write_stream = NULL, /* notes are small: no continuation streams */
    .read_stream = NULL,
    .command = notes_command,
};

HANDOFF_PLUGIN_DEFINE(notes_descriptor)
