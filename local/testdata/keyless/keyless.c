/*
 * keyless: a test guest whose key_by forgets the key of one record, so the
 * host refuses it on the hash edge (exchange.ErrNoKey) after some keyed
 * records went through to the consumers.
 *
 *   1 numbers (guest source, 1000 records) -> 2 by value (key_by)
 *     =hash=> 3 count (reduce) -> 4 out (collect)
 *
 * Record 300 of every source subtask leaves key_by without a key. The
 * job's failure must name that, not what it caused downstream (the
 * consumers see their producer abort its channels).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("sluice"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("emit") void sluice_emit(const uint8_t *p, uint32_t n);
IMPORT("set_plan") void sluice_set_plan(const char *p, uint32_t n);

enum { OK = 0, ERROR = 1, DONE = 2 };
enum { RECORDS = 1000, KEYLESS = 300, PER_POLL = 50 };

static const char plan[] =
    "{\"name\":\"keyless\",\"vertices\":["
    "{\"id\":1,\"name\":\"numbers\",\"kind\":\"source\"},"
    "{\"id\":2,\"name\":\"by value\",\"kind\":\"key_by\"},"
    "{\"id\":3,\"name\":\"count\",\"kind\":\"reduce\",\"config\":{\"emit\":\"final\"}},"
    "{\"id\":4,\"name\":\"out\",\"kind\":\"sink\",\"connector\":\"collect\"}],"
    "\"edges\":["
    "{\"source\":1,\"target\":2,\"partitioner\":\"forward\"},"
    "{\"source\":2,\"target\":3,\"partitioner\":\"hash\"},"
    "{\"source\":3,\"target\":4,\"partitioner\":\"forward\"}]}";

static void put_u32(uint8_t *p, uint32_t v) { p[0] = v, p[1] = v >> 8, p[2] = v >> 16, p[3] = v >> 24; }

static uint32_t next_record;
static uint8_t batch[4 + PER_POLL * (1 + 4 + 4 + 4 + 4)];

EXPORT("sluice_abi_v1") void abi_v1(void) {}
EXPORT("sluice_alloc") void *s_alloc(uint32_t n) { return malloc(n); }
EXPORT("sluice_free") void s_free(void *p) { free(p); }

EXPORT("sluice_plan") int32_t s_plan(const uint8_t *b, uint32_t n) {
    (void)b, (void)n;
    sluice_set_plan(plan, sizeof plan - 1);
    return OK;
}

EXPORT("sluice_open") int32_t s_open(const uint8_t *p, uint32_t n) {
    (void)p, (void)n;
    return OK;
}

/* The source and key_by, chained: one batch of up to PER_POLL records. */
EXPORT("sluice_source_poll") int32_t s_poll(int32_t max) {
    if (next_record >= RECORDS) return DONE;
    uint32_t count = 0, len = 4;
    while (count < PER_POLL && (int32_t)count < max && next_record < RECORDS) {
        uint8_t value[4];
        put_u32(value, next_record);
        uint8_t *r = batch + len;
        if (next_record == KEYLESS) {
            r[0] = 0; /* no key: key_by "forgot" it */
            put_u32(r + 1, 4), memcpy(r + 5, value, 4);
            len += 9;
        } else {
            r[0] = 1;
            put_u32(r + 1, 4), memcpy(r + 5, value, 4);
            put_u32(r + 9, 4), memcpy(r + 13, value, 4);
            len += 17;
        }
        count++, next_record++;
    }
    put_u32(batch, count);
    sluice_emit(batch, len);
    return OK;
}

/* The count: it only has to take its input. */
EXPORT("sluice_process") int32_t s_process(const uint8_t *b, uint32_t n) {
    (void)b, (void)n;
    return OK;
}
