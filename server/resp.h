/*
 * resp.h - the RESP request parser and reply encoder of bloomkit-server.
 *
 * The parser reads requests in place: it is given the client's query
 * buffer and remembers, between reads, where the request it is working on
 * started and which arguments it has found (as offsets, so the buffer may
 * move). A finished request is an argv of bkc_str pointing into the
 * buffer: nothing is copied. Inline requests (telnet) are unescaped in
 * place. Every length is checked against hard limits before anything is
 * allocated for it.
 */
#ifndef BKS_RESP_H
#define BKS_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "command.h"

/*==========================================================================
 * Output buffer
 *==========================================================================*/

typedef struct bks_outbuf {
    char *p;
    size_t len, cap;
    int oom;          /* an allocation failed: the client must be dropped */
} bks_outbuf;

void bks_outbuf_free(bks_outbuf *b);

/* Grow an array of elements of size elem (arr, *cap of them) to hold at
 * least need, doubling its capacity from `first` when it has none: the
 * array (perhaps moved) with *cap updated, or NULL when out of memory (arr
 * and *cap unchanged). Called only when *cap < need: the parser's argument
 * lists, a client's batch, the MULTI queue. */
void *bks_grow(void *arr, size_t *cap, size_t need, size_t first, size_t elem);
void bks_outbuf_append(bks_outbuf *b, const void *data, size_t n);

/*==========================================================================
 * Reply encoder: bkc_reply over an output buffer, RESP2 or RESP3
 *==========================================================================*/

typedef struct bks_encoder {
    bks_outbuf *out;
    int resp;          /* 2 or 3 */
} bks_encoder;

extern const bkc_reply_vt bks_reply_vt;

/* A bkc_reply writing into out. */
static inline void bks_reply_init(bkc_reply *r, bks_encoder *e, bks_outbuf *out,
                                  int resp)
{
    e->out = out;
    e->resp = resp;
    r->vt = &bks_reply_vt;
    r->impl = e;
}

/* The encoding of one error reply, for errors written before a request is
 * parsed (protocol errors, DENIED). */
void bks_outbuf_error(bks_outbuf *b, const char *text);

/*==========================================================================
 * Request parser
 *==========================================================================*/

typedef struct bks_limits {
    uint64_t max_bulk_len;
    uint32_t max_args;
    uint32_t max_inline_len;
} bks_limits;

typedef struct bks_arg { size_t off, len; } bks_arg;

typedef struct bks_parser {
    size_t req_start;    /* offset of the request being parsed */
    size_t pos;          /* offset of the next byte to look at */
    int multibulk;       /* 1: '*' request under way */
    long long want;      /* arguments announced by '*' */
    long long bulk;      /* length of the bulk being read, -1: header next */
    bks_arg *args;
    size_t nargs, cap;
    bkc_str *argv;       /* built for a finished request */
    size_t argv_cap;
    char errbuf[64];     /* the text of an error that names a byte */
} bks_parser;

typedef enum bks_parse_result {
    BKS_PARSE_DONE = 0,    /* a request is ready: argv/argc */
    BKS_PARSE_MORE = 1,    /* need more bytes (*need: at least that many) */
    BKS_PARSE_ERROR = 2,   /* protocol error: reply *err, then disconnect */
    BKS_PARSE_NOMEM = 3
} bks_parse_result;

void bks_parser_init(bks_parser *p);
void bks_parser_free(bks_parser *p);

/* Parse the next request from buf[0, len). On DONE, argc and argv describe it
 * (valid until the buffer changes) and the parser is ready for the next
 * one; an empty inline line is skipped (no request). On MORE, *need is the
 * number of bytes beyond len that the request needs at least (for a bulk
 * being read, so that the caller can make room for it at once). */
bks_parse_result bks_parse(bks_parser *p, char *buf, size_t len,
                           const bks_limits *lim, int *argc,
                           const bkc_str **argv, size_t *need,
                           const char **err);

/* Bytes at the start of the buffer that no longer matter (finished
 * requests); the caller moves the rest to the front and then calls
 * bks_parser_shift with that count. */
static inline size_t bks_parser_consumed(const bks_parser *p) { return p->req_start; }
void bks_parser_shift(bks_parser *p, size_t n);

#endif /* BKS_RESP_H */
