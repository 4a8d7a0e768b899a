/* config_scan: the pre-scan of /etc/smbtuned.conf that follows
 * libconfuse's lexer (see config_scan.h for what it refuses and why). */
#include "config_scan.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* The rules of libconfuse's lexer (src/lexer.l, 3.3): where a token
 * starts, # and // comment out the rest of the line and slash-star opens a
 * comment that the next star-slash closes; "..." and '...' are strings in
 * which a backslash takes the next character along; a word is a run of
 * characters other than blanks and # " ' = { } ( ) + , *; anything else
 * is one character. */
#define SCAN_DEPTH 8
#define SCAN_SECTIONS 8

struct scan_word {
    const char *s;
    size_t n;
    int line;
};

static bool word_char(char ch)
{
    return ch != '\0' && strchr(" \t\r\n#\"'={}()+,*", ch) == NULL;
}

static int env_error(const char *name, int line, struct err *e)
{
    return err_set(e, -EINVAL,
                   "%s:%d: '${' is not allowed: libconfuse would put in a value from the "
                   "environment of whoever reads the file; write the value itself",
                   name, line);
}

/* A section name followed by '{' at the top level: refuse a second one. */
static int scan_section(struct scan_word *seen, size_t *nseen, const struct scan_word *w,
                        const char *name, struct err *e)
{
    for (size_t i = 0; i < *nseen; i++)
        if (seen[i].n == w->n && memcmp(seen[i].s, w->s, w->n) == 0)
            return err_set(e, -EINVAL,
                           "%s:%d: section %.*s is given twice (first at line %d): give it once",
                           name, w->line, (int)w->n, w->s, seen[i].line);
    /* More sections than there are names: libconfuse refuses the unknown ones. */
    if (*nseen < SCAN_SECTIONS)
        seen[(*nseen)++] = *w;
    return 0;
}

/* A word or string that names an option or a section (the next token is
 * '=', '+=' or '{'): no '|', with which libconfuse would set section|option
 * from the top level, past the checks made for the section's options
 * (config.c's validate() and its "given twice"); and, quoted, no
 * backslash, whose escapes libconfuse decodes after this scan compared the
 * raw text ("\x70robe" { } would be a second section probe). */
static int name_check(const struct scan_word *w, const char *after, bool quoted, const char *name,
                      struct err *e)
{
    after += strspn(after, " \t\r");
    if (*after != '=' && *after != '{' && !(after[0] == '+' && after[1] == '='))
        return 0;
    if (memchr(w->s, '|', w->n) != NULL)
        return err_set(e, -EINVAL,
                       "%s:%d: '%.*s': a name with '|' is not read here: set an option inside "
                       "its section, section { option = value }",
                       name, w->line, (int)w->n, w->s);
    if (quoted && memchr(w->s, '\\', w->n) != NULL)
        return err_set(e, -EINVAL, "%s:%d: '%.*s': a name with a backslash: write it plainly", name,
                       w->line, (int)w->n, w->s);
    return 0;
}

/* An option `url = ...` (word w, the text after it at after) whose line
 * holds an '@' anywhere: a user and password in the URL, which url_parse
 * refuses too, but only after libconfuse has read the value, and an
 * unquoted one ends at a blank, '#', '=' or ',' (smb://admin:pa#ss@fs/x
 * reads as smb://admin:pa, the rest a comment); its messages about what is
 * left, or about the tokens after it, would show a piece of the password.
 * Refused here, the line not shown (nor its comment, which may hold the
 * '@'). */
static int url_check(const struct scan_word *w, const char *after, const char *name, struct err *e)
{
    const char *eq = after + strspn(after, " \t\r");

    if (w->n != 3 || memcmp(w->s, "url", 3) != 0 || *eq != '=')
        return 0;
    if (memchr(eq, '@', strcspn(eq, "\n")) == NULL)
        return 0;
    return err_set(e, -EINVAL,
                   "%s:%d: probe: URL must not carry a user or password (an '@' on the url "
                   "line): name a credentials file instead (credentials =); the line is not "
                   "shown, and an '@' in a comment on it is refused too: move the comment",
                   name, w->line);
}

/* In a double-quoted string at p (a backslash): an escape libconfuse
 * reads as the byte 0 (\0, \00, \000, \x0, \x00), which would cut the
 * value short without a word. */
static bool nul_escape(const char *p)
{
    bool hex = p[1] == 'x';
    const char *d = p + (hex ? 2 : 1), *digits = hex ? "0123456789abcdefABCDEF" : "01234567";
    size_t zeros = strspn(d, "0");

    /* the escape's digits (at most 2 hex or 3 octal) are all zeros */
    return zeros > 0 &&
           (zeros >= (hex ? 2u : 3u) || d[zeros] == '\0' || strchr(digits, d[zeros]) == NULL);
}

/* Blanks (keeping newlines) in out, a copy of text, what lies between from
 * and to in text; nothing without out. */
static void blank(char *out, const char *text, const char *from, const char *to)
{
    for (const char *q = from; out != NULL && q < to; q++)
        if (*q != '\n')
            out[q - text] = ' ';
}

/* config_scan(); with out, also blank the comments in out. */
static int scan(const char *text, const char *name, char *out, struct err *e)
{
    struct scan_word seen[SCAN_SECTIONS], word = {NULL, 0, 0};
    size_t nseen = 0;
    int line = 1, depth = 0, open_line[SCAN_DEPTH];
    const char *p = text;

    while (*p != '\0') {
        if (*p == '\n') {
            line++;
            p++;
        } else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
            blank(out, text, p, p + strcspn(p, "\n"));
            p += strcspn(p, "\n");
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");

            if (end == NULL)
                return err_set(e, -EINVAL,
                               "%s:%d: comment '/*' is not closed: expected '*/' (the rest of "
                               "the file would be ignored)",
                               name, line);
            blank(out, text, p, end + 2);
            for (; p < end; p++)
                line += *p == '\n';
            p = end + 2;
        } else if (*p == '"' || *p == '\'') {
            char quote = *p++;
            int start = line;
            const char *from = p;

            for (; *p != '\0' && *p != quote; p++) {
                if (quote == '"' && p[0] == '$' && p[1] == '{')
                    return env_error(name, line, e);
                if (quote == '"' && *p == '\\' && nul_escape(p))
                    return err_set(e, -EINVAL,
                                   "%s:%d: a NUL byte (\\0) in a string would cut the value "
                                   "short: leave it out",
                                   name, line);
                if (*p == '\\' && p[1] != '\0')
                    p++;
                line += *p == '\n';
            }
            if (*p == '\0')
                return err_set(e, -EINVAL,
                               "%s:%d: string is not closed: expected %c before the end of the "
                               "file",
                               name, start, quote);
            /* libconfuse takes a quoted string as a section's name too:
             * "probe" { } is the section probe. */
            word = (struct scan_word){from, (size_t)(p - from), start};
            p++;
            if (name_check(&word, p, true, name, e) < 0 || url_check(&word, p, name, e) < 0)
                return -EINVAL;
        } else if (p[0] == '$' && p[1] == '{') {
            return env_error(name, line, e);
        } else if (word_char(*p)) {
            word = (struct scan_word){p, 0, line};
            for (; word_char(*p); p++)
                if (p[0] == '$' && p[1] == '{')
                    return env_error(name, line, e);
            word.n = (size_t)(p - word.s);
            if (name_check(&word, p, false, name, e) < 0 || url_check(&word, p, name, e) < 0)
                return -EINVAL;
        } else if (*p == '*' || (*p == '+' && p[1] != '=')) {
            /* libconfuse's lexer drops a stray one without a word */
            return err_set(e, -EINVAL, "%s:%d: a stray '%c': expected an option = value", name,
                           line, *p);
        } else if (*p == '{') {
            if (depth == 0 && word.s != NULL && scan_section(seen, &nseen, &word, name, e) < 0)
                return -EINVAL;
            /* Sections do not nest; lists may hold no braces: any depth
             * beyond this is an error of libconfuse's anyway. */
            if (depth == SCAN_DEPTH)
                return err_set(e, -EINVAL, "%s:%d: braces nested too deeply", name, line);
            open_line[depth++] = line;
            word.s = NULL;
            p++;
        } else if (*p == '}') {
            if (depth == 0)
                return err_set(e, -EINVAL, "%s:%d: '}' without a '{' before it", name, line);
            depth--;
            word.s = NULL;
            p++;
        } else {
            /* Blanks leave a section name pending; = ( ) + , end it. */
            if (*p != ' ' && *p != '\t' && *p != '\r')
                word.s = NULL;
            p++;
        }
    }
    if (depth > 0)
        return err_set(e, -EINVAL,
                       "%s:%d: '{' is not closed: expected '}' before the end of the file", name,
                       open_line[depth - 1]);
    return 0;
}

int config_scan(const char *text, const char *name, struct err *e)
{
    return scan(text, name, NULL, e);
}

int config_scan_blank(const char *text, const char *name, char *out, struct err *e)
{
    memcpy(out, text, strlen(text) + 1);
    return scan(text, name, out, e);
}
