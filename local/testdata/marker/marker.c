/*
 * marker: a test guest that emits one record, its marker string, to a
 * collect sink. Tests make many distinct modules from it by patching the
 * marker's digits in the data segment, so each has its own digest and
 * its own correct result.
 *
 *   1 marker (guest source, 1 record) -> 2 out (collect)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT(name) __attribute__((import_module("sluice"), import_name(name)))
#define EXPORT(name) __attribute__((export_name(name)))

IMPORT("emit") void sluice_emit(const uint8_t *p, uint32_t n);
IMPORT("set_plan") void sluice_set_plan(const char *p, uint32_t n);

enum { OK = 0, ERROR = 1, DONE = 2 };

static const char plan[] =
    "{\"name\":\"marker\",\"vertices\":["
    "{\"id\":1,\"name\":\"marker\",\"kind\":\"source\"},"
    "{\"id\":2,\"name\":\"out\",\"kind\":\"sink\",\"connector\":\"collect\"}],"
    "\"edges\":[{\"source\":1,\"target\":2,\"partitioner\":\"forward\"}]}";

/* volatile: the compiler must read the bytes tests patch, not fold them. */
static volatile const char marker[] = "SLUICE-MARKER-000000";

static void put_u32(uint8_t *p, uint32_t v) { p[0] = v, p[1] = v >> 8, p[2] = v >> 16, p[3] = v >> 24; }

static int sent;
static uint8_t batch[4 + 1 + 4 + sizeof marker];

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

EXPORT("sluice_source_poll") int32_t s_poll(int32_t max) {
    if (sent || max < 1) return sent ? DONE : OK;
    uint32_t n = sizeof marker - 1;
    put_u32(batch, 1);
    batch[4] = 0; /* no key */
    put_u32(batch + 5, n);
    for (uint32_t i = 0; i < n; i++) batch[9 + i] = (uint8_t)marker[i];
    sluice_emit(batch, 9 + n);
    sent = 1;
    return OK;
}

/* The ABI asks for it; this guest has no operator that takes input. */
EXPORT("sluice_process") int32_t s_process(const uint8_t *b, uint32_t n) {
    (void)b, (void)n;
    return OK;
}
