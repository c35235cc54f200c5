/*
 * kafkamap (C): the Kafka benchmark's job with its map in C, for
 * BenchmarkKafkaMapP2's C row. The same job as bench/testdata/kafkamap:
 *
 *   1 in (kafka-source) -> 2 upper (map) -> 3 out (kafka-sink)
 *
 * reads a topic, upper-cases each record's value (keeping its key and
 * time) and produces it to another topic, exactly once unless
 * --at-least-once. Arguments: --brokers B --in TOPIC --out TOPIC
 * [--at-least-once]. Names are not JSON-escaped: they are broker
 * addresses and topic names, which have no quotes or backslashes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("sluice"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("emit") void sluice_emit(const uint8_t *p, uint32_t n);
IMPORT("set_plan") void sluice_set_plan(const char *p, uint32_t n);
IMPORT("fail") void sluice_fail(const char *p, uint32_t n);

enum { OK = 0, ERROR = 1 };
enum { FLAG_KEY = 1, FLAG_TIME = 2 };

static int32_t fail(const char *msg) {
    sluice_fail(msg, (uint32_t)strlen(msg));
    return ERROR;
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v) { p[0] = v, p[1] = v >> 8, p[2] = v >> 16, p[3] = v >> 24; }

EXPORT("sluice_abi_v1") void abi_v1(void) {}
EXPORT("sluice_alloc") void *s_alloc(uint32_t n) { return malloc(n); }
EXPORT("sluice_free") void s_free(void *p) { free(p); }

EXPORT("sluice_plan") int32_t s_plan(const uint8_t *b, uint32_t n) {
    static const char usage[] = "usage: kafkamap --brokers B --in TOPIC --out TOPIC [--at-least-once]";
    const char *brokers = 0, *in = 0, *out = 0;
    int alo = 0;
    char **want = 0;
    if (n < 4) return fail(usage);
    uint32_t count = get_u32(b), at = 4;
    for (uint32_t i = 0; i < count; i++) {
        if (at + 5 > n || b[at] != 0) return fail(usage);
        uint32_t len = get_u32(b + at + 1);
        at += 5;
        if (len > n - at) return fail(usage);
        char *a = malloc(len + 1);
        if (!a) abort();
        memcpy(a, b + at, len);
        a[len] = 0;
        at += len;
        if (want) {
            *want = a, want = 0;
        } else if (strcmp(a, "--brokers") == 0) {
            want = (char **)&brokers;
        } else if (strcmp(a, "--in") == 0) {
            want = (char **)&in;
        } else if (strcmp(a, "--out") == 0) {
            want = (char **)&out;
        } else if (strcmp(a, "--at-least-once") == 0) {
            alo = 1;
        } else {
            return fail(usage);
        }
    }
    if (want || !brokers || !in || !out) return fail(usage);
    size_t size = 2 * strlen(brokers) + strlen(in) + strlen(out) + 1024;
    char *plan = malloc(size);
    if (!plan) abort();
    int w = snprintf(plan, size,
        "{\"name\":\"kafkamap-c\",\"vertices\":["
        "{\"id\":1,\"name\":\"in\",\"kind\":\"source\",\"connector\":\"kafka-source\",\"config\":{\"brokers\":\"%s\",\"topics\":\"%s\"}},"
        "{\"id\":2,\"name\":\"upper\",\"kind\":\"map\"},"
        "{\"id\":3,\"name\":\"out\",\"kind\":\"sink\",\"connector\":\"kafka-sink\",\"config\":{\"brokers\":\"%s\",\"topic\":\"%s\",\"delivery\":\"%s\"}}],"
        "\"edges\":[{\"source\":1,\"target\":2,\"partitioner\":\"forward\"},{\"source\":2,\"target\":3,\"partitioner\":\"forward\"}]}",
        brokers, in, brokers, out, alo ? "at-least-once" : "exactly-once");
    if (w < 0 || (size_t)w >= size) return fail("kafkamap: plan too long");
    sluice_set_plan(plan, (uint32_t)w);
    free(plan);
    return OK;
}

EXPORT("sluice_open") int32_t s_open(const uint8_t *p, uint32_t n) {
    (void)p, (void)n;
    return OK;
}

static uint8_t *out;
static uint32_t out_cap;

/* sluice_process upper-cases every record's value: the output batch is the
 * input batch with its values changed, so it is copied once and emitted. */
EXPORT("sluice_process") int32_t s_process(const uint8_t *b, uint32_t n) {
    if (n < 4) return fail("kafkamap: truncated batch");
    if (n > out_cap) {
        free(out);
        out_cap = n;
        out = malloc(n);
        if (!out) abort();
    }
    memcpy(out, b, n);
    uint32_t cnt = get_u32(out), i = 4;
    for (uint32_t r = 0; r < cnt; r++) {
        if (n - i < 5) return fail("kafkamap: malformed batch");
        uint8_t flags = out[i++];
        if (flags & ~(FLAG_KEY | FLAG_TIME)) return fail("kafkamap: unexpected record flags");
        if (flags & FLAG_KEY) {
            if (n - i < 4) return fail("kafkamap: malformed batch");
            uint32_t k = get_u32(out + i);
            if (n - i - 4 < k) return fail("kafkamap: malformed batch");
            i += 4 + k;
        }
        if (flags & FLAG_TIME) {
            if (n - i < 8) return fail("kafkamap: malformed batch");
            i += 8;
        }
        if (n - i < 4) return fail("kafkamap: malformed batch");
        uint32_t v = get_u32(out + i);
        i += 4;
        if (n - i < v) return fail("kafkamap: malformed batch");
        for (uint8_t *c = out + i, *end = c + v; c < end; c++) {
            if (*c >= 'a' && *c <= 'z') *c -= 'a' - 'A';
        }
        i += v;
    }
    if (i != n) return fail("kafkamap: trailing bytes after the last record");
    put_u32(out, cnt);
    sluice_emit(out, n);
    return OK;
}
