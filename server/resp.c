/*
 * resp.c - RESP2/RESP3: the request parser and the reply encoder.
 *
 * Requests
 * --------
 * A multibulk request is "*<n>\r\n" followed by n bulk strings
 * "$<len>\r\n<len bytes>\r\n"; anything else is an inline request: one
 * line, split on blanks, with "double" (C escapes, \xHH) and 'single'
 * quotes, as redis-cli and telnet users type them.
 *
 * The parser is resumable: its state is (where the request started, where
 * it stopped reading, the arguments found so far as offsets, the length of
 * the bulk it is in). When bytes arrive it continues from there; a request
 * never gets parsed twice, whatever the number of reads it arrives in. A
 * bulk it is reading tells the caller how many bytes are still missing so
 * that the query buffer can grow to hold it whole: arguments are always
 * contiguous in the buffer, and argv points at them (zero copy).
 *
 * Strictness (the texts are Redis's):
 *   "*" count not an integer, negative, or above max_args
 *                          -> "ERR Protocol error: invalid multibulk length"
 *   an argument not starting with '$'
 *                          -> "ERR Protocol error: expected '$', got 'x'"
 *   "$" length not an integer, negative, or above max_bulk_len
 *                          -> "ERR Protocol error: invalid bulk length"
 *   a bulk not followed by CRLF -> "ERR Protocol error: expected CRLF after bulk"
 *   an inline line longer than max_inline_len, or a header line with no end
 *                          -> "ERR Protocol error: too big inline request"
 *   an unterminated quote  -> "ERR Protocol error: unbalanced quotes in request"
 * "*0" is an empty request and is skipped, as Redis does. Negative counts
 * ("*-1", a null array, which Redis silently skips) are an error here: a
 * client has no reason to send them.
 *
 * Replies
 * -------
 * bks_reply_vt encodes into a bks_outbuf: RESP2 by default, RESP3 after
 * HELLO 3 (maps %, nulls _, doubles ,). Simple and error strings have CR
 * and LF replaced by blanks so that no text can break the framing.
 */
#include "resp.h"

#include <math.h>   /* isinf, isnan */
#include <stdio.h>  /* snprintf */
#include <stdlib.h> /* realloc, strtod */
#include <string.h>

/*==========================================================================
 * Output buffer
 *==========================================================================*/

void bks_outbuf_free(bks_outbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int outbuf_reserve(bks_outbuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->cap - b->len >= n)
        return 0;
    size_t cap = b->cap ? b->cap : 512;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void bks_outbuf_append(bks_outbuf *b, const void *data, size_t n)
{
    if (n == 0 || outbuf_reserve(b, n) < 0)
        return;
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

/* "<prefix><v>\r\n" */
static void outbuf_prefixed_ll(bks_outbuf *b, char prefix, long long v)
{
    char tmp[32];
    char *end = tmp + sizeof tmp;
    char *s = end;
    *--s = '\n';
    *--s = '\r';
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--s = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--s = '-';
    *--s = prefix;
    bks_outbuf_append(b, s, (size_t)(end - s));
}

/* A status or error line, with CR/LF made blanks. */
static void outbuf_line(bks_outbuf *b, char prefix, const char *s)
{
    size_t n = strlen(s);
    if (outbuf_reserve(b, n + 3) < 0)
        return;
    char *d = b->p + b->len;
    *d++ = prefix;
    for (size_t i = 0; i < n; i++)
        *d++ = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    *d++ = '\r';
    *d++ = '\n';
    b->len += n + 3;
}

void bks_outbuf_error(bks_outbuf *b, const char *text)
{
    outbuf_line(b, '-', text);
}

/*==========================================================================
 * Reply encoder
 *==========================================================================*/

#define ENC(r) ((bks_encoder *)(r)->impl)

static void rep_simple(bkc_reply *r, const char *s) { outbuf_line(ENC(r)->out, '+', s); }
static void rep_error(bkc_reply *r, const char *s) { outbuf_line(ENC(r)->out, '-', s); }
static void rep_integer(bkc_reply *r, long long v) { outbuf_prefixed_ll(ENC(r)->out, ':', v); }

static void rep_bulk(bkc_reply *r, const void *p, size_t n)
{
    bks_outbuf *b = ENC(r)->out;
    outbuf_prefixed_ll(b, '$', (long long)n);
    if (outbuf_reserve(b, n + 2) < 0)
        return;
    if (n)
        memcpy(b->p + b->len, p, n);
    b->p[b->len + n] = '\r';
    b->p[b->len + n + 1] = '\n';
    b->len += n + 2;
}

static void rep_null(bkc_reply *r)
{
    if (ENC(r)->resp >= 3)
        bks_outbuf_append(ENC(r)->out, "_\r\n", 3);
    else
        bks_outbuf_append(ENC(r)->out, "$-1\r\n", 5);
}

static void rep_array(bkc_reply *r, size_t n) { outbuf_prefixed_ll(ENC(r)->out, '*', (long long)n); }

static void rep_map(bkc_reply *r, size_t pairs)
{
    if (ENC(r)->resp >= 3)
        outbuf_prefixed_ll(ENC(r)->out, '%', (long long)pairs);
    else
        outbuf_prefixed_ll(ENC(r)->out, '*', (long long)(2 * pairs));
}

/* The shortest decimal text that reads back as d. */
static int format_double(char *buf, size_t cap, double d)
{
    if (isnan(d))
        return snprintf(buf, cap, "nan");
    if (isinf(d))
        return snprintf(buf, cap, d > 0 ? "inf" : "-inf");
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, cap, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    return n;
}

static void rep_dbl(bkc_reply *r, double d)
{
    char tmp[64];
    int n = format_double(tmp, sizeof tmp, d);
    if (ENC(r)->resp >= 3) {
        bks_outbuf_append(ENC(r)->out, ",", 1);
        bks_outbuf_append(ENC(r)->out, tmp, (size_t)n);
        bks_outbuf_append(ENC(r)->out, "\r\n", 2);
    } else {
        rep_bulk(r, tmp, (size_t)n);
    }
}

static void rep_bool(bkc_reply *r, int v)
{
    if (ENC(r)->resp >= 3)
        bks_outbuf_append(ENC(r)->out, v ? "#t\r\n" : "#f\r\n", 4);
    else
        bks_outbuf_append(ENC(r)->out, v ? ":1\r\n" : ":0\r\n", 4);
}

const bkc_reply_vt bks_reply_vt = {
    .simple = rep_simple,
    .error = rep_error,
    .integer = rep_integer,
    .bulk = rep_bulk,
    .null = rep_null,
    .array = rep_array,
    .map = rep_map,
    .dbl = rep_dbl,
    .boolean = rep_bool,
};

/*==========================================================================
 * Parser internals
 *==========================================================================*/

#define HEADER_MAX 32   /* "*<count>\r\n" / "$<len>\r\n": digits + sign + CRLF */

void bks_parser_init(bks_parser *p)
{
    memset(p, 0, sizeof *p);
    p->bulk = -1;
}

void bks_parser_free(bks_parser *p)
{
    free(p->args);
    free(p->argv);
    bks_parser_init(p);
}

void bks_parser_shift(bks_parser *p, size_t n)
{
    p->req_start -= n;
    p->pos -= n;
    for (size_t i = 0; i < p->nargs; i++)
        p->args[i].off -= n;
}

static void parser_reset_request(bks_parser *p)
{
    p->req_start = p->pos;
    p->multibulk = 0;
    p->want = 0;
    p->bulk = -1;
    p->nargs = 0;
}

/* Strict decimal: optional '-', no '+', no leading zeros, no blanks. */
static int parse_ll(const char *s, size_t n, long long *out)
{
    if (n == 0 || n > 20)
        return 0;
    size_t i = 0;
    int neg = 0;
    if (s[0] == '-') {
        neg = 1;
        i = 1;
        if (n == 1)
            return 0;
    }
    if (s[i] == '0' && n - i > 1)
        return 0;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (9223372036854775808ULL - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    if (!neg && v > 9223372036854775807ULL)
        return 0;
    *out = neg ? (long long)(0ULL - v) : (long long)v;
    return 1;
}

void *bks_grow(void *arr, size_t *cap, size_t need, size_t first, size_t elem)
{
    size_t n = *cap ? *cap : first;
    while (n < need)
        n *= 2;
    void *p = realloc(arr, n * elem);
    if (p)
        *cap = n;
    return p;
}

static inline int push_arg(bks_parser *p, size_t off, size_t len)
{
    if (__builtin_expect(p->nargs == p->cap, 0)) {
        bks_arg *a = bks_grow(p->args, &p->cap, p->nargs + 1, 16, sizeof *a);
        if (!a)
            return -1;
        p->args = a;
    }
    p->args[p->nargs].off = off;
    p->args[p->nargs].len = len;
    p->nargs++;
    return 0;
}

static int build_argv(bks_parser *p, char *buf, int *argc, const bkc_str **argv)
{
    if (p->argv_cap < p->nargs) {
        bkc_str *v = bks_grow(p->argv, &p->argv_cap, p->nargs, 16, sizeof *v);
        if (!v)
            return -1;
        p->argv = v;
    }
    for (size_t i = 0; i < p->nargs; i++) {
        p->argv[i].ptr = buf + p->args[i].off;
        p->argv[i].len = p->args[i].len;
    }
    *argc = (int)p->nargs;
    *argv = p->argv;
    return 0;
}

/* Find "\r\n" ending a header that starts at from; returns the offset of
 * '\r', -1 when not there yet, -2 when the header is too long. */
static long find_header_end(const char *buf, size_t from, size_t len)
{
    size_t lim = len - from > HEADER_MAX ? from + HEADER_MAX : len;
    const char *nl = memchr(buf + from, '\n', lim - from);
    if (!nl)
        return len - from > HEADER_MAX ? -2 : -1;
    size_t at = (size_t)(nl - buf);
    if (at == from || buf[at - 1] != '\r')
        return -2;
    return (long)(at - 1);
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Split buf[start, end) in place into arguments (sdssplitargs rules).
 * Returns 0, -1 for unbalanced quotes, -2 for too many arguments, -3 OOM. */
static int split_inline(bks_parser *p, char *buf, size_t start, size_t end,
                        uint32_t max_args)
{
    size_t i = start;
    for (;;) {
        while (i < end && is_blank(buf[i]))
            i++;
        if (i == end)
            return 0;
        size_t arg = i, w = i;
        int dq = 0, sq = 0, done = 0;
        while (!done) {
            if (dq) {
                if (i == end)
                    return -1;
                char c = buf[i];
                if (c == '\\' && i + 3 < end && buf[i + 1] == 'x' &&
                    hex_val(buf[i + 2]) >= 0 && hex_val(buf[i + 3]) >= 0) {
                    buf[w++] = (char)(hex_val(buf[i + 2]) * 16 + hex_val(buf[i + 3]));
                    i += 4;
                } else if (c == '\\' && i + 1 < end) {
                    char e = buf[i + 1];
                    buf[w++] = e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t'
                             : e == 'b' ? '\b' : e == 'a' ? '\a' : e;
                    i += 2;
                } else if (c == '"') {
                    if (i + 1 < end && !is_blank(buf[i + 1]))
                        return -1;
                    i++;
                    done = 1;
                } else {
                    buf[w++] = c;
                    i++;
                }
            } else if (sq) {
                if (i == end)
                    return -1;
                char c = buf[i];
                if (c == '\\' && i + 1 < end && buf[i + 1] == '\'') {
                    buf[w++] = '\'';
                    i += 2;
                } else if (c == '\'') {
                    if (i + 1 < end && !is_blank(buf[i + 1]))
                        return -1;
                    i++;
                    done = 1;
                } else {
                    buf[w++] = c;
                    i++;
                }
            } else {
                if (i == end || is_blank(buf[i])) {
                    done = 1;
                } else if (buf[i] == '"') {
                    dq = 1;
                    i++;
                } else if (buf[i] == '\'') {
                    sq = 1;
                    i++;
                } else {
                    buf[w++] = buf[i++];
                }
            }
        }
        if (p->nargs >= max_args)
            return -2;
        if (push_arg(p, arg, w - arg) < 0)
            return -3;
    }
}

/*==========================================================================
 * Parser
 *==========================================================================*/

/* The common header, fast: 1 to 18 digits (no leading zero) and CRLF
 * starting at from. 1 with *at (the offset of '\r') and *n set; 0 when it
 * is anything else, which the careful path (find_header_end, parse_ll)
 * then reads, errors and partial headers included. */
static inline int quick_header(const char *buf, size_t from, size_t len, long *at,
                               long long *n)
{
    const unsigned char *p = (const unsigned char *)buf + from;
    size_t room = from < len ? len - from : 0;
    if (room < 3)   /* a digit and CRLF */
        return 0;
    unsigned d = (unsigned)p[0] - '0';
    if (d - 1 > 8)  /* 1 ... 9: no sign, no leading zero */
        return 0;
    long long v = d;
    size_t i = 1, lim = room - 2 < 18 ? room - 2 : 18;   /* CRLF stays in reach */
    while (i < lim && (d = (unsigned)p[i] - '0') <= 9) {
        v = v * 10 + d;
        i++;
    }
    if (p[i] != '\r' || p[i + 1] != '\n')
        return 0;
    *at = (long)(from + i);
    *n = v;
    return 1;
}

/* The header number after the type byte at pos ("*<count>" or "$<len>"):
 * 0 with *at (its '\r') and *n, -1 when its CRLF has not arrived, -2 when
 * it is not a number of at most max. */
static inline int read_header(const char *buf, size_t pos, size_t len, unsigned long long max,
                              long *at, long long *n)
{
    if (!quick_header(buf, pos + 1, len, at, n)) {
        *at = find_header_end(buf, pos + 1, len);
        if (*at == -1)
            return -1;
        if (*at < 0 || !parse_ll(buf + pos + 1, (size_t)*at - pos - 1, n))
            return -2;
    }
    return *n < 0 || (unsigned long long)*n > max ? -2 : 0;
}

bks_parse_result bks_parse(bks_parser *p, char *buf, size_t len,
                           const bks_limits *lim, int *argc,
                           const bkc_str **argv, size_t *need,
                           const char **err)
{
    *need = 1;
    for (;;) {
        if (!p->multibulk) {
            if (p->pos >= len)
                return BKS_PARSE_MORE;
            if (buf[p->pos] != '*') {
                /* inline request: one line */
                size_t avail = len - p->pos;
                size_t scan = avail > (size_t)lim->max_inline_len + 1
                                  ? (size_t)lim->max_inline_len + 1 : avail;
                const char *nl = memchr(buf + p->pos, '\n', scan);
                if (!nl) {
                    if (avail > lim->max_inline_len) {
                        *err = "ERR Protocol error: too big inline request";
                        return BKS_PARSE_ERROR;
                    }
                    return BKS_PARSE_MORE;
                }
                size_t eol = (size_t)(nl - buf);
                size_t end = eol;
                if (end > p->pos && buf[end - 1] == '\r')
                    end--;
                p->nargs = 0;
                int rc = split_inline(p, buf, p->pos, end, lim->max_args);
                if (rc == -1) {
                    *err = "ERR Protocol error: unbalanced quotes in request";
                    return BKS_PARSE_ERROR;
                }
                if (rc == -2) {
                    *err = "ERR Protocol error: invalid multibulk length";
                    return BKS_PARSE_ERROR;
                }
                if (rc == -3)
                    return BKS_PARSE_NOMEM;
                p->pos = eol + 1;
                if (p->nargs == 0) {          /* empty line: nothing to run */
                    parser_reset_request(p);
                    continue;
                }
                if (build_argv(p, buf, argc, argv) < 0)
                    return BKS_PARSE_NOMEM;
                parser_reset_request(p);
                return BKS_PARSE_DONE;
            }
            /* "*<count>\r\n" */
            long at;
            long long n;
            int hr = read_header(buf, p->pos, len, lim->max_args, &at, &n);
            if (hr == -1)
                return BKS_PARSE_MORE;
            if (hr < 0) {
                *err = "ERR Protocol error: invalid multibulk length";
                return BKS_PARSE_ERROR;
            }
            p->pos = (size_t)at + 2;
            if (n == 0) {
                parser_reset_request(p);
                continue;
            }
            p->multibulk = 1;
            p->want = n;
            p->nargs = 0;
            p->bulk = -1;
        }

        while ((long long)p->nargs < p->want) {
            if (p->bulk < 0) {
                if (p->pos >= len)
                    return BKS_PARSE_MORE;
                if (buf[p->pos] != '$') {
                    unsigned char c = (unsigned char)buf[p->pos];
                    snprintf(p->errbuf, sizeof p->errbuf,
                             "ERR Protocol error: expected '$', got '%c'",
                             c >= 32 && c < 127 ? (char)c : '?');
                    *err = p->errbuf;
                    return BKS_PARSE_ERROR;
                }
                long at;
                long long n;
                int hr = read_header(buf, p->pos, len, lim->max_bulk_len, &at, &n);
                if (hr == -1)
                    return BKS_PARSE_MORE;
                if (hr < 0) {
                    *err = "ERR Protocol error: invalid bulk length";
                    return BKS_PARSE_ERROR;
                }
                p->bulk = n;
                p->pos = (size_t)at + 2;
            }
            size_t want = (size_t)p->bulk + 2;
            if (len - p->pos < want) {
                *need = want - (len - p->pos);
                return BKS_PARSE_MORE;
            }
            if (buf[p->pos + (size_t)p->bulk] != '\r' ||
                buf[p->pos + (size_t)p->bulk + 1] != '\n') {
                *err = "ERR Protocol error: expected CRLF after bulk";
                return BKS_PARSE_ERROR;
            }
            if (push_arg(p, p->pos, (size_t)p->bulk) < 0)
                return BKS_PARSE_NOMEM;
            p->pos += want;
            p->bulk = -1;
        }
        if (build_argv(p, buf, argc, argv) < 0)
            return BKS_PARSE_NOMEM;
        parser_reset_request(p);
        return BKS_PARSE_DONE;
    }
}
