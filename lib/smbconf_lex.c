/* smbconf_lex: Samba's rules for the lines of smb.conf (lib/util/tini.c):
 * whole-line comments, `\` continuations, collapsed blanks, `[section]`
 * and `name = value`, and names compared as strwicmp does. Pure. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "smbconf_int.h"

bool smbconf_wequal(const char *a, const char *b)
{
    for (;;) {
        while (isspace((unsigned char)*a))
            a++;
        while (isspace((unsigned char)*b))
            b++;
        if (*a == '\0' || *b == '\0')
            return *a == *b;
        if (toupper((unsigned char)*a) != toupper((unsigned char)*b))
            return false;
        a++;
        b++;
    }
}

static int append(struct smbconf_lline *ll, size_t *cap, char ch)
{
    if (ll->tlen + 1 >= *cap) {
        size_t ncap = *cap ? *cap * 2 : 128;
        char *nt = realloc(ll->text, ncap);

        if (nt == NULL)
            return -ENOMEM;
        ll->text = nt;
        *cap = ncap;
    }
    ll->text[ll->tlen++] = ch;
    ll->text[ll->tlen] = '\0';
    return 0;
}

/* See smbconf_int.h. */
int smbconf_next_lline(const char *b, size_t len, size_t *pos, int *lineno,
                       struct smbconf_lline *ll, size_t *cap)
{
    size_t p = *pos;

    for (;;) {
        size_t s = p;

        while (p < len && b[p] != '\n' && isspace((unsigned char)b[p]))
            p++;
        if (p >= len) {
            *pos = p;
            return 0;
        }
        if (b[p] == '#' || b[p] == ';') {
            /* A comment runs to its newline; a `\` at its end does not
             * continue it. */
            while (p < len && b[p] != '\n')
                p++;
        }
        if (p >= len) {
            *pos = p;
            return 0;
        }
        if (b[p] == '\n') {
            p++;
            (*lineno)++;
            continue;
        }
        ll->start = s;
        ll->cstart = p;
        ll->line = *lineno;
        ll->tlen = 0;
        /* Make sure text exists even when the line turns out empty. */
        if (append(ll, cap, 'x') < 0)
            return -ENOMEM;
        ll->tlen = 0;
        for (; p < len; p++) {
            unsigned char ch = (unsigned char)b[p];
            size_t n = ll->tlen;

            if (ch == '\n') {
                if (n > 0 && ll->text[n - 1] == '\\') {
                    ll->tlen -= 1;
                    (*lineno)++;
                    continue;
                }
                if (n > 1 && ll->text[n - 2] == '\\' && isspace((unsigned char)ll->text[n - 1])) {
                    ll->tlen -= 2;
                    (*lineno)++;
                    continue;
                }
                break;
            }
            if (n > 0 && isspace((unsigned char)ll->text[n - 1]) && isspace(ch))
                continue;
            if (append(ll, cap, (char)ch) < 0)
                return -ENOMEM;
        }
        ll->text[ll->tlen] = '\0';
        ll->end = p;
        /* Keep a CR of a CRLF ending out of the line: it is rewritten with
         * the rest of the terminator, untouched. */
        if (p > ll->cstart && b[p - 1] == '\r')
            ll->end = p - 1;
        if (p < len) {
            p++;
            (*lineno)++;
        }
        ll->next = p;
        *pos = p;
        return 1;
    }
}

/* tini's trim_one_space, in place; returns the new start. */
static char *trim_one(char *s)
{
    size_t n;

    if (isspace((unsigned char)s[0]))
        s++;
    n = strlen(s);
    if (n > 0 && isspace((unsigned char)s[n - 1]))
        s[n - 1] = '\0';
    return s;
}

enum smbconf_kind smbconf_split(char *text, char **name, char **value)
{
    char *eq;

    *name = *value = NULL;
    if (text[0] == '[') {
        char *close = strchr(text, ']');

        if (close != NULL) {
            *close = '\0';
            *name = text + 1;
        }
        return SMBCONF_SECTION;
    }
    eq = strchr(text, '=');
    if (eq == NULL)
        return SMBCONF_OTHER;
    *eq = '\0';
    *name = trim_one(text);
    *value = trim_one(eq + 1);
    return SMBCONF_PARAM;
}
