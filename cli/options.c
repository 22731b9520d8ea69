/*
 * options.c - the command line of every subcommand.
 *
 * One table lists every option (long name, short letter, whether it takes a
 * value); each subcommand passes the set it accepts. Options and positional
 * arguments may come in any order; "--" ends the options and "-" is a
 * positional (standard input). Values follow as "--name VALUE",
 * "--name=VALUE", "-j VALUE" or "-jVALUE"; flags without values cluster
 * ("-0q"). Every problem is reported in one line naming the subcommand and
 * the option, and parsing stops there. Two entries may share a name when no
 * subcommand accepts both (--type of a file, --type of a cluster filter):
 * the lookup picks the one the subcommand accepts.
 */
#include <errno.h>  /* errno, ERANGE */
#include <math.h>   /* isfinite */
#include <stdlib.h> /* strtoull, strtod, calloc */
#include <string.h> /* strcmp, strncmp, strchr */

#include "cli.h"

typedef struct optdef {
    enum cli_opt id;
    const char *name; /* long name, without "--" */
    char letter;      /* short name, 0 for none */
    int takes_value;
} optdef;

static const optdef optdefs[] = {
    {OPT_HELP, "help", 'h', 0},
    {OPT_QUIET, "quiet", 'q', 0},
    {OPT_CAPACITY, "capacity", 'n', 1},
    {OPT_ERROR, "error", 'e', 1},
    {OPT_TYPE, "type", 't', 1},
    {OPT_SEED, "seed", 0, 1},
    {OPT_COUNTER_BITS, "counter-bits", 0, 1},
    {OPT_REGIONS, "regions", 0, 1},
    {OPT_BUCKET_SIZE, "bucket-size", 0, 1},
    {OPT_FINGERPRINT_BITS, "fingerprint-bits", 0, 1},
    {OPT_MAX_KICKS, "max-kicks", 0, 1},
    {OPT_EXPANSION, "expansion", 0, 1},
    {OPT_NONSCALING, "nonscaling", 0, 0},
    {OPT_WINDOW, "window", 0, 1},
    {OPT_GENERATIONS, "generations", 0, 1},
    {OPT_WINDOW_BY_COUNT, "window-by-count", 0, 0},
    {OPT_NUL, "null", '0', 0},
    {OPT_FIELD, "field", 'f', 1},
    {OPT_DELIMITER, "delimiter", 'd', 1},
    {OPT_SKIP_EMPTY, "skip-empty", 0, 0},
    {OPT_JOBS, "jobs", 'j', 1},
    {OPT_INVERT, "invert", 'v', 0},
    {OPT_COUNT, "count", 0, 0},
    {OPT_TOTAL, "total", 'c', 0},
    {OPT_JSON, "json", 0, 0},
    {OPT_FORCE, "force", 0, 0},
    {OPT_SAVE, "save", 0, 1},
    {OPT_NODES, "nodes", 0, 1},
    {OPT_SHARDS, "shards", 0, 1},
    {OPT_CLUSTER_TYPE, "type", 't', 1},
    {OPT_STRICT, "strict", 0, 0},
    {OPT_NO_DECOMPRESS, "no-decompress", 0, 0},
    {OPT_SPLIT, "split", 0, 0},
    {OPT_AUTO_CLEAR, "auto-clear", 0, 1},
    {OPT_ROTATE, "rotate", 0, 0},
    {OPT_MAX_TTL, "max-ttl", 0, 1},
    {OPT_TTL, "ttl", 0, 1},
    {OPT_SLOTS, "slots", 0, 1},
};
#define NOPTDEFS (sizeof(optdefs) / sizeof(optdefs[0]))

/* Family options and the one family each belongs to. */
static const struct {
    enum cli_opt opt;
    bk_family family;
} family_options[] = {
    {OPT_SPLIT, BK_FAMILY_BLOCKED},
    {OPT_COUNTER_BITS, BK_FAMILY_COUNTING},
    {OPT_REGIONS, BK_FAMILY_DELETABLE},
    {OPT_BUCKET_SIZE, BK_FAMILY_CUCKOO},
    {OPT_FINGERPRINT_BITS, BK_FAMILY_CUCKOO},
    {OPT_MAX_KICKS, BK_FAMILY_CUCKOO},
    {OPT_EXPANSION, BK_FAMILY_SCALABLE},
    {OPT_NONSCALING, BK_FAMILY_SCALABLE},
    {OPT_WINDOW, BK_FAMILY_WINDOW},
    {OPT_GENERATIONS, BK_FAMILY_WINDOW},
    {OPT_WINDOW_BY_COUNT, BK_FAMILY_WINDOW},
    {OPT_MAX_TTL, BK_FAMILY_TTL},
    {OPT_GENERATIONS, BK_FAMILY_TTL},
    {OPT_SLOTS, BK_FAMILY_TTL},
};
#define NFAMILY_OPTIONS (sizeof(family_options) / sizeof(family_options[0]))

/* The names --type accepts, in the order --help lists them. */
static const struct {
    const char *name;
    bk_family family;
} type_names[] = {
    {"blocked", BK_FAMILY_BLOCKED},     {"classic", BK_FAMILY_BLOOM},
    {"counting", BK_FAMILY_COUNTING},   {"deletable", BK_FAMILY_DELETABLE},
    {"cuckoo", BK_FAMILY_CUCKOO},       {"scalable", BK_FAMILY_SCALABLE},
    {"window", BK_FAMILY_WINDOW},
    {"static", BK_FAMILY_STATIC},     {"map", BK_FAMILY_MAP},
    {"dleft", BK_FAMILY_DLEFT},         {"varcount", BK_FAMILY_VARCOUNT},
    {"hier", BK_FAMILY_HIER},           {"hybrid", BK_FAMILY_HYBRID},
    {"morris", BK_FAMILY_MORRIS},       {"growable", BK_FAMILY_GROWABLE},
    {"bumped", BK_FAMILY_BUMPED},       {"ttl", BK_FAMILY_TTL},
};

/* The --type name of a family, else the library's name (autoclear,
 * ttl, rbloom, rcuckoo: families --type does not make), else "unknown". */
const char *cli_family_name(bk_family family)
{
    for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
        if (type_names[i].family == family) return type_names[i].name;
    const char *name = bk_family_name(family);
    return name != NULL ? name : "unknown";
}

/*==========================================================================
 * Values
 *==========================================================================*/

/* A whole number: decimal digits, 0x-hex (when hex_ok), an optional
 * k/M/G/T suffix (powers of 1000), or an exact decimal exponent ("1e6"). */
static int parse_u64(const char *s, int hex_ok, uint64_t *out)
{
    if (s[0] == '\0' || s[0] == '-' || s[0] == '+' || s[0] == ' ') return -1;
    char *end;
    errno = 0;
    if (hex_ok && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        unsigned long long v = strtoull(s + 2, &end, 16);
        if (errno != 0 || end == s + 2 || *end != '\0') return -1;
        *out = v;
        return 0;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == 0 && end != s && *end == '\0') {
        *out = v;
        return 0;
    }
    if (errno == 0 && end != s && end[1] == '\0') {
        static const char suffixes[] = "kMGT";
        const char *p = strchr(suffixes, *end);
        if (p != NULL) {
            uint64_t mult = 1000;
            for (const char *q = suffixes; q < p; q++) mult *= 1000;
            if (v > UINT64_MAX / mult) return -1;
            *out = v * mult;
            return 0;
        }
    }
    /* "1e6", "2.5e7": accepted when the value is a whole number. */
    double d = strtod(s, &end);
    if (end == s || *end != '\0' || !(d >= 0) || d >= 18446744073709551616.0 ||
        d != (double)(uint64_t)d)
        return -1;
    *out = (uint64_t)d;
    return 0;
}

int cli_parse_u64(const char *s, int hex_ok, uint64_t *out)
{
    return parse_u64(s, hex_ok, out);
}

static int parse_double(const char *s, double *out)
{
    char *end;
    if (s[0] == '\0' || s[0] == ' ') return -1;
    double d = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(d)) return -1;
    *out = d;
    return 0;
}

/*==========================================================================
 * Parsing
 *==========================================================================*/

/* The entry named so that `allowed` accepts, else NULL. */
static const optdef *find_long(const char *name, size_t len, uint64_t allowed)
{
    for (size_t i = 0; i < NOPTDEFS; i++)
        if (strlen(optdefs[i].name) == len &&
            strncmp(optdefs[i].name, name, len) == 0 &&
            (allowed & OPTBIT(optdefs[i].id)))
            return &optdefs[i];
    return NULL;
}

static const optdef *find_short(char c, uint64_t allowed)
{
    for (size_t i = 0; i < NOPTDEFS; i++)
        if (optdefs[i].letter == c && (allowed & OPTBIT(optdefs[i].id)))
            return &optdefs[i];
    return NULL;
}

/* Store the value of option d. shown is how the user spelled it. */
static int set_option(const char *cmd, const optdef *d, const char *shown,
                      const char *value, cli_options *o)
{
    uint64_t u = 0;
    bk_filter_config *c = &o->config;
    o->given |= OPTBIT(d->id);
    switch (d->id) {
    case OPT_HELP: return 0;
    case OPT_QUIET: o->quiet = 1; return 0;
    case OPT_NONSCALING: c->nonscaling = 1; return 0;
    case OPT_SPLIT: c->blocked_split = 1; return 0;
    case OPT_WINDOW_BY_COUNT: c->window_by_count = 1; return 0;
    case OPT_NUL: o->nul = 1; return 0;
    case OPT_SKIP_EMPTY: o->skip_empty = 1; return 0;
    case OPT_INVERT: o->invert = 1; return 0;
    case OPT_COUNT: o->count = 1; return 0;
    case OPT_TOTAL: o->total = 1; return 0;
    case OPT_JSON: o->json = 1; return 0;
    case OPT_FORCE: o->force = 1; return 0;
    case OPT_STRICT: o->strict = 1; return 0;
    case OPT_NO_DECOMPRESS: o->no_decompress = 1; return 0;
    case OPT_WINDOW: o->window_arg = value; return 0; /* clock.c, at the end */
    case OPT_SAVE: o->save = value; return 0;
    case OPT_NODES: o->nodes = value; return 0;
    case OPT_CLUSTER_TYPE:
        if (strcmp(value, "bloom") == 0 || strcmp(value, "cuckoo") == 0) {
            o->cluster_cuckoo = value[0] == 'c';
            return 0;
        }
        cli_error("%s: %s: unknown filter type '%s' (bloom, cuckoo)", cmd,
                  shown, value);
        return -1;
    case OPT_ROTATE: c->auto_clear_mode = BK_AUTOCLEAR_ROTATE; return 0;
    case OPT_MAX_TTL: return cli_parse_duration(cmd, d->name, value, &c->window);
    case OPT_TTL: return cli_parse_duration(cmd, d->name, value, &o->ttl_ms);
    case OPT_AUTO_CLEAR:
        if (parse_double(value, &c->auto_clear) != 0 ||
            !(c->auto_clear > 0 && c->auto_clear <= 1)) {
            cli_error("%s: %s: '%s' is not a fill ratio in (0, 1] (such as 0.5)", cmd, shown,
                      value);
            return -1;
        }
        return 0;
    case OPT_ERROR:
        if (parse_double(value, &c->fpr) != 0) {
            cli_error("%s: %s: '%s' is not a number", cmd, shown, value);
            return -1;
        }
        if (!(c->fpr > 0 && c->fpr < 1)) {
            cli_error("%s: %s: '%s': %s", cmd, shown, value,
                      bk_strerror(BK_EFPR));
            return -1;
        }
        return 0;
    case OPT_TYPE:
        for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++)
            if (strcmp(type_names[i].name, value) == 0) {
                c->family = type_names[i].family;
                return 0;
            }
        cli_error("%s: %s: unknown filter type '%s' (blocked, classic, "
                  "counting, deletable, cuckoo, scalable, window, ttl, dleft, "
                  "varcount, hier, hybrid, morris)",
                  cmd, shown, value);
        return -1;
    case OPT_DELIMITER:
        if (strcmp(value, "\\t") == 0) {
            o->delimiter = '\t';
            return 0;
        }
        if (strlen(value) != 1) {
            cli_error("%s: %s: '%s' is not a single character", cmd, shown,
                      value);
            return -1;
        }
        o->delimiter = value[0];
        return 0;
    default: break;
    }
    /* The rest are whole numbers. */
    if (parse_u64(value, d->id == OPT_SEED, &u) != 0) {
        char *end;
        double big = strtod(value, &end);
        if (end != value && *end == '\0' && big >= 18446744073709551616.0) {
            cli_error("%s: %s: '%s' is out of range (max %llu)", cmd, shown,
                      value, (unsigned long long)(d->id == OPT_CAPACITY ||
                                                  d->id == OPT_SEED ||
                                                  d->id == OPT_REGIONS
                                                  ? UINT64_MAX : UINT32_MAX));
            return -1;
        }
        cli_error("%s: %s: '%s' is not a whole number", cmd, shown, value);
        return -1;
    }
    int positive = 1;           /* 0 is refused */
    uint64_t max = UINT32_MAX;  /* most options are 32-bit */
    switch (d->id) {
    case OPT_CAPACITY: c->capacity = u; max = UINT64_MAX; break;
    case OPT_SEED: c->seed = u; max = UINT64_MAX; positive = 0; break;
    case OPT_REGIONS: c->regions = u; max = UINT64_MAX; break;
    case OPT_COUNTER_BITS: c->counter_bits = (uint32_t)u; break;
    case OPT_BUCKET_SIZE: c->bucket_size = (uint32_t)u; break;
    case OPT_FINGERPRINT_BITS: c->fingerprint_bits = (uint32_t)u; break;
    case OPT_MAX_KICKS: c->max_kicks = (uint32_t)u; break;
    case OPT_EXPANSION: c->expansion = (uint32_t)u; break;
    case OPT_GENERATIONS: c->generations = (uint32_t)u; break;
    case OPT_SLOTS: o->slots = (uint32_t)u; max = BK_TTL_MAX_SLOTS; break;
    case OPT_FIELD: o->field = (uint32_t)u; break;
    case OPT_JOBS: o->jobs = (unsigned)u; max = 1024; positive = 0; break;
    case OPT_SHARDS: o->shards = (uint32_t)u; max = 16384; break;
    default: break;
    }
    if ((positive && u == 0) || u > max) {
        cli_error("%s: %s: '%s' is out of range (%s%llu)", cmd, shown, value,
                  positive ? "1 to " : "0 to ", (unsigned long long)max);
        return -1;
    }
    return 0;
}

static int unknown_option(const char *cmd, const char *arg)
{
    cli_error("%s: unknown option '%s' (see bloomkit %s --help)", cmd, arg,
              cmd);
    return -1;
}

int cli_parse_options(const char *cmd, int argc, char **argv, uint64_t allowed,
                      cli_options *o)
{
    memset(o, 0, sizeof(*o));
    bk_filter_config_init(&o->config);
    o->delimiter = '\t';
    o->args = calloc((size_t)argc + 1, sizeof(*o->args));
    if (o->args == NULL) {
        cli_error("%s", bk_strerror(BK_ENOMEM));
        return -1;
    }
    allowed |= OPTBIT(OPT_HELP);
    int only_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (only_positional || arg[0] != '-' || arg[1] == '\0') {
            o->args[o->nargs++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            only_positional = 1;
            continue;
        }
        if (arg[1] == '-') {                      /* --name[=value] */
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            const optdef *d = find_long(name, len, allowed);
            if (d == NULL)
                return unknown_option(cmd, arg);
            char shown[64];
            snprintf(shown, sizeof(shown), "--%s", d->name);
            const char *value = NULL;
            if (d->takes_value) {
                if (eq != NULL) value = eq + 1;
                else if (i + 1 < argc) value = argv[++i];
                else {
                    cli_error("%s: option '%s' needs a value", cmd, shown);
                    return -1;
                }
            } else if (eq != NULL) {
                cli_error("%s: option '%s' takes no value", cmd, shown);
                return -1;
            }
            if (set_option(cmd, d, shown, value, o) != 0) return -1;
            continue;
        }
        for (const char *p = arg + 1; *p != '\0'; p++) { /* -abc, -jN */
            const optdef *d = find_short(*p, allowed);
            char shown[3] = {'-', *p, '\0'};
            if (d == NULL)
                return unknown_option(cmd, shown);
            if (!d->takes_value) {
                if (set_option(cmd, d, shown, NULL, o) != 0) return -1;
                continue;
            }
            const char *value;
            if (p[1] != '\0') value = p + 1;
            else if (i + 1 < argc) value = argv[++i];
            else {
                cli_error("%s: option '%s' needs a value", cmd, shown);
                return -1;
            }
            if (set_option(cmd, d, shown, value, o) != 0) return -1;
            break;
        }
    }
    /* --window's meaning depends on --window-by-count, given anywhere. */
    if (o->window_arg != NULL && cli_parse_window(cmd, o) != 0) return -1;
    return 0;
}

void cli_options_free(cli_options *o)
{
    free(o->args);
    o->args = NULL;
}

int cli_has_sizing(const cli_options *o)
{
    uint64_t sizing = OPTS_SIZING & ~(OPTBIT(OPT_FORCE) | OPTBIT(OPT_SEED));
    return (o->given & sizing) != 0;
}

const char *cli_one_file(const char *cmd, const cli_options *o)
{
    if (o->nargs == 1) return o->args[0];
    cli_error("%s: expected one FILE, got %zu arguments (see bloomkit %s --help)", cmd,
              o->nargs, cmd);
    return NULL;
}

int cli_check_sizing(const char *cmd, const cli_options *o)
{
    if (!(o->given & OPTBIT(OPT_CAPACITY))) {
        cli_error("%s: --capacity is required to create a filter", cmd);
        return -1;
    }
    if (!(o->given & OPTBIT(OPT_ERROR))) {
        cli_error("%s: --error is required to create a filter", cmd);
        return -1;
    }
    if (o->config.family == BK_FAMILY_TTL && !(o->given & OPTBIT(OPT_MAX_TTL))) {
        cli_error("%s: --type ttl needs --max-ttl DURATION (the longest TTL a key may "
                  "have, e.g. --max-ttl 1h)", cmd);
        return -1;
    }
    if (o->config.family == BK_FAMILY_WINDOW &&
        !(o->given & OPTBIT(OPT_WINDOW))) {
        cli_error("%s: --type window needs --window DURATION (e.g. --window "
                  "10m), or --window-by-count --window N", cmd);
        return -1;
    }
    if ((o->given & OPTBIT(OPT_SLOTS)) && (o->given & OPTBIT(OPT_GENERATIONS))) {
        cli_error("%s: --slots (the table's granularity, max TTL / S) and --generations "
                  "(the generations layout) cannot be given together", cmd);
        return -1;
    }
    if ((o->given & OPTBIT(OPT_ROTATE)) && !(o->given & OPTBIT(OPT_AUTO_CLEAR))) {
        cli_error("%s: --rotate needs --auto-clear RATIO", cmd);
        return -1;
    }
    bk_family fam = o->config.family;
    if ((o->given & OPTBIT(OPT_AUTO_CLEAR)) &&
        ((fam != BK_FAMILY_BLOCKED && fam != BK_FAMILY_BLOOM && fam != BK_FAMILY_COUNTING) ||
         (o->given & OPTBIT(OPT_SPLIT)))) {
        cli_error("%s: --auto-clear applies to --type blocked (without --split), classic "
                  "or counting, not %s", cmd,
                  o->given & OPTBIT(OPT_SPLIT) ? "blocked --split" : cli_family_name(fam));
        return -1;
    }
    for (size_t i = 0; i < NFAMILY_OPTIONS; i++) {
        if (!(o->given & OPTBIT(family_options[i].opt))) continue;
        int fits = 0; /* an option may belong to several families */
        for (size_t j = 0; j < NFAMILY_OPTIONS; j++)
            fits |= family_options[j].opt == family_options[i].opt &&
                    family_options[j].family == o->config.family;
        if (fits) continue;
        const optdef *d = NULL;
        for (size_t j = 0; j < NOPTDEFS; j++)
            if (optdefs[j].id == family_options[i].opt) d = &optdefs[j];
        cli_error("%s: --%s applies to --type %s, not %s", cmd, d->name,
                  cli_family_name(family_options[i].family),
                  cli_family_name(o->config.family));
        return -1;
    }
    return 0;
}
