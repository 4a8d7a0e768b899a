/* state: the state file. */
#include "state.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FILE "state"

enum kind { K_BOOL, K_LONG, K_DOUBLE, K_STR, K_SIZE };

struct field {
    const char *key;
    enum kind kind;
    size_t off;
};

#define F(k, kind, member) {k, kind, offsetof(struct state, member)}

static const struct field fields[] = {
    F("have_incumbent", K_BOOL, have_incumbent),
    F("rcvbuf", K_LONG, rcvbuf),
    F("sndbuf", K_LONG, sndbuf),
    F("write_mbps", K_DOUBLE, write_mbps),
    F("read_mbps", K_DOUBLE, read_mbps),
    F("last_written", K_STR, last_written),
    F("hold", K_BOOL, hold),
    F("hold_reason", K_STR, hold_reason),
    F("kernel", K_STR, kernel),
    F("samba", K_STR, samba),
    F("smb_conf", K_STR, smb_conf),
    F("pending", K_BOOL, pending),
    F("pending_commit", K_BOOL, pending_commit),
    F("pending_file", K_STR, pending_edit.file),
    F("pending_written", K_STR, pending_edit.written),
    F("pending_original", K_STR, pending_edit.original),
    F("pending_line_off", K_SIZE, pending_edit.line_off),
    F("pending_line_len", K_SIZE, pending_edit.line_len),
    F("pending_prev", K_STR, pending_edit.prev),
    F("cycles", K_LONG, cycles),
};

int state_set_str(char **dst, const char *src)
{
    char *c = NULL;

    if (src != NULL && (c = strdup(src)) == NULL)
        return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

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
            if (isxdigit((unsigned char)in[1]) && isxdigit((unsigned char)in[2])) {
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
        r = util_parse_long(val, 0, LONG_MAX, &v);
        if (r == 0)
            *(long *)p = (long)v;
        return r;
    case K_SIZE:
        r = util_parse_long(val, 0, LONG_MAX, &v);
        if (r == 0)
            *(size_t *)p = (size_t)v;
        return r;
    case K_DOUBLE:
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

int state_parse(const char *text, const char *name, struct state *s, struct err *e)
{
    char *copy = strdup(text), *line, *save = NULL;
    int lineno = 0, r = 0;

    memset(s, 0, sizeof(*s));
    if (copy == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    for (line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *sp;

        lineno++;
        if (line[0] == '#' || line[0] == '\0')
            continue;
        sp = strchr(line, ' ');
        if (sp == NULL) {
            r = err_set(e, -EINVAL, "%s:%d: expected 'key value'", name, lineno);
            break;
        }
        *sp = '\0';
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
            if (strcmp(fields[i].key, line) != 0)
                continue;
            r = set_field(s, &fields[i], sp + 1);
            if (r < 0)
                err_set(e, r, "%s:%d: bad value for %s: '%s'", name, lineno, line, sp + 1);
            break;
        }
        if (r < 0)
            break;
    }
    free(copy);
    if (r < 0)
        state_free(s);
    return r;
}

char *state_format(const struct state *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        return NULL;
    fputs("# smbtuned state: written by smbtuned, read at start-up\n", f);
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
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
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void state_free(struct state *s)
{
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i].kind == K_STR) {
            char **p = (char **)((char *)s + fields[i].off);

            free(*p);
        }
    }
    memset(s, 0, sizeof(*s));
}

int state_load(const char *dir, struct state *s, struct err *e)
{
    char path[PATH_MAX], *text;
    size_t len;
    int r;

    snprintf(path, sizeof(path), "%s/" STATE_FILE, dir);
    r = util_read_file(path, &text, &len);
    if (r == -ENOENT) {
        memset(s, 0, sizeof(*s));
        return 0;
    }
    if (r < 0)
        return err_set(e, r, "cannot read %s: %s", path, strerror(-r));
    r = state_parse(text, path, s, e);
    free(text);
    return r;
}

int state_save(const char *dir, const struct state *s, struct err *e)
{
    char path[PATH_MAX], *text = state_format(s);
    int r;

    if (text == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    snprintf(path, sizeof(path), "%s/" STATE_FILE, dir);
    r = util_write_atomic(path, text, strlen(text), NULL);
    free(text);
    if (r < 0)
        return err_set(e, r, "cannot write %s: %s", path, strerror(-r));
    return 0;
}
