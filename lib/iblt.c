/*
 * iblt.c - invertible Bloom lookup tables and the strata estimator, for
 * exact set reconciliation (Goodrich & Mitzenmacher, "Invertible Bloom
 * Lookup Tables", 2011; Eppstein, Goodrich, Uyeda & Varghese, "What's the
 * Difference? Efficient Set Reconciliation without Prior Context",
 * SIGCOMM 2011).
 *
 * Structure
 *   cells cells of 16 bytes: a signed count, the XOR of a 32-bit check
 *   hash of each id, and the XOR of the 64-bit ids. The table is split into
 *   k sub-tables of cells / k cells; id x goes to cell
 *       j * (cells / k) + fastrange(mix(x + seed_j), cells / k)
 *   of sub-table j, so its k cells are always distinct. Insert adds 1 to
 *   the counts, delete subtracts; both XOR the id and its check in.
 *
 * Reconciliation
 *   Both sides build a table of the same shape and seed over their ids;
 *   A - B (cell-wise) cancels every common id and leaves those of A only
 *   with +1 and of B only with -1. A cell whose count is +-1 and whose
 *   check equals check(id) is "pure": it holds one id, which is listed and
 *   removed from its k cells, possibly making others pure (peeling, as in
 *   peel.c but on a table that is mostly empty). Decoding succeeds when
 *   every cell ends empty; with k = 4 that happens w.h.p. when the cells
 *   are above ~1.3 times the difference (the 4-hypergraph's peeling
 *   threshold, 1/0.772). A false "pure" verdict needs a 32-bit check
 *   collision: 2^-32 per test, and the caller can verify decoded ids
 *   against its own set.
 *
 * Strata estimator
 *   32 tables of 80 cells; id x goes to stratum tz(mix(x)) (trailing
 *   zeros, capped at 31), i.e. stratum i receives 2^-(i+1) of the ids.
 *   To estimate |A xor B|, subtract stratum by stratum from the sparsest
 *   down, decoding each; when stratum i fails, the ids counted in the
 *   strata above stand for 2^-(i+1) of the difference (the paper's
 *   estimator).
 *
 * Memory: 16 bytes per cell; decoding copies the table. Wire formats:
 * docs/FORMAT.md ("Reconciliation messages").
 */
#include <string.h> /* memcpy, memset */

#include "hash.h"
#include "internal.h"

/*==========================================================================
 * Types
 *==========================================================================*/

typedef struct cell {
    int32_t count;
    uint32_t check;
    uint64_t id;
} cell;

struct bk_iblt {
    cell *cells;
    uint64_t ncells;    /* a multiple of k */
    uint64_t sub;       /* ncells / k */
    uint32_t k;
    uint64_t seed;
};

struct bk_strata {
    bk_iblt *stratum[BK_STRATA_COUNT];
    uint64_t seed;
};

#define STRATA_HASHES 4
#define DEFAULT_HASHES 4
#define MAX_HASHES 8
#define MAX_CELLS (UINT64_C(1) << 32)

/* Wire format */
#define IBLT_MAGIC "\x89" "BKIBLT\n"
#define STRATA_MAGIC "\x89" "BKSTRA\n"
#define WIRE_VERSION 1u
#define IBLT_HEADER 32
#define STRATA_HEADER 32
#define CELL_BYTES 16
#define TRAILER 8

/*==========================================================================
 * Hashing of ids
 *==========================================================================*/

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static inline uint32_t check_of(uint64_t id, uint64_t seed)
{
    return (uint32_t)(mix64(id ^ seed ^ UINT64_C(0x5851F42D4C957F2D)) >> 32);
}

static inline uint64_t cell_of(const bk_iblt *t, uint64_t id, uint32_t j)
{
    uint64_t h = mix64(id + t->seed + (uint64_t)(j + 1) * UINT64_C(0x9E3779B97F4A7C15));
    return (uint64_t)j * t->sub + bk__fastrange64(h, t->sub);
}

static inline unsigned stratum_of(uint64_t id, uint64_t seed)
{
    uint64_t h = mix64(id ^ seed ^ UINT64_C(0xD1B54A32D192ED03));
    unsigned tz = h ? (unsigned)__builtin_ctzll(h) : 63u;
    return tz < BK_STRATA_COUNT - 1 ? tz : BK_STRATA_COUNT - 1;
}

uint64_t bk_iblt_key_id(const void *key, size_t len, uint64_t seed)
{
    return bk_hash_key(key, len, seed).lo;
}

/*==========================================================================
 * Tables
 *==========================================================================*/

int bk_iblt_create(bk_iblt **out, uint64_t cells, uint32_t hashes,
                   uint64_t seed)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (hashes == 0) hashes = DEFAULT_HASHES;
    if (hashes < 3 || hashes > MAX_HASHES) return BK_EPARAM;
    if (cells < hashes) cells = hashes;
    if (cells > MAX_CELLS) return BK_ESIZE;
    cells = (cells + hashes - 1) / hashes * hashes;
    if (cells > MAX_CELLS) return BK_ESIZE;
    bk_iblt *t = bk__calloc(1, sizeof(*t));
    if (t == NULL) return BK_ENOMEM;
    t->cells = bk__calloc((size_t)cells, sizeof(cell));
    if (t->cells == NULL) {
        bk__free(t);
        return BK_ENOMEM;
    }
    t->ncells = cells;
    t->sub = cells / hashes;
    t->k = hashes;
    t->seed = seed;
    *out = t;
    return BK_OK;
}

uint64_t bk_iblt_cells_for(uint64_t d)
{
    if (d > (MAX_CELLS - 32) / 2) return MAX_CELLS;
    return 2 * d + 32;
}

void bk_iblt_free(bk_iblt *t)
{
    if (t == NULL) return;
    bk__free(t->cells);
    bk__free(t);
}

static inline void update(bk_iblt *t, uint64_t id, int32_t delta)
{
    uint32_t check = check_of(id, t->seed);
    for (uint32_t j = 0; j < t->k; j++) {
        cell *c = &t->cells[cell_of(t, id, j)];
        /* wrap-around arithmetic: counts of a corrupt table stay defined */
        c->count = (int32_t)((uint32_t)c->count + (uint32_t)delta);
        c->check ^= check;
        c->id ^= id;
    }
}

void bk_iblt_insert(bk_iblt *t, uint64_t id) { update(t, id, 1); }
void bk_iblt_delete(bk_iblt *t, uint64_t id) { update(t, id, -1); }

int bk_iblt_subtract(bk_iblt *a, const bk_iblt *b)
{
    if (a == NULL || b == NULL) return BK_EINVAL;
    if (a->ncells != b->ncells || a->k != b->k || a->seed != b->seed)
        return BK_EINCOMPAT;
    for (uint64_t i = 0; i < a->ncells; i++) {
        a->cells[i].count = (int32_t)((uint32_t)a->cells[i].count -
                                      (uint32_t)b->cells[i].count);
        a->cells[i].check ^= b->cells[i].check;
        a->cells[i].id ^= b->cells[i].id;
    }
    return BK_OK;
}

static inline int pure(const bk_iblt *t, const cell *c)
{
    return (c->count == 1 || c->count == -1) && c->check == check_of(c->id, t->seed);
}

/* Peel t's cells in place (t is a private copy). */
static int peel(bk_iblt *t, uint64_t *only_a, size_t *n_a, uint64_t *only_b,
                size_t *n_b, uint32_t *queue)
{
    size_t na = 0, nb = 0;
    uint64_t queued = 0;
    for (uint64_t i = 0; i < t->ncells; i++)
        if (pure(t, &t->cells[i])) queue[queued++] = (uint32_t)i;
    /* A genuine table lists at most one id per cell (the cell it was
     * peeled from is then empty for good); a forged one is stopped there. */
    while (queued > 0 && na + nb < t->ncells) {
        cell *c = &t->cells[queue[--queued]];
        if (!pure(t, c)) continue;
        uint64_t id = c->id;
        int32_t sign = c->count;
        if (sign > 0) only_a[na++] = id;
        else only_b[nb++] = id;
        uint32_t check = check_of(id, t->seed);
        for (uint32_t j = 0; j < t->k; j++) {
            uint64_t x = cell_of(t, id, j);
            cell *d = &t->cells[x];
            d->count = (int32_t)((uint32_t)d->count - (uint32_t)sign);
            d->check ^= check;
            d->id ^= id;
            /* a cell can be queued more than once only if it turns pure
             * again; the queue has room for one entry per listed id k
             * times plus the initial scan */
            if (pure(t, d) && queued < t->ncells * (t->k + 1)) queue[queued++] = (uint32_t)x;
        }
    }
    *n_a = na;
    *n_b = nb;
    for (uint64_t i = 0; i < t->ncells; i++) {
        const cell *c = &t->cells[i];
        if (c->count != 0 || c->check != 0 || c->id != 0) return BK_EDECODE;
    }
    return BK_OK;
}

int bk_iblt_decode(const bk_iblt *t, uint64_t *only_a, size_t *n_a,
                   uint64_t *only_b, size_t *n_b, size_t cap)
{
    if (t == NULL || only_a == NULL || only_b == NULL || n_a == NULL || n_b == NULL)
        return BK_EINVAL;
    *n_a = *n_b = 0;
    if (cap < t->ncells) return BK_ESIZE;
    bk_iblt copy = *t;
    uint32_t *queue = NULL;
    if ((size_t)t->ncells > SIZE_MAX / sizeof(uint32_t) / (t->k + 1)) return BK_ESIZE;
    copy.cells = bk__malloc((size_t)t->ncells * sizeof(cell));
    queue = bk__malloc((size_t)t->ncells * (t->k + 1) * sizeof(uint32_t));
    int rc = BK_ENOMEM;
    if (copy.cells != NULL && queue != NULL) {
        memcpy(copy.cells, t->cells, (size_t)t->ncells * sizeof(cell));
        rc = peel(&copy, only_a, n_a, only_b, n_b, queue);
    }
    bk__free(copy.cells);
    bk__free(queue);
    return rc;
}

uint64_t bk_iblt_cells(const bk_iblt *t) { return t->ncells; }
uint32_t bk_iblt_hashes(const bk_iblt *t) { return t->k; }
uint64_t bk_iblt_seed(const bk_iblt *t) { return t->seed; }

/*==========================================================================
 * Wire format (docs/FORMAT.md): little-endian, checksummed
 *==========================================================================*/

static int checksum_ok(const unsigned char *b, size_t len)
{
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
    (void)b;
    (void)len;
    return 1; /* let mutated inputs reach the checks behind it */
#else
    return bk__get_le64(b + len - TRAILER) == bk__xxh64(b, len - TRAILER, 0);
#endif
}

/* A message's frame: a zeroed header of `header` bytes that starts with
 * the magic and the wire version, the body, and the trailer, a checksum of
 * all that precedes it. */
static unsigned char *frame_start(void *buf, size_t header, const char *magic)
{
    unsigned char *b = buf;
    memset(b, 0, header);
    memcpy(b, magic, 8);
    bk__put_le32(b + 8, WIRE_VERSION);
    return b;
}

static void frame_seal(unsigned char *b, size_t len)
{
    bk__put_le64(b + len - TRAILER, bk__xxh64(b, len - TRAILER, 0));
}

/* len bytes that may hold a message of this header and magic at the wire
 * version: BK_OK, else BK_ETRUNC, BK_EMAGIC or BK_EVERSION. */
static int frame_check_start(const unsigned char *b, size_t len, size_t header,
                             const char *magic)
{
    if (len < header + TRAILER) return BK_ETRUNC;
    if (memcmp(b, magic, 8) != 0) return BK_EMAGIC;
    if (bk__get_le32(b + 8) != WIRE_VERSION) return BK_EVERSION;
    return BK_OK;
}

/* A whole message of `want` bytes, checksum included: BK_OK, else
 * BK_ETRUNC, BK_ECORRUPT (longer) or BK_ECHECKSUM. */
static int frame_check_whole(const unsigned char *b, size_t len, uint64_t want)
{
    if (len < want) return BK_ETRUNC;
    if (len > want) return BK_ECORRUPT;
    if (!checksum_ok(b, len)) return BK_ECHECKSUM;
    return BK_OK;
}

static void put_cells(unsigned char *p, const bk_iblt *t)
{
    for (uint64_t i = 0; i < t->ncells; i++, p += CELL_BYTES) {
        bk__put_le32(p, (uint32_t)t->cells[i].count);
        bk__put_le32(p + 4, t->cells[i].check);
        bk__put_le64(p + 8, t->cells[i].id);
    }
}

static void get_cells(bk_iblt *t, const unsigned char *p)
{
    for (uint64_t i = 0; i < t->ncells; i++, p += CELL_BYTES) {
        t->cells[i].count = (int32_t)bk__get_le32(p);
        t->cells[i].check = bk__get_le32(p + 4);
        t->cells[i].id = bk__get_le64(p + 8);
    }
}

size_t bk_iblt_serialized_size(const bk_iblt *t)
{
    return IBLT_HEADER + (size_t)t->ncells * CELL_BYTES + TRAILER;
}

int bk_iblt_serialize(const bk_iblt *t, void *buf, size_t cap)
{
    if (t == NULL || buf == NULL) return BK_EINVAL;
    size_t len = bk_iblt_serialized_size(t);
    if (cap < len) return BK_ESIZE;
    unsigned char *b = frame_start(buf, IBLT_HEADER, IBLT_MAGIC);
    bk__put_le32(b + 12, t->k);
    bk__put_le64(b + 16, t->ncells);
    bk__put_le64(b + 24, t->seed);
    put_cells(b + IBLT_HEADER, t);
    frame_seal(b, len);
    return BK_OK;
}

int bk_iblt_deserialize(bk_iblt **out, const void *buf, size_t len)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (buf == NULL) return BK_EINVAL;
    const unsigned char *b = buf;
    int rc = frame_check_start(b, len, IBLT_HEADER, IBLT_MAGIC);
    if (rc != BK_OK) return rc;
    uint32_t k = bk__get_le32(b + 12);
    uint64_t cells = bk__get_le64(b + 16);
    if (k < 3 || k > MAX_HASHES || cells < k || cells > MAX_CELLS || cells % k != 0)
        return BK_ECORRUPT;
    rc = frame_check_whole(b, len, IBLT_HEADER + cells * CELL_BYTES + TRAILER);
    if (rc != BK_OK) return rc;
    bk_iblt *t;
    rc = bk_iblt_create(&t, cells, k, bk__get_le64(b + 24));
    if (rc != BK_OK) return rc;
    get_cells(t, b + IBLT_HEADER);
    *out = t;
    return BK_OK;
}

/*==========================================================================
 * Strata estimator
 *==========================================================================*/

int bk_strata_create(bk_strata **out, uint64_t seed)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    bk_strata *s = bk__calloc(1, sizeof(*s));
    if (s == NULL) return BK_ENOMEM;
    s->seed = seed;
    for (int i = 0; i < BK_STRATA_COUNT; i++) {
        int rc = bk_iblt_create(&s->stratum[i], BK_STRATA_CELLS, STRATA_HASHES, seed);
        if (rc != BK_OK) {
            bk_strata_free(s);
            return rc;
        }
    }
    *out = s;
    return BK_OK;
}

void bk_strata_free(bk_strata *s)
{
    if (s == NULL) return;
    for (int i = 0; i < BK_STRATA_COUNT; i++) bk_iblt_free(s->stratum[i]);
    bk__free(s);
}

void bk_strata_insert(bk_strata *s, uint64_t id)
{
    update(s->stratum[stratum_of(id, s->seed)], id, 1);
}

int bk_strata_estimate(const bk_strata *a, const bk_strata *b,
                       uint64_t *difference)
{
    if (a == NULL || b == NULL || difference == NULL) return BK_EINVAL;
    if (a->seed != b->seed) return BK_EINCOMPAT;
    uint64_t ids_a[BK_STRATA_CELLS], ids_b[BK_STRATA_CELLS];
    uint64_t count = 0;
    bk_iblt *diff;
    int rc = bk_iblt_create(&diff, BK_STRATA_CELLS, STRATA_HASHES, a->seed);
    if (rc != BK_OK) return rc;
    for (int i = BK_STRATA_COUNT - 1; i >= 0; i--) {
        memcpy(diff->cells, a->stratum[i]->cells, BK_STRATA_CELLS * sizeof(cell));
        bk_iblt_subtract(diff, b->stratum[i]);
        size_t na, nb;
        rc = bk_iblt_decode(diff, ids_a, &na, ids_b, &nb, BK_STRATA_CELLS);
        if (rc == BK_EDECODE) {
            /* strata above i hold 2^-(i+1) of the difference; when even
             * the sparsest failed, all we know is that it is large */
            uint64_t seen = count > 0 ? count : BK_STRATA_CELLS;
            *difference = seen << (i + 1);
            bk_iblt_free(diff);
            return BK_OK;
        }
        if (rc != BK_OK) {
            bk_iblt_free(diff);
            return rc;
        }
        count += na + nb;
    }
    bk_iblt_free(diff);
    *difference = count;
    return BK_OK;
}

size_t bk_strata_serialized_size(const bk_strata *s)
{
    (void)s;
    return STRATA_HEADER + (size_t)BK_STRATA_COUNT * BK_STRATA_CELLS * CELL_BYTES +
           TRAILER;
}

int bk_strata_serialize(const bk_strata *s, void *buf, size_t cap)
{
    if (s == NULL || buf == NULL) return BK_EINVAL;
    size_t len = bk_strata_serialized_size(s);
    if (cap < len) return BK_ESIZE;
    unsigned char *b = frame_start(buf, STRATA_HEADER, STRATA_MAGIC);
    bk__put_le32(b + 12, STRATA_HASHES);
    bk__put_le32(b + 16, BK_STRATA_COUNT);
    bk__put_le32(b + 20, BK_STRATA_CELLS);
    bk__put_le64(b + 24, s->seed);
    for (int i = 0; i < BK_STRATA_COUNT; i++)
        put_cells(b + STRATA_HEADER + (size_t)i * BK_STRATA_CELLS * CELL_BYTES,
                  s->stratum[i]);
    frame_seal(b, len);
    return BK_OK;
}

int bk_strata_deserialize(bk_strata **out, const void *buf, size_t len)
{
    if (out == NULL) return BK_EINVAL;
    *out = NULL;
    if (buf == NULL) return BK_EINVAL;
    const unsigned char *b = buf;
    int rc = frame_check_start(b, len, STRATA_HEADER, STRATA_MAGIC);
    if (rc != BK_OK) return rc;
    if (bk__get_le32(b + 12) != STRATA_HASHES || bk__get_le32(b + 16) != BK_STRATA_COUNT ||
        bk__get_le32(b + 20) != BK_STRATA_CELLS)
        return BK_ECORRUPT;
    rc = frame_check_whole(b, len, bk_strata_serialized_size(NULL));
    if (rc != BK_OK) return rc;
    bk_strata *s;
    rc = bk_strata_create(&s, bk__get_le64(b + 24));
    if (rc != BK_OK) return rc;
    for (int i = 0; i < BK_STRATA_COUNT; i++)
        get_cells(s->stratum[i], b + STRATA_HEADER + (size_t)i * BK_STRATA_CELLS * CELL_BYTES);
    *out = s;
    return BK_OK;
}

/*==========================================================================
 * The exchange, both sides in one process
 *
 * A sends its strata estimator; B estimates the difference d and sends an
 * IBLT of bk_iblt_cells_for(d) cells; A subtracts its own table of the
 * same shape and decodes. When decoding fails B sends a table twice as
 * large (another round). Every message goes through its wire format, so
 * the byte counts are what two sites would send.
 *==========================================================================*/

static int send_strata(const uint64_t *ids, size_t n, uint64_t seed,
                       bk_strata **received, size_t *bytes)
{
    bk_strata *s;
    int rc = bk_strata_create(&s, seed);
    if (rc != BK_OK) return rc;
    for (size_t i = 0; i < n; i++) bk_strata_insert(s, ids[i]);
    size_t len = bk_strata_serialized_size(s);
    unsigned char *wire = bk__malloc(len);
    if (wire == NULL) rc = BK_ENOMEM;
    if (rc == BK_OK) rc = bk_strata_serialize(s, wire, len);
    if (rc == BK_OK) rc = bk_strata_deserialize(received, wire, len);
    if (rc == BK_OK) *bytes += len;
    bk__free(wire);
    bk_strata_free(s);
    return rc;
}

static int build_iblt(const uint64_t *ids, size_t n, uint64_t cells,
                      uint64_t seed, bk_iblt **out)
{
    int rc = bk_iblt_create(out, cells, DEFAULT_HASHES, seed);
    if (rc != BK_OK) return rc;
    for (size_t i = 0; i < n; i++) bk_iblt_insert(*out, ids[i]);
    return BK_OK;
}

static int send_iblt(const bk_iblt *t, bk_iblt **received, size_t *bytes)
{
    size_t len = bk_iblt_serialized_size(t);
    unsigned char *wire = bk__malloc(len);
    if (wire == NULL) return BK_ENOMEM;
    int rc = bk_iblt_serialize(t, wire, len);
    if (rc == BK_OK) rc = bk_iblt_deserialize(received, wire, len);
    if (rc == BK_OK) *bytes += len;
    bk__free(wire);
    return rc;
}

int bk_reconcile(const uint64_t *ids_a, size_t na, const uint64_t *ids_b,
                 size_t nb, uint64_t seed, uint64_t *only_a, size_t *n_only_a,
                 uint64_t *only_b, size_t *n_only_b, bk_reconcile_stats *stats)
{
    bk_reconcile_stats st;
    bk_strata *sa = NULL, *sb = NULL;
    bk_iblt *tb = NULL, *received = NULL, *ta = NULL;
    uint64_t *got_a = NULL, *got_b = NULL;
    int rc;
    if ((na > 0 && (ids_a == NULL || only_a == NULL)) ||
        (nb > 0 && (ids_b == NULL || only_b == NULL)) || n_only_a == NULL ||
        n_only_b == NULL)
        return BK_EINVAL;
    *n_only_a = *n_only_b = 0;
    memset(&st, 0, sizeof(st));

    /* A -> B: the estimator; B estimates */
    rc = send_strata(ids_a, na, seed, &sa, &st.strata_bytes);
    if (rc != BK_OK) goto done;
    rc = bk_strata_create(&sb, seed);
    if (rc != BK_OK) goto done;
    for (size_t i = 0; i < nb; i++) bk_strata_insert(sb, ids_b[i]);
    rc = bk_strata_estimate(sa, sb, &st.estimate);
    if (rc != BK_OK) goto done;

    /* B -> A: tables until one decodes; the difference is at most
     * na + nb, so a table of cells_for(na + nb) is the last worth trying */
    uint64_t most = bk_iblt_cells_for((uint64_t)na + nb);
    uint64_t cells = bk_iblt_cells_for(st.estimate);
    if (cells > most) cells = most;
    for (;;) {
        st.rounds++;
        st.cells = cells;
        rc = build_iblt(ids_b, nb, cells, seed, &tb);
        if (rc == BK_OK) rc = send_iblt(tb, &received, &st.iblt_bytes);
        if (rc == BK_OK) rc = build_iblt(ids_a, na, cells, seed, &ta);
        if (rc == BK_OK) rc = bk_iblt_subtract(ta, received);
        uint64_t room = rc == BK_OK ? bk_iblt_cells(ta) : 0;
        if (rc == BK_OK) {
            got_a = bk__malloc((size_t)room * sizeof(uint64_t));
            got_b = bk__malloc((size_t)room * sizeof(uint64_t));
            if (got_a == NULL || got_b == NULL) rc = BK_ENOMEM;
        }
        size_t ga = 0, gb = 0;
        if (rc == BK_OK) rc = bk_iblt_decode(ta, got_a, &ga, got_b, &gb, (size_t)room);
        if (rc == BK_OK) {
            if (ga > na || gb > nb) {
                rc = BK_EDECODE; /* a forged or colliding table: cannot be */
            } else {
                memcpy(only_a, got_a, ga * sizeof(uint64_t));
                memcpy(only_b, got_b, gb * sizeof(uint64_t));
                *n_only_a = ga;
                *n_only_b = gb;
            }
        }
        bk_iblt_free(tb);
        bk_iblt_free(received);
        bk_iblt_free(ta);
        bk__free(got_a);
        bk__free(got_b);
        tb = received = ta = NULL;
        got_a = got_b = NULL;
        if (rc != BK_EDECODE || cells >= most) break;
        cells = cells > most / 2 ? most : 2 * cells;
    }
    /* A -> B: the ids of B's keys that A lacks (B then sends those keys) */
    if (rc == BK_OK) st.request_bytes = *n_only_b * sizeof(uint64_t);

done:
    bk_strata_free(sa);
    bk_strata_free(sb);
    if (stats != NULL) *stats = st;
    return rc;
}
