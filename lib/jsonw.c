/* jsonw: JSON text we write is always valid UTF-8, whatever bytes smb.conf
 * (a path, a value) holds. */
#include "jsonw.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), 0 when it is not one.
 * s is NUL-terminated, and a NUL fails every continuation test, so no
 * byte past it is read. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
    }
    return 0;
}

/* JSON text must be UTF-8, and smb.conf (a path, a value) may hold any
 * bytes. Each byte that is not part of a well-formed sequence becomes
 * U+FFFD, the replacement character, as a decoder would show it: the
 * output stays valid for every consumer (jansson would refuse such a
 * string instead, and \u escapes cannot carry raw bytes), and the
 * exact bytes stay readable in the file itself. */
void jsonw_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', f);
    while (*p) {
        size_t n = utf8_len(p);

        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
            p++;
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
            p++;
        } else {
            fwrite(p, 1, n, f);
            p += n;
        }
    }
    fputc('"', f);
}

char *jsonw_sanitize(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    char *out, *o;

    /* Each bad byte becomes three (U+FFFD is EF BF BD in UTF-8). */
    for (const unsigned char *q = p; *q;) {
        size_t k = utf8_len(q);

        n += k == 0 ? 3 : k;
        q += k == 0 ? 1 : k;
    }
    out = malloc(n + 1);
    if (out == NULL)
        return NULL;
    o = out;
    while (*p) {
        size_t k = utf8_len(p);

        if (k == 0) {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            p++;
        } else {
            memcpy(o, p, k);
            o += k;
            p += k;
        }
    }
    *o = '\0';
    return out;
}

int jsonw_print(FILE *f, json_t *o)
{
    char *text =
        o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) : NULL;

    json_decref(o);
    if (text == NULL)
        return -ENOMEM;
    fprintf(f, "%s\n", text);
    free(text);
    return 0;
}

json_t *jsonw_text(const char *s)
{
    char *clean;
    json_t *j;

    if (s == NULL)
        return json_null();
    clean = jsonw_sanitize(s);
    if (clean == NULL)
        return NULL;
    j = json_string(clean);
    free(clean);
    return j;
}
