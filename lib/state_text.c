/* state_text: the state file's text (see state.h): the table of its keys,
 * how each value is read and written, the checks a whole file must pass;
 * and state_free, which frees the strings that table names. Pure: state.c
 * reads and writes the file. */
#include "state.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

enum kind { K_BOOL, K_LONG, K_DOUBLE, K_STR, K_SIZE };

struct field {
    const char *key;
    enum kind kind;
    size_t off;
    long long max; /* K_LONG, K_SIZE: the largest value (the smallest is 0) */
    int since;     /* the format version that added the key */
};

#define FV(k, kind, member, max, since)                                                            \
    {                                                                                              \
        k, kind, offsetof(struct state, member), max, since                                        \
    }
#define F(k, kind, member, max) FV(k, kind, member, max, 1)

/* One channel's keys of the converged search's reference (format 5). */
#define REF_FIELDS(i)                                                                              \
    FV("ref_rate" #i, K_LONG, ref_rate[i], 2, 5), FV("ref_mbps" #i, K_DOUBLE, ref_mbps[i], 0, 5),  \
        FV("ref_n" #i, K_LONG, ref_n[i], INT_MAX, 5), FV("ref_ss" #i, K_DOUBLE, ref_ss[i], 0, 5),  \
        FV("ref_df" #i, K_DOUBLE, ref_df[i], 0, 5),                                                \
        FV("ref_reject" #i, K_DOUBLE, ref_reject[i], 0, 5)

/* Buffer sizes: Samba passes an int. Offsets and lengths into smb.conf's
 * bytes are checked against the bytes themselves (check_records). */
static const struct field fields[] = {
    F("have_incumbent", K_BOOL, have_incumbent, 0),
    F("rcvbuf", K_LONG, rcvbuf, INT_MAX),
    F("sndbuf", K_LONG, sndbuf, INT_MAX),
    F("write_mbps", K_DOUBLE, write_mbps, 0),
    F("read_mbps", K_DOUBLE, read_mbps, 0),
    F("last_written", K_STR, last_written, 0),
    F("hold", K_BOOL, hold, 0),
    F("hold_reason", K_STR, hold_reason, 0),
    F("kernel", K_STR, kernel, 0),
    F("samba", K_STR, samba, 0),
    F("smb_conf", K_STR, smb_conf, 0),
    F("pending", K_BOOL, pending, 0),
    F("pending_commit", K_BOOL, pending_commit, 0),
    F("pending_file", K_STR, pending_edit.file, 0),
    F("pending_written", K_STR, pending_edit.written, 0),
    F("pending_original", K_STR, pending_edit.original, 0),
    F("pending_line_off", K_SIZE, pending_edit.line_off, LONG_MAX),
    F("pending_line_len", K_SIZE, pending_edit.line_len, LONG_MAX),
    F("pending_prev", K_STR, pending_edit.prev, 0),
    /* before cycles, which stays last: a file cut after a line lacks it */
    FV("written_at", K_LONG, written_at, STATE_TIME_MAX, 2),
    FV("cycle_at", K_LONG, cycle_at, STATE_TIME_MAX, 2),
    FV("cycle_result", K_STR, cycle_result, 0, 2),
    FV("next_at", K_LONG, next_at, STATE_TIME_MAX, 2),
    FV("clients_at", K_LONG, clients_at, STATE_TIME_MAX, 3),
    FV("clients", K_LONG, clients, INT_MAX, 3),
    FV("clients_sndbuf_limited", K_LONG, clients_sndbuf_limited, INT_MAX, 3),
    FV("clients_rcvbuf_limited", K_LONG, clients_rcvbuf_limited, INT_MAX, 3),
    FV("clients_client_window", K_LONG, clients_client_window, INT_MAX, 3),
    FV("clients_network", K_LONG, clients_network, INT_MAX, 3),
    FV("clients_idle", K_LONG, clients_idle, INT_MAX, 3),
    FV("rtt_median_ms", K_DOUBLE, rtt_median_ms, 0, 3),
    FV("rtt_max_ms", K_DOUBLE, rtt_max_ms, 0, 3),
    FV("bdp_max", K_LONG, bdp_max, LONG_MAX, 3),
    FV("clients_smbd", K_LONG, clients_smbd, INT_MAX, 4),
    FV("converged", K_BOOL, converged, 0, 5),
    FV("ref_channels", K_LONG, ref_channels, 2, 5),
    REF_FIELDS(0),
    REF_FIELDS(1),
    FV("ref_settings", K_STR, ref_settings, 0, 6),
    FV("ref_recent", K_STR, ref_recent, 0, 6),
    FV("pending_restart", K_LONG, pending_restart, STATE_RESTART_YES, 7),
    FV("pending_unrestarted", K_BOOL, pending_unrestarted, 0, 8),
    FV("rates_loopback", K_BOOL, rates_loopback, 0, 9),
    FV("advice", K_STR, advice, 0, 10),
    FV("advice_rcvbuf", K_LONG, advice_rcvbuf, INT_MAX, 10),
    FV("advice_sndbuf", K_LONG, advice_sndbuf, INT_MAX, 10),
    FV("advised_from_rcvbuf", K_LONG, advised_from_rcvbuf, INT_MAX, 10),
    FV("advised_from_sndbuf", K_LONG, advised_from_sndbuf, INT_MAX, 10),
    F("cycles", K_LONG, cycles, LONG_MAX),
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* Undo escape(): \\ \n \r \t \xNN. */
static int unescape(const char *in, char **out)
{
    char *o = malloc(strlen(in) + 1), *p = o;

    if (o == NULL)
        return -ENOMEM;
    for (; *in; in++) {
        if (*in != '\\') {
            *p++ = *in;
            continue;
        }
        switch (*++in) {
        case '\\':
            *p++ = '\\';
            break;
        case 'n':
            *p++ = '\n';
            break;
        case 'r':
            *p++ = '\r';
            break;
        case 't':
            *p++ = '\t';
            break;
        case 'x':
            /* \x00 would end the string early, and what follows be lost */
            if (isxdigit((unsigned char)in[1]) && isxdigit((unsigned char)in[2]) &&
                !(in[1] == '0' && in[2] == '0')) {
                char hex[3] = {in[1], in[2], 0};

                *p++ = (char)strtol(hex, NULL, 16);
                in += 2;
                break;
            }
            /* fall through */
        default:
            free(o);
            return -EINVAL;
        }
    }
    *p = '\0';
    *out = o;
    return 0;
}

static void escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '\\')
            fputs("\\\\", f);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
}

/* What a field's value must look like, for the message. */
static void expected(const struct field *fd, char *buf, size_t len)
{
    switch (fd->kind) {
    case K_BOOL:
        snprintf(buf, len, "yes or no");
        return;
    case K_LONG:
    case K_SIZE:
        snprintf(buf, len, "a whole number from 0 to %lld", fd->max);
        return;
    case K_DOUBLE:
        snprintf(buf, len, "a rate such as 11.590000 (digits and a point, below 1e12)");
        return;
    case K_STR:
        snprintf(buf, len, "text with \\\\, \\n, \\r, \\t and \\xNN escapes (not \\x00)");
        return;
    }
    buf[0] = '\0';
}

static int set_field(struct state *s, const struct field *fd, const char *val)
{
    void *p = (char *)s + fd->off;
    long long v;
    char *end, *str;
    double d;
    int r;

    switch (fd->kind) {
    case K_BOOL:
        if (strcmp(val, "yes") != 0 && strcmp(val, "no") != 0)
            return -EINVAL;
        *(bool *)p = strcmp(val, "yes") == 0;
        return 0;
    case K_LONG:
        r = parse_long(val, 0, fd->max, &v);
        if (r == 0)
            *(long *)p = (long)v;
        return r;
    case K_SIZE:
        r = parse_long(val, 0, fd->max, &v);
        if (r == 0)
            *(size_t *)p = (size_t)v;
        return r;
    case K_DOUBLE:
        /* As state_format writes it: strtod alone would also take blanks,
         * a sign, hex, "inf" and "nan". */
        if (val[0] == '\0' || strspn(val, "0123456789.") != strlen(val))
            return -EINVAL;
        errno = 0;
        d = strtod(val, &end);
        if (errno != 0 || end == val || *end != '\0' || !(d >= 0 && d < 1e12))
            return -EINVAL;
        *(double *)p = d;
        return 0;
    case K_STR:
        r = unescape(val, &str);
        if (r < 0)
            return r;
        free(*(char **)p);
        *(char **)p = str;
        return 0;
    }
    return -EINVAL;
}

/* A piece of the file fit for a message: at most 40 bytes, anything
 * unprintable as '?' (the bytes are damaged, by definition). */
static const char *excerpt(const char *s, size_t n, char buf[48])
{
    size_t i;

    for (i = 0; i < n && i < 40; i++)
        buf[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (i < n)
        buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
    buf[i] = '\0';
    return buf;
}

static int damaged(struct err *e, const char *name, int lineno, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int damaged(struct err *e, const char *name, int lineno, const char *fmt, ...)
{
    char what[sizeof(e->msg)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return err_set(e, -EBADMSG, "%s:%d: %s", name, lineno, what);
}

/* The index of key in fields[], NFIELDS when it is unknown. */
static size_t index_of(const char *key)
{
    size_t i;

    for (i = 0; i < NFIELDS && strcmp(fields[i].key, key) != 0; i++)
        ;
    return i;
}

/* Each record complete and consistent. seen[i]: the line of field i, 0
 * when absent; last: the file's last line. */
static int check_records(const struct state *s, const int *seen, int last, long long version,
                         const char *name, struct err *e)
{
    static const char *const pending_parts[] = {"pending_file", "pending_written",
                                                "pending_original"};
    const struct smbconf_edit *ed = &s->pending_edit;
    size_t i, pending = index_of("pending"), hold = index_of("hold");
    size_t restart = index_of("pending_restart"), unrestarted = index_of("pending_unrestarted");

    /* Every scalar of the file's version is always written (state_format):
     * one missing means the file was cut short or written by hand. */
    for (i = 0; i < NFIELDS; i++)
        if (fields[i].kind != K_STR && fields[i].since <= version && seen[i] == 0)
            return damaged(e, name, last,
                           "the file ends without '%s': it is incomplete "
                           "(expected every key state_format writes, cycles last)",
                           fields[i].key);
    if (s->pending) {
        for (size_t k = 0; k < sizeof(pending_parts) / sizeof(pending_parts[0]); k++) {
            if (seen[index_of(pending_parts[k])] == 0)
                return damaged(e, name, seen[pending],
                               "a pending edit without %s (expected "
                               "pending_file, pending_written and pending_original)",
                               pending_parts[k]);
        }
        if (ed->file[0] != '/')
            return damaged(e, name, seen[pending],
                           "the pending edit's pending_file is not an "
                           "absolute path");
        if (ed->line_off > strlen(ed->written) || ed->line_len > strlen(ed->written) - ed->line_off)
            return damaged(e, name, seen[pending],
                           "the pending edit's line (pending_line_off %zu, "
                           "pending_line_len %zu) lies outside its pending_written (%zu bytes)",
                           ed->line_off, ed->line_len, strlen(ed->written));
        if (!s->pending_commit && s->pending_restart != STATE_RESTART_UNKNOWN)
            return damaged(e, name, seen[restart],
                           "pending_restart %ld for a pending trial (expected 0: only a "
                           "commit restarts smbd)",
                           s->pending_restart);
        if (s->pending_commit && s->pending_unrestarted)
            return damaged(e, name, seen[unrestarted],
                           "pending_unrestarted yes for a pending commit (expected it only "
                           "for a trial's record: a commit whose restart failed is made one)");
    } else {
        /* pending_clear leaves nothing of an edit behind */
        if (s->pending_commit || ed->file || ed->written || ed->original || ed->prev ||
            ed->line_off || ed->line_len || s->pending_restart != STATE_RESTART_UNKNOWN ||
            s->pending_unrestarted)
            return damaged(e, name, seen[pending],
                           "parts of a pending edit, but 'pending no' "
                           "(expected none of pending_* then)");
    }
    if (s->advice && !s->converged)
        return damaged(e, name, seen[index_of("advice")],
                       "advice, but 'converged no' (expected advice only with its search's "
                       "reference: state_unconverge removes both)");
    if (!s->advice &&
        (s->advice_rcvbuf || s->advice_sndbuf || s->advised_from_rcvbuf || s->advised_from_sndbuf))
        return damaged(e, name, seen[index_of("advice_rcvbuf")],
                       "advice's buffers without advice (expected 0 for each of advice_* and "
                       "advised_from_* then)");
    if (!s->hold && s->hold_reason)
        return damaged(e, name, seen[hold],
                       "a hold_reason, but 'hold no' (`smbtuned --resume` "
                       "removes both)");
    return 0;
}

int state_parse(const char *text, size_t len, const char *name, struct state *s, struct err *e)
{
    int seen[NFIELDS] = {0}, lineno = 0, vline = 0, entries = 0, r = 0;
    long long version = 1; /* no version line: the format before it had one */
    size_t pos = 0;
    char x[48];

    memset(s, 0, sizeof(*s));
    while (pos < len && r == 0) {
        const char *l = text + pos, *nl = memchr(l, '\n', len - pos), *sp;
        size_t n = nl ? (size_t)(nl - l) : len - pos, i, klen;
        char *line;

        lineno++;
        pos += n + (nl != NULL);
        if (nl == NULL) {
            /* We write every line whole and replace the file by rename. */
            r = damaged(e, name, lineno, "'%s' has no line end: the file was cut short",
                        excerpt(l, n, x));
            break;
        }
        for (i = 0; i < n && (unsigned char)l[i] >= 0x20 && l[i] != 0x7f; i++)
            ;
        if (i < n) {
            /* Values are written escaped: a raw NUL or control byte is
             * damage, and a NUL would silently hide the rest of a line. */
            r = damaged(e, name, lineno,
                        "%s at column %zu (expected printable text: values "
                        "are written escaped)",
                        l[i] == '\0' ? "a NUL byte" : "a control character", i + 1);
            break;
        }
        if (n == 0 || l[0] == '#')
            continue;
        sp = memchr(l, ' ', n);
        if (sp == NULL) {
            r = damaged(e, name, lineno, "'%s': expected 'key value'", excerpt(l, n, x));
            break;
        }
        klen = (size_t)(sp - l);
        line = strndup(l, n);
        if (line == NULL) {
            r = err_set(e, -ENOMEM, "out of memory");
            break;
        }
        line[klen] = '\0';
        entries++;
        if (strcmp(line, "version") == 0) {
            long long v;

            if (entries > 1)
                r = damaged(e, name, lineno,
                            "'version' %s (expected it once, as the first "
                            "entry)",
                            vline ? "given twice" : "after other entries");
            else if (parse_long(line + klen + 1, 1, LLONG_MAX, &v) < 0)
                r = damaged(e, name, lineno,
                            "bad value for version: '%s' (expected a whole "
                            "number from 1)",
                            excerpt(line + klen + 1, n - klen - 1, x));
            else if (v > STATE_VERSION)
                r = damaged(e, name, lineno,
                            "format version %lld, written by a newer "
                            "smbtuned (expected version %d or older)",
                            v, STATE_VERSION);
            else
                version = v;
            vline = lineno;
        } else if ((i = index_of(line)) == NFIELDS) {
            r = damaged(e, name, lineno,
                        "unknown key '%s' (expected a key of format version "
                        "%d)",
                        excerpt(line, klen, x), STATE_VERSION);
        } else if (fields[i].since > version) {
            r = damaged(e, name, lineno,
                        "'%s' in a file of format version %lld (expected it from version %d "
                        "on)",
                        fields[i].key, version, fields[i].since);
        } else if (seen[i] != 0) {
            r = damaged(e, name, lineno,
                        "'%s' given twice (first at line %d; expected each "
                        "key once)",
                        fields[i].key, seen[i]);
        } else {
            const struct field *fd = &fields[i];
            char want[96];
            int rf = set_field(s, fd, line + klen + 1);

            seen[i] = lineno;
            if (rf == -ENOMEM) {
                r = err_set(e, -ENOMEM, "out of memory");
            } else if (rf < 0) {
                expected(fd, want, sizeof(want));
                r = damaged(e, name, lineno, "bad value for %s: '%s' (expected %s)", fd->key,
                            excerpt(line + klen + 1, n - klen - 1, x), want);
            }
        }
        free(line);
    }
    if (r == 0) /* an empty file ends at line 1 */
        r = check_records(s, seen, lineno > 0 ? lineno : 1, version, name, e);
    if (r < 0)
        state_free(s);
    else
        s->version = (int)version;
    return r;
}

char *state_format(const struct state *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bool failed;

    if (f == NULL)
        return NULL;
    fputs("# smbtuned state: written by smbtuned, read at start-up\n", f);
    fprintf(f, "version %d\n", STATE_VERSION);
    for (size_t i = 0; i < NFIELDS; i++) {
        const struct field *fd = &fields[i];
        const void *p = (const char *)s + fd->off;

        switch (fd->kind) {
        case K_BOOL:
            fprintf(f, "%s %s\n", fd->key, *(const bool *)p ? "yes" : "no");
            break;
        case K_LONG:
            fprintf(f, "%s %ld\n", fd->key, *(const long *)p);
            break;
        case K_SIZE:
            fprintf(f, "%s %zu\n", fd->key, *(const size_t *)p);
            break;
        case K_DOUBLE:
            fprintf(f, "%s %.6f\n", fd->key, *(const double *)p);
            break;
        case K_STR:
            if (*(char *const *)p == NULL)
                break;
            fprintf(f, "%s ", fd->key);
            escape(f, *(char *const *)p);
            fputc('\n', f);
            break;
        }
    }
    /* A write that failed (out of memory) leaves a short text: none. */
    failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        free(buf);
        return NULL;
    }
    return buf;
}

void state_free(struct state *s)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        if (fields[i].kind == K_STR) {
            char **p = (char **)((char *)s + fields[i].off);

            free(*p);
        }
    }
    memset(s, 0, sizeof(*s));
}
