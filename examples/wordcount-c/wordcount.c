/*
 * wordcount-c: the word count of examples/wordcount, written in C against
 * the guest ABI (docs/ABI.md) with no SDK, to show the ABI is the whole
 * contract and to measure the cluster with a guest compiler that produces
 * fast Wasm (see BENCHMARKS.md).
 *
 * Words are maximal runs of ASCII letters, lower-cased; the result is one
 * "word<TAB>count" record per distinct word. Pass the input with
 * `-- --input PATH` (repeatable; a glob pattern is fine).
 *
 * Build: clang --target=wasm32-wasi -O2 -mexec-model=reactor -o wc.wasm wordcount.c
 * (sluice run and sluice plan do that for you when a directory holds C).
 *
 * The graph, with the vertex ids the host passes back in sluice_open:
 *
 *   1 lines (text source) -> 2 tokenize (flat_map) -> 3 word (key_by)
 *     =hash=> 4 count (reduce, emit final) -> 5 format (map) -> 6 out (collect)
 *
 * The count keeps its accumulators in a hash table in guest memory, writes
 * the ones changed since the last checkpoint to keyed state at every
 * barrier (state_put_batch), reads keyed state back when the task opens
 * (after a restore), and emits every word at the end of input.
 *
 * With --combine, the word key_by pre-aggregates (a combiner, as Hadoop's
 * word count has): it counts the words of each call in a second table and
 * emits one record per distinct word, valued with its count in the call
 * (8 bytes, little-endian), at the end of the call; the count adds the
 * values instead of counting records. Nothing is held between calls, so a
 * barrier never finds counts in flight. It sends fewer records through the
 * exchange and spreads the skew of frequent words (see BENCHMARKS.md).
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
IMPORT("state_put_batch")
void sluice_state_put_batch(int32_t vertex, const char *name, uint32_t name_len, const uint8_t *b, uint32_t n);
IMPORT("state_scan")
int32_t sluice_state_scan(int32_t vertex, const char *name, uint32_t name_len, uint8_t *buf, uint32_t cap);

enum { OK = 0, ERROR = 1 };
enum { V_LINES = 1, V_TOKENIZE, V_WORD, V_COUNT, V_FORMAT, V_OUT };

static const char state_name[] = "count";
#define STATE_NAME state_name, sizeof state_name - 1

/* ---- small helpers ---------------------------------------------------- */

static int32_t failf(const char *fmt, const char *arg) {
    char msg[512];
    int n = snprintf(msg, sizeof msg, fmt, arg);
    if (n < 0) n = 0;
    if (n >= (int)sizeof msg) n = sizeof msg - 1;
    sluice_fail(msg, (uint32_t)n);
    return ERROR;
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = v, p[1] = v >> 8, p[2] = v >> 16, p[3] = v >> 24;
}

/* A growable byte buffer. */
typedef struct {
    uint8_t *p;
    uint32_t len, cap;
} buf;

static void buf_reserve(buf *b, uint32_t need) {
    if (b->cap - b->len >= need) return;
    uint32_t c = b->cap ? b->cap : 256;
    while (c - b->len < need) c *= 2;
    uint8_t *p = realloc(b->p, c);
    if (!p) abort(); /* out of guest memory: the host reports the trap */
    b->p = p, b->cap = c;
}

static void buf_add(buf *b, const void *p, uint32_t n) {
    buf_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_str(buf *b, const char *s) { buf_add(b, s, (uint32_t)strlen(s)); }

/* buf_json appends s as a JSON string. */
static void buf_json(buf *b, const char *s, uint32_t n) {
    static const char hex[] = "0123456789abcdef";
    buf_add(b, "\"", 1);
    for (uint32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            buf_add(b, e, 2);
        } else if (c < 0x20) {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_add(b, e, 6);
        } else {
            buf_add(b, &c, 1);
        }
    }
    buf_add(b, "\"", 1);
}

/* ---- records and batches (docs/ABI.md section 2) ----------------------- */

typedef struct {
    const uint8_t *key, *value;
    uint32_t klen, vlen;
    int has_key;
} record;

/* next decodes the record at *pos of batch b (n bytes); 0 when malformed. */
static int next(const uint8_t *b, uint32_t n, uint32_t *pos, record *r) {
    uint32_t i = *pos;
    if (n - i < 5) return 0;
    uint8_t flags = b[i++];
    if (flags & ~3u) return 0;
    r->has_key = flags & 1;
    r->key = 0, r->klen = 0;
    if (r->has_key) {
        uint32_t k = get_u32(b + i);
        i += 4;
        if (n - i < k || n - i - k < 4) return 0;
        r->key = b + i, r->klen = k;
        i += k;
    }
    if (flags & 2) {
        if (n - i < 12) return 0;
        i += 8; /* no operator of this job uses record times */
    }
    uint32_t v = get_u32(b + i);
    i += 4;
    if (n - i < v) return 0;
    r->value = b + i, r->vlen = v;
    *pos = i + v;
    return 1;
}

/* The output batch of the chain's last operator, handed to emit when it
 * reaches 64 KiB and at the end of every call. */
static buf out;
static uint32_t out_count;

static void out_flush(void) {
    if (out_count == 0) return;
    put_u32(out.p, out_count);
    sluice_emit(out.p, out.len);
    out.len = 4, out_count = 0;
}

static void out_record(const record *r) {
    if (out.len == 0) buf_reserve(&out, 64 << 10), out.len = 4;
    buf_reserve(&out, 9 + r->klen + r->vlen);
    uint8_t *p = out.p + out.len;
    *p++ = r->has_key ? 1 : 0;
    if (r->has_key) {
        put_u32(p, r->klen);
        memcpy(p + 4, r->key, r->klen);
        p += 4 + r->klen;
    }
    put_u32(p, r->vlen);
    memcpy(p + 4, r->value, r->vlen);
    out.len = (uint32_t)(p + 4 + r->vlen - out.p);
    if (++out_count, out.len >= 64 << 10) out_flush();
}

/* ---- the count's accumulators ------------------------------------------ */

typedef struct {
    uint32_t hash, koff, klen;
    int dirty; /* changed since the last barrier */
    int64_t count;
} entry;

typedef struct {
    uint32_t *slots; /* 0 = empty, else index into ents + 1 */
    uint32_t nslots;
    entry *ents;
    uint32_t n, cap;
    buf keys;
    uint32_t *dirty;
    uint32_t ndirty, capdirty;
} table;

/* tab holds the count's accumulators; comb the combiner's counts of the
 * current call (--combine). */
static table tab, comb;
static int combine; /* --combine was passed */

static uint32_t hash(const uint8_t *p, uint32_t n) {
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h ^ h >> 15;
}

static void tab_grow(table *t) {
    uint32_t ns = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *s = calloc(ns, sizeof *s);
    if (!s) abort();
    for (uint32_t e = 0; e < t->n; e++) {
        uint32_t i = t->ents[e].hash & (ns - 1);
        while (s[i]) i = (i + 1) & (ns - 1);
        s[i] = e + 1;
    }
    free(t->slots);
    t->slots = s, t->nslots = ns;
}

/* tab_entry returns key's entry in t, adding it with count 0 when new. */
static entry *tab_entry(table *t, const uint8_t *key, uint32_t klen) {
    if (2 * (t->n + 1) > t->nslots) tab_grow(t);
    uint32_t h = hash(key, klen), mask = t->nslots - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t s = t->slots[i];
        if (!s) {
            if (t->n == t->cap) {
                t->cap = t->cap ? 2 * t->cap : 1024;
                t->ents = realloc(t->ents, t->cap * sizeof *t->ents);
                if (!t->ents) abort();
            }
            entry *e = &t->ents[t->n];
            *e = (entry){.hash = h, .koff = t->keys.len, .klen = klen};
            buf_add(&t->keys, key, klen);
            t->slots[i] = ++t->n;
            return e;
        }
        entry *e = &t->ents[s - 1];
        if (e->hash == h && e->klen == klen && memcmp(t->keys.p + e->koff, key, klen) == 0) return e;
    }
}

/* tab_clear empties t, keeping its memory. */
static void tab_clear(table *t) {
    if (t->n) memset(t->slots, 0, t->nslots * sizeof *t->slots);
    t->n = 0, t->keys.len = 0;
}

static void mark_dirty(entry *e) {
    if (e->dirty) return;
    e->dirty = 1;
    if (tab.ndirty == tab.capdirty) {
        tab.capdirty = tab.capdirty ? 2 * tab.capdirty : 1024;
        tab.dirty = realloc(tab.dirty, tab.capdirty * sizeof *tab.dirty);
        if (!tab.dirty) abort();
    }
    tab.dirty[tab.ndirty++] = (uint32_t)(e - tab.ents);
}

/* ---- the operators ------------------------------------------------------ */

static int chain[8], nchain;
static int count_at = -1; /* index of V_COUNT in chain, or -1 */

static void push(int at, const record *r);

/* letters maps ASCII letters to lower case and every other byte to 0. */
static uint8_t letters[256];

static void tokenize(int at, const record *r) {
    const uint8_t *b = r->value;
    uint32_t n = r->vlen, i = 0;
    uint8_t word[256];
    for (;;) {
        while (i < n && !letters[b[i]]) i++;
        if (i == n) return;
        uint32_t start = i, upper = 0;
        while (i < n && letters[b[i]]) upper |= letters[b[i]] ^ b[i], i++;
        record w = {.value = b + start, .vlen = i - start};
        if (upper && w.vlen <= sizeof word) {
            for (uint32_t j = 0; j < w.vlen; j++) word[j] = letters[b[start + j]];
            w.value = word;
        } else if (upper) {
            /* A word longer than the scratch buffer: lower-case a copy. */
            uint8_t *big = malloc(w.vlen);
            if (!big) abort();
            for (uint32_t j = 0; j < w.vlen; j++) big[j] = letters[b[start + j]];
            w.value = big;
            push(at + 1, &w);
            free(big);
            continue;
        }
        push(at + 1, &w);
    }
}

static void count(const record *r) {
    entry *e = tab_entry(&tab, r->key, r->klen);
    if (combine) {
        int64_t n;
        if (r->vlen != 8) abort(); /* the combiner sends 8-byte counts */
        memcpy(&n, r->value, 8);
        e->count += n;
    } else {
        e->count++;
    }
    mark_dirty(e);
}

/* The combiner flushes before its table outgrows this many words. */
#define COMBINE_MAX (64 << 10)

static int word_at = -1; /* index of V_WORD in chain, or -1 */

/* combine_flush sends each word the combiner counted as one record. */
static void combine_flush(void) {
    for (uint32_t i = 0; i < comb.n; i++) {
        entry *e = &comb.ents[i];
        record r = {.key = comb.keys.p + e->koff, .klen = e->klen, .has_key = 1,
                    .value = (const uint8_t *)&e->count, .vlen = 8};
        push(word_at + 1, &r);
    }
    tab_clear(&comb);
}

static void format(int at, const record *r) {
    static buf line;
    char num[24];
    int64_t c;
    memcpy(&c, r->value, sizeof c); /* wasm is little-endian */
    int n = snprintf(num, sizeof num, "\t%lld", (long long)c);
    line.len = 0;
    buf_add(&line, r->key, r->klen);
    buf_add(&line, num, (uint32_t)n);
    record f = {.value = line.p, .vlen = line.len};
    push(at + 1, &f);
}

static void push(int at, const record *r) {
    if (at == nchain) {
        out_record(r);
        return;
    }
    switch (chain[at]) {
    case V_TOKENIZE:
        tokenize(at, r);
        break;
    case V_WORD: {
        if (combine) {
            if (comb.n == COMBINE_MAX) combine_flush();
            tab_entry(&comb, r->value, r->vlen)->count++;
            break;
        }
        record k = *r;
        k.key = r->value, k.klen = r->vlen, k.has_key = 1;
        push(at + 1, &k);
        break;
    }
    case V_COUNT:
        count(r);
        break;
    case V_FORMAT:
        format(at, r);
        break;
    }
}

/* ---- exports ------------------------------------------------------------ */

EXPORT("sluice_abi_v1") void abi_v1(void) {}
EXPORT("sluice_alloc") void *s_alloc(uint32_t n) { return malloc(n); }
EXPORT("sluice_free") void s_free(void *p) { free(p); }

/* sluice_plan: the arguments are `--input PATH` (or --input=PATH), repeated,
 * and --combine. */
EXPORT("sluice_plan") int32_t s_plan(const uint8_t *b, uint32_t n) {
    if (n < 4) return failf("plan: arguments: %s", "truncated batch");
    uint32_t count = get_u32(b), pos = 4;
    buf paths = {0}, arg = {0};
    buf_str(&paths, "[");
    int inputs = 0, want_value = 0;
    for (uint32_t i = 0; i < count; i++) {
        record r;
        if (!next(b, n, &pos, &r)) return failf("plan: arguments: %s", "malformed batch");
        arg.len = 0;
        buf_add(&arg, r.value, r.vlen);
        buf_add(&arg, "", 1); /* NUL-terminate for the messages */
        const char *a = (const char *)arg.p, *v = 0;
        uint32_t vlen = 0;
        if (want_value) {
            v = a, vlen = r.vlen, want_value = 0;
        } else if (strcmp(a, "--input") == 0 || strcmp(a, "-input") == 0) {
            want_value = 1;
            continue;
        } else if (strncmp(a, "--input=", 8) == 0 || strncmp(a, "-input=", 7) == 0) {
            v = strchr(a, '=') + 1, vlen = r.vlen - (uint32_t)(v - a);
        } else if (strcmp(a, "--combine") == 0 && r.vlen == 9) {
            continue; /* read again by every task, from its task info */
        } else {
            return failf("unknown argument %s: wordcount-c takes --input PATH (repeatable) and --combine", a);
        }
        if (inputs++) buf_str(&paths, ",");
        buf_json(&paths, v, vlen);
    }
    if (want_value) return failf("%s", "--input needs a value: pass -- --input PATH");
    if (!inputs) return failf("%s", "no input: pass -- --input PATH");
    buf_str(&paths, "]");

    buf g = {0};
    buf_str(&g, "{\"name\":\"wordcount\",\"vertices\":["
                "{\"id\":1,\"name\":\"lines\",\"kind\":\"source\",\"connector\":\"text\",\"config\":{\"paths\":");
    buf_json(&g, (const char *)paths.p, paths.len);
    buf_str(&g, "}},"
                "{\"id\":2,\"name\":\"tokenize\",\"kind\":\"flat_map\"},"
                "{\"id\":3,\"name\":\"word\",\"kind\":\"key_by\"},"
                "{\"id\":4,\"name\":\"count\",\"kind\":\"reduce\",\"config\":{\"emit\":\"final\"}},"
                "{\"id\":5,\"name\":\"format\",\"kind\":\"map\"},"
                "{\"id\":6,\"name\":\"out\",\"kind\":\"sink\",\"connector\":\"collect\"}],"
                "\"edges\":["
                "{\"source\":1,\"target\":2,\"partitioner\":\"forward\"},"
                "{\"source\":2,\"target\":3,\"partitioner\":\"forward\"},"
                "{\"source\":3,\"target\":4,\"partitioner\":\"hash\"},"
                "{\"source\":4,\"target\":5,\"partitioner\":\"forward\"},"
                "{\"source\":5,\"target\":6,\"partitioner\":\"forward\"}]}");
    sluice_set_plan((const char *)g.p, g.len);
    free(g.p), free(paths.p), free(arg.p);
    return OK;
}

/* restore loads the count's keyed state (there is some after a restore). */
static void restore(void) {
    buf b = {0};
    buf_reserve(&b, 64 << 10);
    for (;;) {
        int32_t n = sluice_state_scan(V_COUNT, STATE_NAME, b.p, b.cap);
        if (n == 0) break;
        if (n < 0) {
            buf_reserve(&b, (uint32_t)-n);
            continue;
        }
        uint32_t pos = 4, cnt = get_u32(b.p);
        for (uint32_t i = 0; i < cnt; i++) {
            record r;
            if (!next(b.p, (uint32_t)n, &pos, &r) || !r.has_key || r.vlen != 8) abort();
            entry *e = tab_entry(&tab, r.key, r.klen);
            memcpy(&e->count, r.value, 8);
        }
    }
    free(b.p);
}

/* has_arg reports whether the JSON string array at s (just after its "[")
 * holds the string want, which has no characters JSON escapes. */
static int has_arg(const char *s, const char *want) {
    size_t wn = strlen(want);
    while (*s == '"') {
        const char *p = ++s;
        while (*s && *s != '"') s += (*s == '\\' && s[1]) ? 2 : 1;
        if (!*s) return 0;
        if ((size_t)(s - p) == wn && memcmp(p, want, wn) == 0) return 1;
        s++;
        if (*s == ',') s++;
    }
    return 0;
}

/* sluice_open reads "chain" and "args" from the task info JSON. */
EXPORT("sluice_open") int32_t s_open(const uint8_t *p, uint32_t n) {
    for (int c = 'a'; c <= 'z'; c++) letters[c] = (uint8_t)c, letters[c - 'a' + 'A'] = (uint8_t)c;
    char *info = malloc(n + 1);
    if (!info) abort();
    memcpy(info, p, n);
    info[n] = 0;
    char *s = strstr(info, "\"chain\":[");
    if (!s) {
        free(info);
        return failf("%s", "open: the task info has no chain");
    }
    s += 9;
    while (*s && *s != ']') {
        char *end;
        long id = strtol(s, &end, 10);
        if (end == s || nchain == (int)(sizeof chain / sizeof chain[0]) || id < V_TOKENIZE || id > V_FORMAT) {
            free(info);
            return failf("open: the chain names an operator this job does not run in the guest: %s", s);
        }
        if (id == V_COUNT) count_at = nchain;
        if (id == V_WORD) word_at = nchain;
        chain[nchain++] = (int)id;
        s = end;
        if (*s == ',') s++;
    }
    char *args = strstr(info, "\"args\":[");
    combine = args && has_arg(args + 8, "--combine");
    free(info);
    if (count_at >= 0) restore();
    return OK;
}

EXPORT("sluice_process") int32_t s_process(const uint8_t *b, uint32_t n) {
    if (n < 4) return failf("process: %s", "truncated batch");
    uint32_t cnt = get_u32(b), pos = 4;
    for (uint32_t i = 0; i < cnt; i++) {
        record r;
        if (!next(b, n, &pos, &r)) return failf("process: %s", "malformed batch");
        push(0, &r);
    }
    if (pos != n) return failf("process: %s", "trailing bytes after the last record");
    if (word_at >= 0) combine_flush();
    out_flush();
    return OK;
}

/* sluice_barrier writes the counts changed since the last barrier. */
EXPORT("sluice_barrier") int32_t s_barrier(int64_t checkpoint_id) {
    (void)checkpoint_id;
    if (count_at < 0 || tab.ndirty == 0) return OK;
    buf b = {0};
    buf_add(&b, "\0\0\0\0", 4);
    uint32_t cnt = 0;
    for (uint32_t i = 0; i < tab.ndirty; i++) {
        entry *e = &tab.ents[tab.dirty[i]];
        e->dirty = 0;
        uint8_t h[5] = {1};
        put_u32(h + 1, e->klen);
        buf_add(&b, h, 5);
        buf_add(&b, tab.keys.p + e->koff, e->klen);
        put_u32(h, 8);
        buf_add(&b, h, 4);
        buf_add(&b, &e->count, 8);
        if (++cnt, b.len >= 1 << 20 || i + 1 == tab.ndirty) {
            put_u32(b.p, cnt);
            sluice_state_put_batch(V_COUNT, STATE_NAME, b.p, b.len);
            b.len = 4, cnt = 0;
        }
    }
    tab.ndirty = 0;
    free(b.p);
    return OK;
}

/* sluice_end_input emits every word's count (the reduce emits at the end). */
EXPORT("sluice_end_input") int32_t s_end_input(void) {
    if (word_at >= 0) combine_flush(); /* nothing: every call flushed it */
    if (count_at >= 0) {
        for (uint32_t i = 0; i < tab.n; i++) {
            entry *e = &tab.ents[i];
            record r = {.key = tab.keys.p + e->koff, .klen = e->klen, .has_key = 1,
                        .value = (const uint8_t *)&e->count, .vlen = 8};
            push(count_at + 1, &r);
        }
    }
    out_flush();
    return OK;
}

EXPORT("sluice_close") int32_t s_close(void) { return OK; }
