/* sockopts: the value of Samba's `socket options` parameter as an ordered
 * token list. Buffer sizes are read and set; every other token is kept as
 * written and in its place. Pure: no I/O. */
#ifndef SMBTUNE_SOCKOPTS_H
#define SMBTUNE_SOCKOPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* A buffer size of 0 means "no explicit size": the kernel autotunes. */
#define SOCKOPTS_AUTO 0L

/* Samba's compiled-in default, and what a value that would otherwise be
 * empty becomes (an empty value would silently drop TCP_NODELAY). */
#define SOCKOPTS_DEFAULT "TCP_NODELAY"

/* Samba reads the size with atoi() into an int. */
#define SOCKOPTS_MAX_SIZE 2147483647L

enum sockopts_buf { SOCKOPTS_RCVBUF, SOCKOPTS_SNDBUF };

struct sockopts {
    char **tok;
    size_t n;
};

int sockopts_parse(const char *value, struct sockopts *so);
void sockopts_free(struct sockopts *so);

/* The size smbd really asks the kernel for, following Samba's rules: the
 * last token for that option wins, its number is read with atoi, and a
 * token without `=NUMBER` (as in the broken `SO_RCVBUF = 65536`) sets 1,
 * i.e. the kernel minimum. SOCKOPTS_AUTO when the option is absent.
 * *broken (may be NULL) tells whether the option is present in a form
 * that does not mean what it looks like. */
long sockopts_get(const struct sockopts *so, enum sockopts_buf which, bool *broken);

/* Set a buffer (size > 0) or remove it (SOCKOPTS_AUTO). Every token of the
 * option goes, broken fragments included; a size takes the place of the
 * first one, or is appended. */
int sockopts_set(struct sockopts *so, enum sockopts_buf which, long size);

/* Tokens joined by single spaces; SOCKOPTS_DEFAULT when there are none.
 * malloc'ed; NULL when out of memory. */
char *sockopts_format(const struct sockopts *so);

/* Parse a command-line buffer size: a byte count (262144, 256K, 1M) or
 * `auto` (SOCKOPTS_AUTO). */
int sockopts_parse_size(const char *s, long *size, struct err *e);

/* Compare two values as Samba sees them: whitespace runs are equal to one
 * space, leading and trailing blanks do not count. */
bool sockopts_same(const char *a, const char *b);

const char *sockopts_name(enum sockopts_buf which);

#endif
