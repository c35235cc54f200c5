/*
 * statusdone: a guest whose sluice_process returns status 2 (DONE), which
 * only sluice_source_poll may return (docs/ABI.md section 3). The job must
 * fail with an error saying so instead of finishing without its input.
 *
 *   -- --input PATH --mode map     1 text -> 5 map (returns DONE) -> 6 collect
 *   -- --input PATH --mode keyed   1 text -> 2 key_by =hash=> 3 reduce (returns
 *                                  DONE) -> 4 collect: only the keyed task errs
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("sluice"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("emit") void sluice_emit(const uint8_t *p, uint32_t n);
IMPORT("set_plan") void sluice_set_plan(const char *p, uint32_t n);
IMPORT("fail") void sluice_fail(const char *p, uint32_t n);

enum { OK = 0, ERROR = 1, DONE = 2 };

static int32_t fail(const char *msg) {
    sluice_fail(msg, strlen(msg));
    return ERROR;
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = v, p[1] = v >> 8, p[2] = v >> 16, p[3] = v >> 24;
}

EXPORT("sluice_abi_v1") void abi_v1(void) {}
EXPORT("sluice_alloc") uint8_t *s_alloc(uint32_t n) { return malloc(n); }
EXPORT("sluice_free") void s_free(uint8_t *p) { free(p); }

static char plan[1024];

/* The plan's arguments are a batch whose values are the arguments. */
EXPORT("sluice_plan") int32_t s_plan(const uint8_t *b, uint32_t n) {
    const char *input = 0, *mode = 0;
    char args[4][256];
    uint32_t count = get_u32(b), i = 4;
    for (uint32_t r = 0; r < count && r < 4; r++) {
        uint8_t flags = b[i++];
        if (flags != 0) return fail("plan: arguments carry no key or time");
        uint32_t v = get_u32(b + i);
        i += 4;
        if (v >= sizeof args[r] || i + v > n) return fail("plan: argument too long");
        memcpy(args[r], b + i, v);
        args[r][v] = 0;
        i += v;
        if (r > 0 && strcmp(args[r - 1], "--input") == 0) input = args[r];
        if (r > 0 && strcmp(args[r - 1], "--mode") == 0) mode = args[r];
    }
    if (!input || !mode) return fail("usage: -- --input PATH --mode map|keyed");
    if (strchr(input, '"') || strchr(input, '\\')) return fail("plan: no quotes or backslashes in the input path");
    const char *shape;
    if (strcmp(mode, "map") == 0) {
        shape = "{\"name\":\"statusdone\",\"vertices\":["
                "{\"id\":1,\"name\":\"lines\",\"kind\":\"source\",\"connector\":\"text\",\"config\":{\"paths\":\"[\\\"%s\\\"]\"}},"
                "{\"id\":5,\"name\":\"done\",\"kind\":\"map\"},"
                "{\"id\":6,\"name\":\"out\",\"kind\":\"sink\",\"connector\":\"collect\"}],"
                "\"edges\":[{\"source\":1,\"target\":5,\"partitioner\":\"forward\"},"
                "{\"source\":5,\"target\":6,\"partitioner\":\"forward\"}]}";
    } else if (strcmp(mode, "keyed") == 0) {
        shape = "{\"name\":\"statusdone\",\"vertices\":["
                "{\"id\":1,\"name\":\"lines\",\"kind\":\"source\",\"connector\":\"text\",\"config\":{\"paths\":\"[\\\"%s\\\"]\"}},"
                "{\"id\":2,\"name\":\"key\",\"kind\":\"key_by\"},"
                "{\"id\":3,\"name\":\"done\",\"kind\":\"reduce\"},"
                "{\"id\":4,\"name\":\"out\",\"kind\":\"sink\",\"connector\":\"collect\"}],"
                "\"edges\":[{\"source\":1,\"target\":2,\"partitioner\":\"forward\"},"
                "{\"source\":2,\"target\":3,\"partitioner\":\"hash\"},"
                "{\"source\":3,\"target\":4,\"partitioner\":\"forward\"}]}";
    } else {
        return fail("plan: --mode is map or keyed");
    }
    /* shape holds one %s: the path. */
    const char *at = strstr(shape, "%s");
    size_t pre = at - shape, path = strlen(input), post = strlen(at + 2);
    if (pre + path + post >= sizeof plan) return fail("plan: input path too long");
    memcpy(plan, shape, pre);
    memcpy(plan + pre, input, path);
    memcpy(plan + pre + path, at + 2, post);
    sluice_set_plan(plan, pre + path + post);
    return OK;
}

static int head; /* chain[0] */

EXPORT("sluice_open") int32_t s_open(const char *info, uint32_t n) {
    const char *c = strstr(info, "\"chain\":[");
    if (!c || c >= info + n) return fail("open: no chain in the task info");
    head = atoi(c + 9);
    return OK;
}

static uint8_t *out;
static uint32_t out_cap;

EXPORT("sluice_process") int32_t s_process(const uint8_t *b, uint32_t n) {
    if (head != 2) return DONE; /* the map (5) and the reduce (3) */
    /* key_by: the key is the value; the output is at most twice the input. */
    if (out_cap < 2 * n + 4) {
        free(out);
        out_cap = 2 * n + 4;
        out = malloc(out_cap);
        if (!out) return fail("key_by: out of memory");
    }
    uint32_t count = get_u32(b), i = 4, o = 4;
    put_u32(out, count);
    for (uint32_t r = 0; r < count; r++) {
        uint8_t flags = b[i++];
        if (flags & 1) i += 4 + get_u32(b + i);
        if (flags & 2) i += 8;
        uint32_t v = get_u32(b + i);
        const uint8_t *val = b + i + 4;
        i += 4 + v;
        out[o++] = 1;
        put_u32(out + o, v), memcpy(out + o + 4, val, v), o += 4 + v;
        put_u32(out + o, v), memcpy(out + o + 4, val, v), o += 4 + v;
    }
    sluice_emit(out, o);
    return OK;
}
