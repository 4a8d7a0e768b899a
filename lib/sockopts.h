/* sockopts: the value of Samba's `socket options` parameter as an ordered
 * token list. Buffer sizes are read and set; every other token is kept as
 * written and in its place. Pure: no I/O. */
#ifndef SMBTUNE_SOCKOPTS_H
#define SMBTUNE_SOCKOPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

/* Given to sockopts_set (and struct smbconf_change), a size of 0 means
 * "no explicit size": the token is removed and the kernel autotunes. Read
 * back, absence is sockopts_get's `present`, never a size of 0: an explicit
 * SO_RCVBUF=0 turns autotuning off like any other size. */
#define SOCKOPTS_AUTO 0L

/* Samba's compiled-in default, and what a value whose sizes were all
 * removed becomes when nothing else is left (emptying it would silently
 * drop TCP_NODELAY). A value that was empty to begin with stays empty: an
 * admin who wrote `socket options =` switched TCP_NODELAY off. */
#define SOCKOPTS_DEFAULT "TCP_NODELAY"

/* Samba reads the size with atoi() into an int: the largest we write. */
#define SOCKOPTS_MAX_SIZE 2147483647L

enum sockopts_buf { SOCKOPTS_RCVBUF, SOCKOPTS_SNDBUF };

struct sockopts {
    char **tok;
    size_t n;
    bool removed; /* sockopts_set took a token out: an empty list was emptied
                   * by us, not written so (see SOCKOPTS_DEFAULT) */
};

int sockopts_parse(const char *value, struct sockopts *so);
void sockopts_free(struct sockopts *so);

/* One buffer as smbd reads it (lib/util/util_net.c): the last token for
 * the option wins, the text after its `=` goes through atoi into an int,
 * and that int goes to setsockopt unchanged. */
struct sockopts_size {
    bool present;      /* a token names the option; false: the kernel autotunes */
    int value;         /* what smbd passes to setsockopt (0 when absent) */
    bool broken;       /* the token does not say what it does: no `=` (as in
                        * `SO_RCVBUF = 65536`, where Samba passes 1), or a
                        * text atoi reads otherwise (`=64k`, `=4294967296`) */
    const char *token; /* the token that counts (points into so), NULL when absent */
};

struct sockopts_size sockopts_get(const struct sockopts *so, enum sockopts_buf which);

/* glibc's atoi, which Samba uses, exactly: (int)strtol(s, NULL, 10), i.e.
 * leading blanks and a sign, digits up to the first other character,
 * saturation at LONG_MIN/LONG_MAX, then truncation to 32 bits. */
int sockopts_atoi(const char *s);

/* What Linux makes of setsockopt(SO_RCVBUF or SO_SNDBUF, value)
 * (net/core/sock.c): the value is taken as unsigned and clamped at the cap
 * (net.core.rmem_max / wmem_max), so a negative one means the cap; the
 * buffer is twice that, at least the kernel's minimum. Checked on this
 * kind of machine (kernel 6.18, caps 4194304) with setsockopt/getsockopt
 * on a TCP socket: SO_RCVBUF 0, 1 and 1152 give 2304; 1153 gives 2306;
 * 65536 gives 131072; -1, INT_MIN, INT_MAX and 4194305 give 8388608.
 * SO_SNDBUF 0, 1 and 2304 give 4608; 2305 gives 4610; -1 gives 8388608. */
enum sockopts_effect {
    SOCKOPTS_AS_ASKED, /* twice the value */
    SOCKOPTS_AT_MIN,   /* the kernel's minimum: the value is at or below half of it */
    SOCKOPTS_AT_CAP,   /* the cap: the value is at or above it, or negative */
};

struct sockopts_kernel {
    enum sockopts_effect effect;
    long request; /* the size the kernel honours: the value as unsigned, capped */
    long bytes;   /* the buffer it gets (what getsockopt reports) */
};

/* cap: rmem_max or wmem_max; min_bytes: the smallest buffer (2304 for
 * receive, 4608 for send here; see kernel_buffer_mins). Pure. */
struct sockopts_kernel sockopts_kernel(int value, long cap, long min_bytes);

/* Set a buffer (size > 0) or remove it (SOCKOPTS_AUTO). Every token of the
 * option goes, broken fragments included; a size takes the place of the
 * first one, or is appended. */
int sockopts_set(struct sockopts *so, enum sockopts_buf which, long size);

/* Tokens joined by single spaces; SOCKOPTS_DEFAULT when there are none
 * because sockopts_set removed them, "" when there were none to begin
 * with. malloc'ed; NULL when out of memory. */
char *sockopts_format(const struct sockopts *so);

/* The value `base` with its buffers set to rcvbuf and sndbuf (sizes or
 * SOCKOPTS_AUTO), every other token kept: parse, set, format in one.
 * malloc'ed; NULL when out of memory. */
char *sockopts_with(const char *base, long rcvbuf, long sndbuf);

/* Parse a command-line size for buffer `which`: a byte count (262144,
 * 256K, 1M) from min to SOCKOPTS_MAX_SIZE, or `auto` (SOCKOPTS_AUTO).
 * -ERANGE outside that range, the message naming it. */
int sockopts_parse_size(const char *s, enum sockopts_buf which, long min, long *size,
                        struct err *e);

/* Compare two values as Samba sees them: whitespace runs are equal to one
 * space, leading and trailing blanks do not count. */
bool sockopts_same(const char *a, const char *b);

const char *sockopts_name(enum sockopts_buf which);

#endif
