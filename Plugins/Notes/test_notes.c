/*
 * test_notes.c — tests the built Notes plugin the way the host uses it: dlopen, the entry point,
 * a host table, serialized Activities in and out.
 *
 *   ./test_notes ./libhandoff-notes.so     (make test)
 *
 * Prints one line per test and finally "N passed, M failed"; exits non-zero when any failed.
 */
#define _GNU_SOURCE

#include <dirent.h>
#include <dlfcn.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handoff_plugin.h"
#include "handoff/v1/activity.pb-c.h"

/* ---------------------------------------------------------------------------------------------
 * A tiny harness
 * ------------------------------------------------------------------------------------------- */

static int passed, failed;
static bool current_failed;

#define CHECK(condition, ...)                                                            \
    do {                                                                                 \
        if (!(condition)) {                                                              \
            current_failed = true;                                                       \
            fprintf(stderr, "    %s:%d: check failed: %s\n      ", __FILE__, __LINE__, #condition); \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, "\n");                                                       \
        }                                                                                \
    } while (0)

#define RUN(test)                                       \
    do {                                                \
        current_failed = false;                         \
        test();                                         \
        if (current_failed) {                           \
            failed++;                                   \
            printf("FAIL %s\n", #test);                 \
        } else {                                        \
            passed++;                                   \
            printf("ok   %s\n", #test);                 \
        }                                               \
        fflush(stdout);                                 \
    } while (0)

/* ---------------------------------------------------------------------------------------------
 * The plugin and a fake host
 * ------------------------------------------------------------------------------------------- */

static const handoff_plugin_descriptor *plugin;
static void *plugin_state;
static char data_directory[256];

#define MAX_RECORDED 16

typedef struct fake_host_record {
    int log_calls;
    handoff_log_level log_levels[MAX_RECORDED];
    char *log_messages[MAX_RECORDED];

    int become_current_calls;
    uint8_t *become_current_bytes; /* the last call's activity */
    size_t become_current_length;
    size_t id_capacity;
    int32_t become_current_status; /* what the fake returns */
} fake_host_record;

static fake_host_record record;

static void fake_log(void *context, handoff_log_level level, const char *message) {
    fake_host_record *r = context;
    if (r->log_calls < MAX_RECORDED) {
        r->log_levels[r->log_calls] = level;
        r->log_messages[r->log_calls] = strdup(message);
    }
    r->log_calls++;
}

#define FAKE_ASSIGNED_ID "a1b2c3d4-0000-4000-8000-000000000001"

static int32_t fake_become_current(void *context, const uint8_t *activity, size_t length, char *id_out,
                                   size_t id_capacity, handoff_error_buffer error) {
    fake_host_record *r = context;
    r->become_current_calls++;
    free(r->become_current_bytes);
    r->become_current_bytes = malloc(length > 0 ? length : 1);
    memcpy(r->become_current_bytes, activity, length);
    r->become_current_length = length;
    r->id_capacity = id_capacity;
    if (r->become_current_status != HANDOFF_OK) {
        snprintf(error.message, error.capacity, "fake host refuses");
        return r->become_current_status;
    }
    snprintf(id_out, id_capacity, "%s", FAKE_ASSIGNED_ID);
    return HANDOFF_OK;
}

static int32_t fake_update_activity(void *context, const uint8_t *activity, size_t length,
                                    handoff_error_buffer error) {
    (void)context, (void)activity, (void)length, (void)error;
    return HANDOFF_UNSUPPORTED;
}

static int32_t fake_end_activity(void *context, const char *activity_id, int invalidate) {
    (void)context, (void)activity_id, (void)invalidate;
    return HANDOFF_UNSUPPORTED;
}

static handoff_host host;

static void reset_record(void) {
    for (int i = 0; i < record.log_calls && i < MAX_RECORDED; i++) free(record.log_messages[i]);
    free(record.become_current_bytes);
    memset(&record, 0, sizeof record);
}

/* Output lines of a command, collected. */
typedef struct lines {
    char *items[64];
    int count;
} lines;

static void collect_line(void *context, const char *text) {
    lines *l = context;
    if (l->count < 64) l->items[l->count] = strdup(text);
    l->count++;
}

static void free_lines(lines *l) {
    for (int i = 0; i < l->count && i < 64; i++) free(l->items[i]);
    l->count = 0;
}

typedef struct command_result {
    int32_t status;
    char message[512];
    lines output;
} command_result;

static command_result run_command(int argc, const char *const *argv) {
    command_result result = {0};
    handoff_output output = {.context = &result.output, .line = collect_line};
    handoff_error_buffer error = {.message = result.message, .capacity = sizeof result.message};
    result.status = plugin->command(plugin_state, argc, argv, &output, error);
    return result;
}

static int32_t restore_bytes(const uint8_t *bytes, size_t length, char *message, size_t capacity) {
    handoff_error_buffer error = {.message = message, .capacity = capacity};
    return plugin->restore(plugin_state, bytes, length, error);
}

static int32_t restore_activity(const Handoff__V1__Activity *activity, char *message, size_t capacity) {
    size_t length = handoff__v1__activity__get_packed_size(activity);
    uint8_t *bytes = malloc(length > 0 ? length : 1);
    handoff__v1__activity__pack(activity, bytes);
    int32_t status = restore_bytes(bytes, length, message, capacity);
    free(bytes);
    return status;
}

static char *read_file(const char *path) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) return NULL;
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *data = malloc((size_t)size + 1);
    size_t read = fread(data, 1, (size_t)size, file);
    data[read] = 0;
    fclose(file);
    return data;
}

static char *restored_path(const char *id) {
    char *path;
    if (asprintf(&path, "%s/restored/%s.txt", data_directory, id) < 0) abort();
    return path;
}

/* Compares a file's text with the expected text line by line, naming the first difference. */
static void check_text(const char *actual, const char *expected) {
    if (actual == NULL) {
        CHECK(actual != NULL, "no file was written");
        return;
    }
    int line = 1;
    const char *a = actual, *e = expected;
    while (*a != 0 || *e != 0) {
        size_t al = strcspn(a, "\n"), el = strcspn(e, "\n");
        if (al != el || memcmp(a, e, al) != 0 || (a[al] == 0) != (e[el] == 0)) {
            CHECK(false, "line %d differs:\n        actual:   %.*s\n        expected: %.*s", line, (int)al, a,
                  (int)el, e);
            return;
        }
        a += al + (a[al] != 0);
        e += el + (e[el] != 0);
        line++;
    }
}

/* ---------------------------------------------------------------------------------------------
 * Building Values
 * ------------------------------------------------------------------------------------------- */

static Handoff__V1__Value *value_new(Handoff__V1__Value__KindCase kind) {
    Handoff__V1__Value *v = malloc(sizeof *v);
    handoff__v1__value__init(v);
    v->kind_case = kind;
    return v;
}

static Handoff__V1__Value *string_value(const char *s) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_STRING_VALUE);
    v->string_value = (char *)s;
    return v;
}

static Handoff__V1__Value *int_value(int64_t i) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_INT_VALUE);
    v->int_value = i;
    return v;
}

static Handoff__V1__Value *double_value(double d) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_DOUBLE_VALUE);
    v->double_value = d;
    return v;
}

static Handoff__V1__Value *bool_value(bool b) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_BOOL_VALUE);
    v->bool_value = b;
    return v;
}

static Handoff__V1__Value *bytes_value(const uint8_t *data, size_t length) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_BYTES_VALUE);
    v->bytes_value.data = (uint8_t *)data;
    v->bytes_value.len = length;
    return v;
}

static Handoff__V1__Value *url_value(const char *s) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_URL_VALUE);
    v->url_value = (char *)s;
    return v;
}

static Handoff__V1__Timestamp *timestamp_new(int64_t seconds, int32_t nanos) {
    Handoff__V1__Timestamp *t = malloc(sizeof *t);
    handoff__v1__timestamp__init(t);
    t->seconds = seconds;
    t->nanos = nanos;
    return t;
}

static Handoff__V1__Value *date_value(int64_t seconds, int32_t nanos) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_DATE_VALUE);
    v->date_value = timestamp_new(seconds, nanos);
    return v;
}

static Handoff__V1__Value *null_value(void) { return value_new(HANDOFF__V1__VALUE__KIND__NOT_SET); }

/* list_value(n, v1, ..., vn) */
static Handoff__V1__Value *list_value(size_t count, ...) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_LIST_VALUE);
    v->list_value = malloc(sizeof *v->list_value);
    handoff__v1__value_list__init(v->list_value);
    v->list_value->n_values = count;
    v->list_value->values = calloc(count > 0 ? count : 1, sizeof(Handoff__V1__Value *));
    va_list arguments;
    va_start(arguments, count);
    for (size_t i = 0; i < count; i++) v->list_value->values[i] = va_arg(arguments, Handoff__V1__Value *);
    va_end(arguments);
    return v;
}

/* map_value(n, "key1", v1, ..., "keyn", vn) */
static Handoff__V1__Value *map_value(size_t count, ...) {
    Handoff__V1__Value *v = value_new(HANDOFF__V1__VALUE__KIND_MAP_VALUE);
    v->map_value = malloc(sizeof *v->map_value);
    handoff__v1__value_map__init(v->map_value);
    v->map_value->n_entries = count;
    v->map_value->entries = calloc(count > 0 ? count : 1, sizeof(Handoff__V1__ValueMap__EntriesEntry *));
    va_list arguments;
    va_start(arguments, count);
    for (size_t i = 0; i < count; i++) {
        Handoff__V1__ValueMap__EntriesEntry *e = malloc(sizeof *e);
        handoff__v1__value_map__entries_entry__init(e);
        e->key = va_arg(arguments, char *);
        e->value = va_arg(arguments, Handoff__V1__Value *);
        v->map_value->entries[i] = e;
    }
    va_end(arguments);
    return v;
}

/* Frees what the builders above allocated (strings are literals and not freed). */
static void value_free(Handoff__V1__Value *v) {
    if (v == NULL) return;
    switch (v->kind_case) {
    case HANDOFF__V1__VALUE__KIND_DATE_VALUE: free(v->date_value); break;
    case HANDOFF__V1__VALUE__KIND_LIST_VALUE:
        for (size_t i = 0; i < v->list_value->n_values; i++) value_free(v->list_value->values[i]);
        free(v->list_value->values);
        free(v->list_value);
        break;
    case HANDOFF__V1__VALUE__KIND_MAP_VALUE:
        for (size_t i = 0; i < v->map_value->n_entries; i++) {
            value_free(v->map_value->entries[i]->value);
            free(v->map_value->entries[i]);
        }
        free(v->map_value->entries);
        free(v->map_value);
        break;
    default: break;
    }
    free(v);
}

typedef struct user_info {
    Handoff__V1__Activity__UserInfoEntry *items[32];
    size_t count;
} user_info;

static void user_info_add(user_info *u, const char *key, Handoff__V1__Value *value) {
    Handoff__V1__Activity__UserInfoEntry *e = malloc(sizeof *e);
    handoff__v1__activity__user_info_entry__init(e);
    e->key = (char *)key;
    e->value = value;
    u->items[u->count++] = e;
}

static void user_info_free(user_info *u) {
    for (size_t i = 0; i < u->count; i++) {
        value_free(u->items[i]->value);
        free(u->items[i]);
    }
    u->count = 0;
}

/* ---------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------- */

#define NOTE_TYPE "org.handoff.notes.edit-note"

static void descriptor_declares_abi_name_and_types(void) {
    CHECK(plugin->abi_major == HANDOFF_PLUGIN_ABI_MAJOR && plugin->abi_minor == HANDOFF_PLUGIN_ABI_MINOR, "ABI %u.%u", plugin->abi_major, plugin->abi_minor);
    CHECK(plugin->struct_size == sizeof(handoff_plugin_descriptor), "struct_size %u", plugin->struct_size);
    CHECK(plugin->flags == 0, "flags %u", plugin->flags);
    CHECK(plugin->name != NULL && strcmp(plugin->name, "notes") == 0, "name %s", plugin->name);
    CHECK(plugin->version != NULL && strcmp(plugin->version, "1.0.0") == 0, "version %s", plugin->version);
    CHECK(plugin->team_id != NULL && strcmp(plugin->team_id, "NOTES-TEAM") == 0, "team_id %s", plugin->team_id);
    CHECK(plugin->activity_type_count == 1, "activity_type_count %zu", plugin->activity_type_count);
    CHECK(plugin->activity_types != NULL && plugin->activity_type_count == 1 &&
              strcmp(plugin->activity_types[0], NOTE_TYPE) == 0,
          "activity_types[0] %s", plugin->activity_types ? plugin->activity_types[0] : "(none)");
    CHECK(plugin->init != NULL && plugin->restore != NULL && plugin->command != NULL && plugin->shutdown != NULL,
          "init, restore, command and shutdown are set");
    CHECK(plugin->write_stream == NULL && plugin->read_stream == NULL, "no stream handlers");
    bool reserved_zero = true;
    for (size_t i = 0; i < sizeof plugin->reserved / sizeof plugin->reserved[0]; i++) reserved_zero = reserved_zero && plugin->reserved[i] == NULL;
    /* ABI 1.1's callbacks: notes needs none of them. */
    reserved_zero = reserved_zero && plugin->will_save == NULL && plugin->was_continued == NULL && plugin->did_update == NULL;
    CHECK(reserved_zero, "reserved fields are zero");
}

static void plugin_exports_only_the_entry_point(void *handle) {
    CHECK(dlsym(handle, "handoff__v1__activity__unpack") == NULL, "the generated code is not exported");
    CHECK(dlsym(handle, "handoff__v1__activity__descriptor") == NULL, "the generated descriptors are not exported");
}

static void *loaded_handle;
static void exports_only_the_entry_point(void) { plugin_exports_only_the_entry_point(loaded_handle); }

static void init_creates_the_restored_folder(void) {
    char message[256] = "";
    handoff_error_buffer error = {.message = message, .capacity = sizeof message};
    int32_t status = plugin->init(&host, &plugin_state, error);
    CHECK(status == HANDOFF_OK, "init returned %d: %s", status, message);
    char *path;
    if (asprintf(&path, "%s/restored", data_directory) < 0) abort();
    struct stat info;
    CHECK(stat(path, &info) == 0 && S_ISDIR(info.st_mode), "%s is a directory", path);
    free(path);
}

static void init_refuses_a_host_of_another_major_version(void) {
    handoff_host other = host;
    other.abi_major = 2;
    void *state = NULL;
    char message[256] = "";
    handoff_error_buffer error = {.message = message, .capacity = sizeof message};
    int32_t status = plugin->init(&other, &state, error);
    CHECK(status == HANDOFF_UNSUPPORTED, "status %d", status);
    CHECK(message[0] != 0, "a message explains it");
}

/* The activity with every field and every kind of Value; its expected file is EXPECTED_FULL. */
#define FULL_ID "4f9a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"

static const char EXPECTED_FULL[] =
    "activity_id: 4f9a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b\n"
    "activity_type: org.handoff.notes.edit-note\n"
    "title: Poems: \"Roses\" \xcf\x80\n"
    "user_info.archived: false\n"
    "user_info.contact.address.city: London\n"
    "user_info.contact.address.zip: N1 9GU\n"
    "user_info.contact.emails: [ada@example.org, a.lovelace@example.org]\n"
    "user_info.contact.empty: {}\n"
    "user_info.contact.phone: +44 20 7946 0000\n"
    "user_info.created: 1700000000.123456789\n"
    "user_info.empty_list: []\n"
    "user_info.empty_text:\n"
    "user_info.length: 31\n"
    "user_info.mixed: [1, 2.5, false, null, [a, []], {b: 2, k: v}, 0.000000000, 00ff]\n"
    "user_info.nothing: null\n"
    "user_info.offset: -7\n"
    "user_info.pinned: true\n"
    "user_info.ratio: 0.10000000000000001\n"
    "user_info.source: https://notes.example.org/n/42\n"
    "user_info.tags: [math, poetry]\n"
    "user_info.text: Roses are red,\\nviolets\\tare blue \\\\o/\n"
    "user_info.thumbnail: 0001abff\n"
    "required_user_info_keys: [text, length]\n"
    "webpage_url: https://notes.example.org/n/42\n"
    "keywords: [math, poetry]\n"
    "expiration: 1800000000.000000000\n"
    "eligible_for_handoff: true\n"
    "supports_continuation_streams: true\n"
    "team_id: NOTES-TEAM\n"
    "origin.node_id: 9b2e7c1a-3d4f-4a5b-8c6d-7e8f9a0b1c2d\n"
    "origin.name: editor on desk\n"
    "origin.host: desk.local\n"
    "version: 7\n"
    "updated_at: 1700000123.000000005\n";

static void restore_writes_every_field(void) {
    static const uint8_t thumbnail[] = {0x00, 0x01, 0xab, 0xff};
    static const uint8_t two_bytes[] = {0x00, 0xff};
    user_info info = {0};
    /* Added out of order: the file sorts keys. */
    user_info_add(&info, "text", string_value("Roses are red,\nviolets\tare blue \\o/"));
    user_info_add(&info, "length", int_value(31));
    user_info_add(&info, "offset", int_value(-7));
    user_info_add(&info, "ratio", double_value(0.1));
    user_info_add(&info, "pinned", bool_value(true));
    user_info_add(&info, "archived", bool_value(false));
    user_info_add(&info, "thumbnail", bytes_value(thumbnail, sizeof thumbnail));
    user_info_add(&info, "source", url_value("https://notes.example.org/n/42"));
    user_info_add(&info, "created", date_value(1700000000, 123456789));
    user_info_add(&info, "tags", list_value(2, string_value("math"), string_value("poetry")));
    user_info_add(&info, "mixed",
                  list_value(8, int_value(1), double_value(2.5), bool_value(false), null_value(),
                             list_value(2, string_value("a"), list_value(0)),
                             map_value(2, "k", string_value("v"), "b", int_value(2)), date_value(0, 0),
                             bytes_value(two_bytes, sizeof two_bytes)));
    user_info_add(&info, "contact",
                  map_value(4, "phone", string_value("+44 20 7946 0000"), "address",
                            map_value(2, "zip", string_value("N1 9GU"), "city", string_value("London")), "emails",
                            list_value(2, string_value("ada@example.org"), string_value("a.lovelace@example.org")),
                            "empty", map_value(0)));
    user_info_add(&info, "nothing", null_value());
    user_info_add(&info, "empty_list", list_value(0));
    user_info_add(&info, "empty_text", string_value(""));

    char *required[] = {"text", "length"};
    char *keywords[] = {"math", "poetry"};
    Handoff__V1__NodeRef origin = HANDOFF__V1__NODE_REF__INIT;
    origin.node_id = "9b2e7c1a-3d4f-4a5b-8c6d-7e8f9a0b1c2d";
    origin.name = "editor on desk";
    origin.host = "desk.local";
    Handoff__V1__Timestamp expiration = HANDOFF__V1__TIMESTAMP__INIT;
    expiration.seconds = 1800000000;
    Handoff__V1__Timestamp updated_at = HANDOFF__V1__TIMESTAMP__INIT;
    updated_at.seconds = 1700000123;
    updated_at.nanos = 5;

    Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
    activity.activity_id = FULL_ID;
    activity.activity_type = NOTE_TYPE;
    activity.title = "Poems: \"Roses\" \xcf\x80";
    activity.n_user_info = info.count;
    activity.user_info = info.items;
    activity.n_required_user_info_keys = 2;
    activity.required_user_info_keys = required;
    activity.webpage_url = "https://notes.example.org/n/42";
    activity.n_keywords = 2;
    activity.keywords = keywords;
    activity.expiration = &expiration;
    activity.eligible_for_handoff = 1;
    activity.supports_continuation_streams = 1;
    activity.team_id = "NOTES-TEAM";
    activity.origin = &origin;
    activity.version = 7;
    activity.updated_at = &updated_at;

    reset_record();
    char message[256] = "";
    int32_t status = restore_activity(&activity, message, sizeof message);
    CHECK(status == HANDOFF_OK, "restore returned %d: %s", status, message);
    char *path = restored_path(FULL_ID);
    char *written = read_file(path);
    check_text(written, EXPECTED_FULL);
    free(written);
    free(path);

    CHECK(record.log_calls == 1, "restore logged %d lines", record.log_calls);
    if (record.log_calls >= 1) {
        CHECK(record.log_levels[0] == HANDOFF_LOG_INFO, "log level %d", record.log_levels[0]);
        CHECK(strstr(record.log_messages[0], FULL_ID) != NULL, "log line names the id: %s", record.log_messages[0]);
    }
    user_info_free(&info);
}

static void restore_writes_unset_fields_as_documented(void) {
    Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
    activity.activity_id = "minimal_1";
    activity.activity_type = NOTE_TYPE;
    char message[256] = "";
    int32_t status = restore_activity(&activity, message, sizeof message);
    CHECK(status == HANDOFF_OK, "restore returned %d: %s", status, message);
    char *path = restored_path("minimal_1");
    char *written = read_file(path);
    check_text(written,
               "activity_id: minimal_1\n"
               "activity_type: org.handoff.notes.edit-note\n"
               "title:\n"
               "user_info: {}\n"
               "required_user_info_keys: []\n"
               "webpage_url:\n"
               "keywords: []\n"
               "expiration: none\n"
               "eligible_for_handoff: false\n"
               "supports_continuation_streams: false\n"
               "team_id:\n"
               "origin: none\n"
               "version: 0\n"
               "updated_at: none\n");
    free(written);
    free(path);
}

static void restore_keeps_the_last_of_duplicate_keys(void) {
    user_info info = {0};
    user_info_add(&info, "k", string_value("first"));
    user_info_add(&info, "m", map_value(2, "x", int_value(1), "x", int_value(2)));
    user_info_add(&info, "k", string_value("second"));
    Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
    activity.activity_id = "duplicates";
    activity.activity_type = NOTE_TYPE;
    activity.n_user_info = info.count;
    activity.user_info = info.items;
    char message[256] = "";
    int32_t status = restore_activity(&activity, message, sizeof message);
    CHECK(status == HANDOFF_OK, "restore returned %d: %s", status, message);
    char *path = restored_path("duplicates");
    char *written = read_file(path);
    CHECK(written != NULL && strstr(written, "\nuser_info.k: second\nuser_info.m.x: 2\nrequired_user_info_keys") != NULL,
          "file:\n%s", written ? written : "(none)");
    free(written);
    free(path);
    user_info_free(&info);
}

/* A list nested `depth` levels deep around the string "x". */
static Handoff__V1__Value *nested_list(int depth) {
    Handoff__V1__Value *v = string_value("x");
    for (int i = 0; i < depth; i++) v = list_value(1, v);
    return v;
}

static void restore_refuses_absurd_nesting_only(void) {
    user_info info = {0};
    user_info_add(&info, "deep", nested_list(20));
    Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
    activity.activity_id = "nested";
    activity.activity_type = NOTE_TYPE;
    activity.n_user_info = info.count;
    activity.user_info = info.items;
    char message[256] = "";
    CHECK(restore_activity(&activity, message, sizeof message) == HANDOFF_OK, "20 levels: %s", message);
    char *path = restored_path("nested");
    char *written = read_file(path);
    CHECK(written != NULL && strstr(written, "\nuser_info.deep: [[[[[[[[[[[[[[[[[[[[x]]]]]]]]]]]]]]]]]]]]\n") != NULL,
          "file:\n%s", written ? written : "(none)");
    free(written);
    CHECK(unlink(path) == 0, "removed %s", path);
    free(path);
    user_info_free(&info);

    user_info_add(&info, "deep", nested_list(150));
    activity.activity_id = "too-deep";
    activity.user_info = info.items;
    message[0] = 0;
    CHECK(restore_activity(&activity, message, sizeof message) == HANDOFF_INVALID_ARGUMENT, "150 levels");
    CHECK(strstr(message, "nested") != NULL, "message: %s", message);
    path = restored_path("too-deep");
    CHECK(access(path, F_OK) != 0, "nothing written");
    free(path);
    user_info_free(&info);
}

static void restore_replaces_an_earlier_restore_atomically(void) {
    Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
    activity.activity_id = "again";
    activity.activity_type = NOTE_TYPE;
    activity.title = "first";
    char message[256] = "";
    CHECK(restore_activity(&activity, message, sizeof message) == HANDOFF_OK, "%s", message);
    activity.title = "second";
    activity.version = 2;
    CHECK(restore_activity(&activity, message, sizeof message) == HANDOFF_OK, "%s", message);
    char *path = restored_path("again");
    char *written = read_file(path);
    CHECK(written != NULL && strstr(written, "\ntitle: second\n") != NULL && strstr(written, "\nversion: 2\n") != NULL,
          "file:\n%s", written ? written : "(none)");
    free(written);
    free(path);

    /* No temporary files are left behind. */
    char *directory;
    if (asprintf(&directory, "%s/restored", data_directory) < 0) abort();
    DIR *d = opendir(directory);
    struct dirent *item;
    int strays = 0;
    while (d != NULL && (item = readdir(d)) != NULL) {
        if (strcmp(item->d_name, ".") == 0 || strcmp(item->d_name, "..") == 0) continue;
        size_t length = strlen(item->d_name);
        if (item->d_name[0] == '.' || length < 4 || strcmp(item->d_name + length - 4, ".txt") != 0) {
            fprintf(stderr, "    stray file %s\n", item->d_name);
            strays++;
        }
    }
    if (d != NULL) closedir(d);
    CHECK(strays == 0, "%d stray files in %s", strays, directory);
    free(directory);
}

static void restore_refuses_garbage_bytes(void) {
    static const struct {
        const char *name;
        uint8_t bytes[8];
        size_t length;
    } cases[] = {
        {"truncated string", {0x0a, 0x05, 'a', 'b'}, 4},
        {"bad varint", {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 8},
        {"wire type 7", {0x0f, 0x00}, 2},
        {"string where a message goes", {0x82, 0x01, 0x02, 0xff, 0xff}, 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char message[256];
        memset(message, 'x', sizeof message);
        reset_record();
        int32_t status = restore_bytes(cases[i].bytes, cases[i].length, message, sizeof message);
        CHECK(status == HANDOFF_INVALID_ARGUMENT, "%s: status %d", cases[i].name, status);
        CHECK(memchr(message, 0, sizeof message) != NULL && message[0] != 0 && strstr(message, "Activity") != NULL,
              "%s: message '%.*s'", cases[i].name, (int)sizeof message, message);
        CHECK(record.log_calls == 0, "%s: nothing logged", cases[i].name);
    }
}

static void error_messages_stay_within_capacity(void) {
    static const uint8_t garbage[] = {0x0a, 0x05, 'a'};
    char buffer[16];
    memset(buffer, '#', sizeof buffer);
    int32_t status = restore_bytes(garbage, sizeof garbage, buffer, 8);
    CHECK(status == HANDOFF_INVALID_ARGUMENT, "status %d", status);
    CHECK(strlen(buffer) == 7, "message cut to 7 bytes + NUL, got %zu", strnlen(buffer, sizeof buffer));
    bool untouched = true;
    for (size_t i = 8; i < sizeof buffer; i++) untouched = untouched && buffer[i] == '#';
    CHECK(untouched, "bytes past the capacity are untouched");

    /* A NULL buffer of capacity 0 is left alone. */
    status = restore_bytes(garbage, sizeof garbage, NULL, 0);
    CHECK(status == HANDOFF_INVALID_ARGUMENT, "status %d", status);
}

static void restore_refuses_other_types_and_unsafe_ids(void) {
    Handoff__V1__Activity activity = HANDOFF__V1__ACTIVITY__INIT;
    activity.activity_id = "other";
    activity.activity_type = "org.handoff.contacts.edit-contact";
    char message[256] = "";
    CHECK(restore_activity(&activity, message, sizeof message) == HANDOFF_INVALID_ARGUMENT, "other type");
    CHECK(strstr(message, "org.handoff.contacts.edit-contact") != NULL, "message: %s", message);

    const char *unsafe[] = {"../escape", "", ".hidden", "a/b", "with space", "x\ny"};
    for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++) {
        activity.activity_id = (char *)unsafe[i];
        activity.activity_type = NOTE_TYPE;
        message[0] = 0;
        CHECK(restore_activity(&activity, message, sizeof message) == HANDOFF_INVALID_ARGUMENT, "id '%s'", unsafe[i]);
        CHECK(message[0] != 0, "id '%s' has a message", unsafe[i]);
    }
    char *escaped;
    if (asprintf(&escaped, "%s/escape.txt", data_directory) < 0) abort();
    CHECK(access(escaped, F_OK) != 0, "nothing written outside restored/");
    free(escaped);
}

static void show_prints_the_restored_lines(void) {
    const char *argv[] = {"show", FULL_ID};
    command_result result = run_command(2, argv);
    CHECK(result.status == HANDOFF_OK, "status %d: %s", result.status, result.message);
    /* Joined with newlines, the output lines are the file. */
    size_t total = 1;
    for (int i = 0; i < result.output.count; i++) total += strlen(result.output.items[i]) + 1;
    char *joined = calloc(1, total);
    for (int i = 0; i < result.output.count; i++) {
        strcat(joined, result.output.items[i]);
        strcat(joined, "\n");
    }
    check_text(joined, EXPECTED_FULL);
    free(joined);
    free_lines(&result.output);
}

static void show_of_an_unknown_note_is_not_found(void) {
    const char *argv[] = {"show", "no-such-note"};
    command_result result = run_command(2, argv);
    CHECK(result.status == HANDOFF_NOT_FOUND, "status %d", result.status);
    CHECK(strstr(result.message, "no-such-note") != NULL, "message: %s", result.message);
    CHECK(result.output.count == 0, "no output");
    free_lines(&result.output);

    const char *escape[] = {"show", "../../etc/passwd"};
    result = run_command(2, escape);
    CHECK(result.status == HANDOFF_INVALID_ARGUMENT, "status %d", result.status);
    CHECK(result.output.count == 0, "no output");
    free_lines(&result.output);
}

static void list_prints_the_restored_ids_sorted(void) {
    const char *argv[] = {"list"};
    command_result result = run_command(1, argv);
    CHECK(result.status == HANDOFF_OK, "status %d: %s", result.status, result.message);
    const char *expected[] = {FULL_ID, "again", "duplicates", "minimal_1"};
    CHECK(result.output.count == 4, "%d lines", result.output.count);
    for (int i = 0; i < 4 && i < result.output.count; i++) {
        CHECK(strcmp(result.output.items[i], expected[i]) == 0, "line %d: %s", i, result.output.items[i]);
    }
    free_lines(&result.output);
}

static void new_makes_the_note_current(void) {
    reset_record();
    const char *argv[] = {"new", "Shopping list: café", "na\xc3\xafve \xe2\x98\x95"};
    command_result result = run_command(3, argv);
    CHECK(result.status == HANDOFF_OK, "status %d: %s", result.status, result.message);
    CHECK(result.output.count == 1 && strcmp(result.output.items[0], FAKE_ASSIGNED_ID) == 0, "prints the new id");
    CHECK(record.become_current_calls == 1, "become_current called %d times", record.become_current_calls);
    CHECK(record.id_capacity >= 64, "id_out has %zu bytes", record.id_capacity);
    free_lines(&result.output);
    if (record.become_current_calls != 1) return;

    Handoff__V1__Activity *a =
        handoff__v1__activity__unpack(NULL, record.become_current_length, record.become_current_bytes);
    CHECK(a != NULL, "become_current got a serialized Activity");
    if (a == NULL) return;
    CHECK(strcmp(a->activity_id, "") == 0, "the host assigns the id: '%s'", a->activity_id);
    CHECK(strcmp(a->activity_type, NOTE_TYPE) == 0, "type %s", a->activity_type);
    CHECK(strcmp(a->title, "Shopping list: café") == 0, "title %s", a->title);
    CHECK(a->n_user_info == 2, "%zu user_info entries", a->n_user_info);
    const Handoff__V1__Value *text = NULL, *length = NULL;
    for (size_t i = 0; i < a->n_user_info; i++) {
        if (strcmp(a->user_info[i]->key, "text") == 0) text = a->user_info[i]->value;
        if (strcmp(a->user_info[i]->key, "length") == 0) length = a->user_info[i]->value;
    }
    CHECK(text != NULL && text->kind_case == HANDOFF__V1__VALUE__KIND_STRING_VALUE &&
              strcmp(text->string_value, "na\xc3\xafve \xe2\x98\x95") == 0,
          "user_info.text is the text");
    CHECK(length != NULL && length->kind_case == HANDOFF__V1__VALUE__KIND_INT_VALUE && length->int_value == 7,
          "user_info.length counts Unicode scalars: %lld", length ? (long long)length->int_value : -1LL);
    CHECK(a->n_required_user_info_keys == 1 && strcmp(a->required_user_info_keys[0], "text") == 0,
          "text is required");
    CHECK(strcmp(a->webpage_url, "https://notes.example.org/notes?title=Shopping%20list%3A%20caf%C3%A9") == 0,
          "webpage_url %s", a->webpage_url);
    CHECK(a->n_keywords == 4 && strcmp(a->keywords[0], "notes") == 0 && strcmp(a->keywords[1], "Shopping") == 0 &&
              strcmp(a->keywords[2], "list:") == 0 && strcmp(a->keywords[3], "café") == 0,
          "%zu keywords", a->n_keywords);
    CHECK(a->eligible_for_handoff, "eligible for Handoff");
    CHECK(!a->supports_continuation_streams, "no streams");
    CHECK(strcmp(a->team_id, "NOTES-TEAM") == 0, "team_id %s", a->team_id);
    CHECK(a->origin == NULL && a->version == 0 && a->updated_at == NULL && a->expiration == NULL,
          "origin, version, updated_at are left to the host");
    handoff__v1__activity__free_unpacked(a, NULL);
}

static void new_reports_the_hosts_refusal(void) {
    reset_record();
    record.become_current_status = HANDOFF_INVALID_ARGUMENT;
    const char *argv[] = {"new", "t", "x"};
    command_result result = run_command(3, argv);
    CHECK(result.status == HANDOFF_INVALID_ARGUMENT, "status %d", result.status);
    CHECK(strstr(result.message, "fake host refuses") != NULL, "message: %s", result.message);
    CHECK(result.output.count == 0, "no id printed");
    free_lines(&result.output);
    record.become_current_status = HANDOFF_OK;
}

static void new_refuses_text_that_is_not_utf8(void) {
    reset_record();
    const char *argv[] = {"new", "title", "bad \xc3\x28 bytes"};
    command_result result = run_command(3, argv);
    CHECK(result.status == HANDOFF_INVALID_ARGUMENT, "status %d", result.status);
    CHECK(record.become_current_calls == 0, "become_current not called");
    free_lines(&result.output);
}

static void unknown_commands_are_not_found_with_usage(void) {
    const char *argv[] = {"frobnicate"};
    command_result result = run_command(1, argv);
    CHECK(result.status == HANDOFF_NOT_FOUND, "status %d", result.status);
    CHECK(strstr(result.message, "usage:") != NULL && strstr(result.message, "frobnicate") != NULL, "message: %s",
          result.message);
    free_lines(&result.output);

    result = run_command(0, argv);
    CHECK(result.status == HANDOFF_NOT_FOUND, "no subcommand: status %d", result.status);
    CHECK(strstr(result.message, "usage:") != NULL, "message: %s", result.message);
    free_lines(&result.output);

    const char *wrong[] = {"new", "only a title"};
    result = run_command(2, wrong);
    CHECK(result.status == HANDOFF_INVALID_ARGUMENT, "new with one argument: status %d", result.status);
    CHECK(strstr(result.message, "usage:") != NULL, "message: %s", result.message);
    free_lines(&result.output);
}

/* ---------------------------------------------------------------------------------------------
 * Main
 * ------------------------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *info, int flag, struct FTW *ftw) {
    (void)info, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s <path to libhandoff-notes.so>\n", argv[0]);
        return 2;
    }
    void *handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    handoff_plugin_entry_fn entry;
    *(void **)&entry = dlsym(handle, HANDOFF_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL || (plugin = entry()) == NULL) {
        fprintf(stderr, "%s: no %s: %s\n", argv[1], HANDOFF_PLUGIN_ENTRY_SYMBOL, dlerror());
        return 1;
    }
    loaded_handle = handle;

    char template[] = "/tmp/handoff-notes-test.XXXXXX";
    if (mkdtemp(template) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    /* A data directory the host did not create yet, to exercise mkdir -p. */
    snprintf(data_directory, sizeof data_directory, "%s/data/notes", template);
    host = (handoff_host){
        .abi_major = HANDOFF_PLUGIN_ABI_MAJOR,
        .abi_minor = HANDOFF_PLUGIN_ABI_MINOR,
        .struct_size = sizeof(handoff_host),
        .context = &record,
        .data_directory = data_directory,
        .node_name = "test node",
        .node_id = "00000000-0000-4000-8000-000000000000",
        .log = fake_log,
        .become_current = fake_become_current,
        .update_activity = fake_update_activity,
        .end_activity = fake_end_activity,
    };

    RUN(descriptor_declares_abi_name_and_types);
    RUN(exports_only_the_entry_point);
    RUN(init_refuses_a_host_of_another_major_version);
    RUN(init_creates_the_restored_folder);
    if (plugin_state == NULL) {
        printf("%d passed, %d failed\n", passed, failed + 1);
        return 1;
    }
    RUN(restore_writes_every_field);
    RUN(restore_writes_unset_fields_as_documented);
    RUN(restore_keeps_the_last_of_duplicate_keys);
    RUN(restore_refuses_absurd_nesting_only);
    RUN(restore_replaces_an_earlier_restore_atomically);
    RUN(restore_refuses_garbage_bytes);
    RUN(error_messages_stay_within_capacity);
    RUN(restore_refuses_other_types_and_unsafe_ids);
    RUN(show_prints_the_restored_lines);
    RUN(show_of_an_unknown_note_is_not_found);
    RUN(list_prints_the_restored_ids_sorted);
    RUN(new_makes_the_note_current);
    RUN(new_reports_the_hosts_refusal);
    RUN(new_refuses_text_that_is_not_utf8);
    RUN(unknown_commands_are_not_found_with_usage);

    plugin->shutdown(plugin_state);
    reset_record();
    nftw(template, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
