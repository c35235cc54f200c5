/*
 * kafkaread: a test guest without operators of its own, for the Kafka
 * source until the Go SDK has its call. Its plan is
 *
 *   1 in (kafka-source, parallelism P) =rebalance=> 2 out (collect)
 *
 * with the source's config the JSON object of the first argument and P the
 * second, e.g. '{"brokers":"127.0.0.1:9092","topics":"bids"}' 2.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("sluice"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("set_plan") void sluice_set_plan(const char *p, uint32_t n);
IMPORT("fail") void sluice_fail(const char *p, uint32_t n);

enum { OK = 0, ERROR = 1 };

static uint32_t get_u32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static int32_t usage(void) {
    static const char msg[] = "usage: kafkaread CONFIG-JSON PARALLELISM";
    sluice_fail(msg, sizeof msg - 1);
    return ERROR;
}

EXPORT("sluice_abi_v1") void abi_v1(void) {}
EXPORT("sluice_alloc") void *s_alloc(uint32_t n) { return malloc(n); }
EXPORT("sluice_free") void s_free(void *p) { free(p); }

EXPORT("sluice_plan") int32_t s_plan(const uint8_t *b, uint32_t n) {
    /* The arguments: a batch of records without keys or times. */
    const char *arg[2];
    uint32_t len[2];
    if (n < 4 || get_u32(b) != 2) return usage();
    uint32_t at = 4;
    for (int i = 0; i < 2; i++) {
        if (at + 5 > n || b[at] != 0) return usage();
        len[i] = get_u32(b + at + 1);
        at += 5;
        if (len[i] > n - at) return usage();
        arg[i] = (const char *)b + at;
        at += len[i];
    }
    size_t size = len[0] + len[1] + 512;
    char *plan = malloc(size);
    int w = snprintf(plan, size,
        "{\"name\":\"kafkaread\",\"vertices\":["
        "{\"id\":1,\"name\":\"in\",\"kind\":\"source\",\"connector\":\"kafka-source\",\"parallelism\":%.*s,\"config\":%.*s},"
        "{\"id\":2,\"name\":\"out\",\"kind\":\"sink\",\"connector\":\"collect\",\"parallelism\":1}],"
        "\"edges\":[{\"source\":1,\"target\":2,\"partitioner\":\"rebalance\"}]}",
        (int)len[1], arg[1], (int)len[0], arg[0]);
    sluice_set_plan(plan, (uint32_t)w);
    free(plan);
    return OK;
}

EXPORT("sluice_open") int32_t s_open(const uint8_t *p, uint32_t n) {
    (void)p, (void)n;
    return OK;
}

EXPORT("sluice_process") int32_t s_process(const uint8_t *p, uint32_t n) {
    (void)p, (void)n;
    return OK;
}
