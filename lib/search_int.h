/* search_int: what search.c and search_decide.c share; private to the
 * search (callers see search.h, where struct search stays opaque). */
#ifndef SMBTUNE_SEARCH_INT_H
#define SMBTUNE_SEARCH_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "search.h"
#include "search_dim.h"

struct search {
    struct search_params p;
    int ndims;
    struct search_dim dim[2]; /* untied: [0] rcvbuf, [1] sndbuf; tied: [0] */
    int total;
    bool done;
    struct search_reference ref; /* the winner's, taken when done */
    char why[SEARCH_WHY_LEN];
    int why_lines;
    unsigned why_moves; /* bit i: line i of why moved an incumbent */
};

/* The rates' names, and a line added to the why text (search_why).
 * Static, as config_int.h's copy_str, so that both files keep the plain
 * names. */
static const char *const rate_names[] = {"write", "read", "write+read"};

static inline void why(struct search *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline void why(struct search *s, const char *fmt, ...)
{
    size_t len = strlen(s->why);
    if (len + 2 >= sizeof(s->why))
        return;
    if (len)
        s->why[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why + len, sizeof(s->why) - len, fmt, ap);
    va_end(ap);
    s->why_lines++;
}

/* What a dim decides from its samples (search_decide.c): as much as the
 * samples at hand allow (search_advance), the level it wants measured
 * next (search_want), and whether a sample of its candidate ended the
 * trial (search_trial_ended). */
void search_advance(struct search *s, struct search_dim *d);
int search_want(const struct search *s, const struct search_dim *d);
bool search_trial_ended(struct search *s, struct search_dim *d, double w, double r,
                        const struct search_sample *x);

#endif
