/* sockopts: parse and edit a `socket options` value (Samba's rules are in
 * lib/util/util_net.c: tokens split on blanks and commas, names compared
 * without case, values read with atoi, nothing validated). */
#include "sockopts.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse.h"

static const char *const names[] = {
    [SOCKOPTS_RCVBUF] = "SO_RCVBUF",
    [SOCKOPTS_SNDBUF] = "SO_SNDBUF",
};

/* Every option name Samba knows: used to tell a stray value fragment
 * ("65536" in `SO_RCVBUF = 65536`) from the next real option. */
static const char *const known[] = {
    "SO_KEEPALIVE",
    "SO_REUSEADDR",
    "SO_REUSEPORT",
    "SO_BROADCAST",
    "TCP_NODELAY",
    "TCP_KEEPCNT",
    "TCP_KEEPIDLE",
    "TCP_KEEPINTVL",
    "IPTOS_LOWDELAY",
    "IPTOS_THROUGHPUT",
    "SO_SNDBUF",
    "SO_RCVBUF",
    "SO_SNDLOWAT",
    "SO_RCVLOWAT",
    "SO_SNDTIMEO",
    "SO_RCVTIMEO",
    "TCP_FASTACK",
    "TCP_QUICKACK",
    "TCP_NODELAYACK",
    "TCP_KEEPALIVE_THRESHOLD",
    "TCP_KEEPALIVE_ABORT_THRESHOLD",
    "TCP_DEFER_ACCEPT",
    "TCP_USER_TIMEOUT",
};

const char *sockopts_name(enum sockopts_buf which)
{
    return names[which];
}

static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == ',';
}

int sockopts_parse(const char *value, struct sockopts *so)
{
    const char *p = value;

    so->tok = NULL;
    so->n = 0;
    so->removed = false;
    while (*p) {
        const char *s;
        char **nt;

        while (*p && is_sep(*p))
            p++;
        if (!*p)
            break;
        s = p;
        while (*p && !is_sep(*p))
            p++;
        nt = realloc(so->tok, (so->n + 1) * sizeof(*nt));
        if (nt == NULL)
            goto oom;
        so->tok = nt;
        so->tok[so->n] = strndup(s, (size_t)(p - s));
        if (so->tok[so->n] == NULL)
            goto oom;
        so->n++;
    }
    return 0;
oom:
    sockopts_free(so);
    return -ENOMEM;
}

void sockopts_free(struct sockopts *so)
{
    for (size_t i = 0; i < so->n; i++)
        free(so->tok[i]);
    free(so->tok);
    so->tok = NULL;
    so->n = 0;
    so->removed = false;
}

/* Does token t name option `name`, with or without `=...`? */
static bool names_option(const char *t, const char *name)
{
    size_t n = strlen(name);

    return strncasecmp(t, name, n) == 0 && (t[n] == '\0' || t[n] == '=');
}

static bool is_known_option(const char *t)
{
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (names_option(t, known[i]))
            return true;
    return false;
}

/* A token that is only the leftover of a broken `NAME = VALUE`. */
static bool is_fragment(const char *t)
{
    return strchr(t, '=') == NULL && !is_known_option(t);
}

int sockopts_atoi(const char *s)
{
    long l = strtol(s, NULL, 10);
    unsigned long u = (unsigned long)l & 0xffffffffUL;

    /* The low 32 bits as a two's complement int, spelled out: converting
     * an out-of-range long to int is implementation-defined in C (GCC
     * truncates, which is what glibc's atoi does). */
    return u <= INT_MAX ? (int)u : (int)(u - 0x80000000UL) + INT_MIN;
}

struct sockopts_size sockopts_get(const struct sockopts *so, enum sockopts_buf which)
{
    const char *name = names[which];
    size_t nlen = strlen(name);
    struct sockopts_size out = {0};

    for (size_t i = 0; i < so->n; i++) {
        const char *t = so->tok[i];

        if (!names_option(t, name))
            continue;
        out.present = true;
        out.token = t;
        if (t[nlen] == '=') {
            const char *v = t + nlen + 1;
            char *end;
            long l;

            out.value = sockopts_atoi(v);
            /* The text says what smbd passes only when it is one whole
             * number that fits an int: `=64k` is 64, `=abc` and `=` are
             * 0, `=4294967296` is 0, `=99999999999999999999` is -1. */
            errno = 0;
            l = strtol(v, &end, 10);
            out.broken = *v == '\0' || isspace((unsigned char)*v) || *end != '\0' ||
                         errno == ERANGE || l < INT_MIN || l > INT_MAX;
        } else {
            /* No `=`: Samba keeps its default value 1. */
            out.value = 1;
            out.broken = true;
        }
    }
    return out;
}

struct sockopts_kernel sockopts_kernel(int value, long cap, long min_bytes)
{
    /* min_t(u32, val, cap): a negative value is a huge unsigned one */
    unsigned long u = (unsigned long)(unsigned int)value;
    struct sockopts_kernel k;

    k.request = cap >= 0 && u >= (unsigned long)cap ? cap : (long)u;
    /* the kernel keeps val * 2 within an int first */
    k.bytes = 2 * (k.request < INT_MAX / 2 ? k.request : INT_MAX / 2);
    if (k.bytes <= min_bytes) {
        k.bytes = min_bytes;
        k.effect = SOCKOPTS_AT_MIN;
    } else {
        k.effect = k.request == cap ? SOCKOPTS_AT_CAP : SOCKOPTS_AS_ASKED;
    }
    return k;
}

static void remove_at(struct sockopts *so, size_t i)
{
    free(so->tok[i]);
    memmove(&so->tok[i], &so->tok[i + 1], (so->n - i - 1) * sizeof(so->tok[0]));
    so->n--;
}

/* How many tokens from i belong to the option named at i: `NAME=V` is one;
 * `NAME = V`, `NAME =V` and `NAME= V` spread over two or three. */
static size_t option_span(const struct sockopts *so, size_t i, size_t nlen)
{
    const char *t = so->tok[i];
    size_t k = 1;

    if (t[nlen] == '=' && t[nlen + 1] != '\0')
        return 1;
    if (t[nlen] == '\0' && i + k < so->n && so->tok[i + k][0] == '=') {
        /* `NAME =V` or `NAME = V` */
        if (so->tok[i + k][1] != '\0')
            return 2;
        k++;
    }
    if (i + k < so->n && is_fragment(so->tok[i + k]))
        k++;
    return k;
}

int sockopts_set(struct sockopts *so, enum sockopts_buf which, long size)
{
    const char *name = names[which];
    size_t nlen = strlen(name);
    size_t first = 0;
    bool found = false;
    char buf[64];

    if (size < 0 || size > SOCKOPTS_MAX_SIZE)
        return -ERANGE;
    for (size_t i = 0; i < so->n;) {
        size_t span;

        if (!names_option(so->tok[i], name)) {
            i++;
            continue;
        }
        span = option_span(so, i, nlen);
        if (!found)
            first = i;
        found = true;
        so->removed = true;
        while (span-- > 0)
            remove_at(so, i);
    }
    if (size == SOCKOPTS_AUTO)
        return 0;
    /* A new token goes right after the last option Samba knows, not after
     * words it ignores: in `SO_SNDBUF=8192 ; tuned 2019` (Samba has no
     * inline comments, so those are three unknown options) a size at the
     * end would read as commented out. */
    if (!found) {
        first = 0;
        for (size_t i = 0; i < so->n; i++)
            if (is_known_option(so->tok[i]))
                first = i + 1;
    }

    snprintf(buf, sizeof(buf), "%s=%ld", name, size);
    {
        char **nt = realloc(so->tok, (so->n + 1) * sizeof(*nt));
        char *t = strdup(buf);

        if (nt == NULL || t == NULL) {
            free(t);
            if (nt != NULL)
                so->tok = nt;
            return -ENOMEM;
        }
        so->tok = nt;
        if (first > so->n)
            first = so->n;
        memmove(&so->tok[first + 1], &so->tok[first], (so->n - first) * sizeof(so->tok[0]));
        so->tok[first] = t;
        so->n++;
    }
    return 0;
}

char *sockopts_format(const struct sockopts *so)
{
    size_t len = 1;
    char *s, *p;

    /* Only an emptying of ours becomes the default: an empty value as
     * written is a choice (no TCP_NODELAY), and a request that removes
     * nothing must leave it as it is. */
    if (so->n == 0)
        return strdup(so->removed ? SOCKOPTS_DEFAULT : "");
    for (size_t i = 0; i < so->n; i++)
        len += strlen(so->tok[i]) + 1;
    s = malloc(len);
    if (s == NULL)
        return NULL;
    p = s;
    for (size_t i = 0; i < so->n; i++) {
        size_t l = strlen(so->tok[i]);

        if (i > 0)
            *p++ = ' ';
        memcpy(p, so->tok[i], l);
        p += l;
    }
    *p = '\0';
    return s;
}

int sockopts_parse_size(const char *s, enum sockopts_buf which, long min, long *size, struct err *e)
{
    long long v;
    int r;

    if (strcasecmp(s, "auto") == 0) {
        *size = SOCKOPTS_AUTO;
        return 0;
    }
    /* From 1: a size below min but above 0 gets words of its own */
    r = parse_size(s, 1, SOCKOPTS_MAX_SIZE, &v);
    if (r == -ERANGE)
        return err_set(e, r, "buffer size '%s' is out of range: expected %ld to %ld bytes", s, min,
                       SOCKOPTS_MAX_SIZE);
    if (r < 0)
        return err_set(e, r,
                       "buffer size '%s' is not a size: expected bytes such as 262144, 256K, "
                       "1M, or 'auto'",
                       s);
    /* A size of a few bytes is a typo far more often than a wish (`1` for
     * `1M`): it gives the kernel's minimum buffer and a server that
     * crawls. */
    if (v < min)
        return err_set(e, -ERANGE,
                       "%s=%lld is below %ld bytes, where the kernel's smallest buffer makes "
                       "Samba crawl (a unit left out? %lldK is %lld bytes); write such a line "
                       "by hand if it is meant",
                       names[which], v, min, v, 1024 * v);
    *size = (long)v;
    return 0;
}

/* Next whitespace-separated word of s from *p: start and length. */
static size_t next_word(const char **p)
{
    size_t n = 0;

    while (isspace((unsigned char)**p))
        (*p)++;
    while ((*p)[n] != '\0' && !isspace((unsigned char)(*p)[n]))
        n++;
    return n;
}

bool sockopts_same(const char *a, const char *b)
{
    for (;;) {
        size_t la = next_word(&a), lb = next_word(&b);

        if (la != lb || memcmp(a, b, la) != 0)
            return false;
        if (la == 0)
            return true;
        a += la;
        b += lb;
    }
}

char *sockopts_with(const char *base, long rcvbuf, long sndbuf)
{
    struct sockopts so;
    char *v = NULL;

    if (sockopts_parse(base, &so) < 0)
        return NULL;
    if (sockopts_set(&so, SOCKOPTS_RCVBUF, rcvbuf) == 0 &&
        sockopts_set(&so, SOCKOPTS_SNDBUF, sndbuf) == 0)
        v = sockopts_format(&so);
    sockopts_free(&so);
    return v;
}
