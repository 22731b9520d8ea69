/*
 * fuzz_resp.c - libFuzzer target for bloomkit-server's RESP request parser
 * (server/resp.c) and its reply encoder.
 *
 * Input layout: byte 0 sets the reply protocol (bit 0: RESP2/RESP3) and
 * byte 1..3 the sizes of the pieces the rest arrives in (cycled, 1..128
 * bytes, or 0: everything left), so requests are cut anywhere, header
 * digits and CRLFs included, and the parser has to resume.
 *
 * The query buffer is driven as client_process() in server/net.c drives
 * it: append a piece, parse until the parser wants more, move the
 * unconsumed tail to the front and shift the parser. Unlike the server the
 * buffer is reallocated to its exact length at every read, so ASan sees any
 * byte read beyond what was received, and the buffer moves every time.
 *
 * Checked, for every input:
 *  - every finished request has 1..max_args arguments, each inside the
 *    received bytes and within its limit (max_bulk_len, max_inline_len);
 *  - MORE's *need is honest: fewer bytes than it asked for never finish a
 *    request;
 *  - an error has Redis's "ERR Protocol error" text and ends the input, as
 *    the server closes the connection;
 *  - the parse does not depend on how the input was cut: the requests and
 *    the final outcome are the same as for the input parsed in one piece;
 *  - the encoder: each request echoed back (an array of bulks) is a valid
 *    multibulk request that parses to the same arguments, and the other
 *    reply kinds (simple, error, integer, null, map, double) keep a stream
 *    that a strict RESP reader accepts, with exactly the replies written.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const bks_limits LIMITS = {
    .max_bulk_len = 1u << 20,  /* 1 MiB */
    .max_args = 1024,
    .max_inline_len = 4096,
};

#define FUZZ_NAME "fuzz_resp"
#include "fuzzcheck.h"

/*==========================================================================
 * A strict RESP2/RESP3 reply reader, for checking what the encoder wrote
 *==========================================================================*/

/* Length of the line starting at p (up to CRLF), or -1 when the stream
 * has no CRLF there or the line holds a lone CR or LF. */
static long line_len(const char *p, size_t avail)
{
    for (size_t i = 0; i < avail; i++) {
        if (p[i] == '\n') return -1;
        if (p[i] == '\r') return (i + 1 < avail && p[i + 1] == '\n') ? (long)i : -1;
    }
    return -1;
}

static int is_integer_text(const char *s, size_t n)
{
    size_t i = (n > 0 && s[0] == '-') ? 1 : 0;
    if (i == n) return 0;
    for (; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* Read one reply at *pos; returns 0 when well formed. */
static int read_reply(const char *buf, size_t len, size_t *pos, int depth)
{
    if (depth > 8 || *pos >= len) return -1;
    char type = buf[*pos];
    const char *body = buf + *pos + 1;
    long n = line_len(body, len - *pos - 1);
    if (n < 0) return -1;
    *pos += 1 + (size_t)n + 2;
    switch (type) {
    case '+':
    case '-':
    case ',':
        return 0;
    case '_':
        return n == 0 ? 0 : -1;
    case ':':
        return is_integer_text(body, (size_t)n) ? 0 : -1;
    case '$': {
        if (!is_integer_text(body, (size_t)n)) return -1;
        long long blen = strtoll(body, NULL, 10);
        if (blen == -1) return 0;
        if (blen < 0 || (unsigned long long)blen > len - *pos ||
            len - *pos - (size_t)blen < 2)
            return -1;
        *pos += (size_t)blen;
        if (buf[*pos] != '\r' || buf[*pos + 1] != '\n') return -1;
        *pos += 2;
        return 0;
    }
    case '*':
    case '%': {
        if (!is_integer_text(body, (size_t)n)) return -1;
        long long count = strtoll(body, NULL, 10);
        if (count < 0 || count > 64) return -1;
        if (type == '%') count *= 2;
        for (long long i = 0; i < count; i++)
            if (read_reply(buf, len, pos, depth + 1) != 0) return -1;
        return 0;
    }
    default:
        return -1;
    }
}

/*==========================================================================
 * Encoding replies
 *==========================================================================*/

/* The echo of a request: an array of its arguments as bulks. */
static void echo_request(bks_outbuf *out, int resp, int argc, const bkc_str *argv)
{
    bkc_reply r;
    bks_encoder e;
    bks_reply_init(&r, &e, out, resp);
    r.vt->array(&r, (size_t)argc);
    for (int i = 0; i < argc; i++) r.vt->bulk(&r, argv[i].ptr, argv[i].len);
}

/* A few other replies, their values taken from the request: the first
 * argument as a status and an error text (NUL-terminated copies, CR/LF
 * inside them must be neutralised), its bytes as an integer and a double
 * (every bit pattern: NaN, infinities, subnormals), a null and a map. */
static void other_replies(int resp, int argc, const bkc_str *argv)
{
    bks_outbuf out = {0};
    bkc_reply r;
    bks_encoder e;
    bks_reply_init(&r, &e, &out, resp);
    const bkc_str *a = &argv[0];
    char text[128];
    size_t n = a->len < sizeof(text) - 1 ? a->len : sizeof(text) - 1;
    memcpy(text, a->ptr, n);
    text[n] = '\0';
    unsigned char raw[8] = {0};
    memcpy(raw, a->ptr, a->len < 8 ? a->len : 8);
    long long ll;
    double d;
    memcpy(&ll, raw, sizeof ll);
    memcpy(&d, raw, sizeof d);

    int written = 0;
    r.vt->simple(&r, text), written++;
    r.vt->error(&r, text), written++;
    bks_outbuf_error(&out, text), written++;
    r.vt->integer(&r, ll), written++;
    r.vt->integer(&r, (long long)argc), written++;
    r.vt->dbl(&r, d), written++;
    r.vt->null(&r), written++;
    r.vt->map(&r, 2), written++;
    r.vt->simple(&r, "key");
    r.vt->dbl(&r, (double)ll / 3.0);
    r.vt->bulk(&r, text, n);
    r.vt->array(&r, 0);

    CHECK(!out.oom);
    size_t pos = 0;
    for (int i = 0; i < written; i++) CHECK(read_reply(out.p, out.len, &pos, 0) == 0);
    CHECK(pos == out.len);
    bks_outbuf_free(&out);
}

/*==========================================================================
 * Driving the parser as the server does
 *==========================================================================*/

typedef struct run_result {
    bks_outbuf echo;     /* every request, echoed (RESP2) */
    int requests;
    bks_parse_result last; /* MORE or ERROR when the input ran out */
    int error;             /* a protocol error ended the input: its text */
    char err[96];
} run_result;

static void check_request(const char *buf, size_t len, int argc, const bkc_str *argv)
{
    CHECK(argc >= 1 && (uint32_t)argc <= LIMITS.max_args);
    CHECK(argv != NULL);
    for (int i = 0; i < argc; i++) {
        CHECK(argv[i].ptr >= buf && argv[i].ptr <= buf + len);
        CHECK(argv[i].len <= (size_t)(buf + len - argv[i].ptr));
        CHECK(argv[i].len <= LIMITS.max_bulk_len);
        if (i > 0) CHECK(argv[i].ptr >= argv[i - 1].ptr + argv[i - 1].len);
    }
}

/* Parse input in pieces whose sizes cycle through sizes[0..nsizes), 0
 * meaning "all that is left". The echo of every request goes to res. */
static void run(const uint8_t *input, size_t size, const size_t *sizes, int nsizes,
                int resp, run_result *res)
{
    bks_parser p;
    bks_parser_init(&p);
    char *qbuf = NULL;
    size_t qlen = 0, fed = 0;
    size_t need_left = 0; /* bytes MORE still asked for */
    int piece = 0;
    memset(res, 0, sizeof *res);
    res->last = BKS_PARSE_MORE;

    while (fed < size) {
        size_t n = sizes[piece++ % nsizes];
        if (n == 0 || n > size - fed) n = size - fed;
        /* a read: the buffer grows to exactly what has arrived */
        char *grown = malloc(qlen + n);
        CHECK(grown != NULL);
        if (qlen) memcpy(grown, qbuf, qlen);
        memcpy(grown + qlen, input + fed, n);
        free(qbuf);
        qbuf = grown;
        qlen += n;
        fed += n;
        int short_of_need = n < need_left;
        need_left = short_of_need ? need_left - n : 0;

        bks_parse_result rc;
        for (;;) {
            int argc = 0;
            const bkc_str *argv = NULL;
            const char *err = NULL;
            size_t need = 0;
            rc = bks_parse(&p, qbuf, qlen, &LIMITS, &argc, &argv, &need, &err);
            if (rc != BKS_PARSE_DONE) {
                if (rc == BKS_PARSE_MORE) {
                    CHECK(need >= 1);
                    need_left = need;
                }
                if (rc == BKS_PARSE_ERROR) {
                    CHECK(err != NULL);
                    CHECK(strncmp(err, "ERR Protocol error: ", 20) == 0);
                    CHECK(strlen(err) < sizeof res->err);
                    res->error = 1;
                    strcpy(res->err, err);
                }
                break;
            }
            /* fewer bytes than MORE asked for cannot finish a request */
            CHECK(!short_of_need);
            short_of_need = 0;
            check_request(qbuf, qlen, argc, argv);
            CHECK(bks_parser_consumed(&p) <= qlen);
            res->requests++;
            echo_request(&res->echo, 2, argc, argv);
            if (res->requests <= 4) other_replies(resp, argc, argv);
        }
        res->last = rc;
        if (rc == BKS_PARSE_ERROR || rc == BKS_PARSE_NOMEM) {
            /* the server replies the error and closes: the rest is never read */
            bks_outbuf out = {0};
            if (rc == BKS_PARSE_ERROR) bks_outbuf_error(&out, res->err);
            bks_outbuf_free(&out);
            break;
        }
        /* move the partial request to the front */
        size_t used = bks_parser_consumed(&p);
        CHECK(used <= qlen);
        if (used) {
            memmove(qbuf, qbuf + used, qlen - used);
            qlen -= used;
            bks_parser_shift(&p, used);
        }
    }
    CHECK(!res->echo.oom);
    free(qbuf);
    bks_parser_free(&p);
}

/* The echoed requests, parsed back in one piece, are the same requests. */
static void check_echo_round_trip(const run_result *res)
{
    if (res->echo.len == 0) return;
    char *copy = malloc(res->echo.len);
    CHECK(copy != NULL);
    memcpy(copy, res->echo.p, res->echo.len);
    bks_parser p;
    bks_parser_init(&p);
    bks_outbuf again = {0};
    int requests = 0;
    for (;;) {
        int argc;
        const bkc_str *argv;
        const char *err = NULL;
        size_t need;
        bks_parse_result rc =
            bks_parse(&p, copy, res->echo.len, &LIMITS, &argc, &argv, &need, &err);
        if (rc != BKS_PARSE_DONE) {
            CHECK(rc == BKS_PARSE_MORE);
            break;
        }
        echo_request(&again, 2, argc, argv);
        requests++;
    }
    CHECK(requests == res->requests);
    CHECK(bks_parser_consumed(&p) == res->echo.len);
    CHECK(again.len == res->echo.len && memcmp(again.p, res->echo.p, again.len) == 0);
    bks_outbuf_free(&again);
    bks_parser_free(&p);
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    int resp = (data[0] & 1) ? 3 : 2;
    size_t sizes[3];
    for (int i = 0; i < 3; i++) sizes[i] = data[1 + i] == 0 ? 0 : (size_t)(data[1 + i] & 0x7f) + 1;
    data += 4;
    size -= 4;

    run_result pieces, whole;
    run(data, size, sizes, 3, resp, &pieces);
    const size_t all[1] = {0};
    run(data, size, all, 1, resp, &whole);

    /* how the bytes were cut changes nothing */
    CHECK(pieces.requests == whole.requests);
    CHECK(pieces.last == whole.last);
    CHECK(pieces.error == whole.error);
    CHECK(strcmp(pieces.err, whole.err) == 0);
    CHECK(pieces.echo.len == whole.echo.len);
    CHECK(pieces.echo.len == 0 || memcmp(pieces.echo.p, whole.echo.p, whole.echo.len) == 0);

    check_echo_round_trip(&whole);
    bks_outbuf_free(&pieces.echo);
    bks_outbuf_free(&whole.echo);
    return 0;
}
