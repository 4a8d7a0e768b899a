/* verify: is the search's winner still the rate it was?
 *
 * After a search has converged, the daemon samples its winner now and then
 * (one sample a cycle); verify_tell() says when the rates have drifted far
 * enough, and surely enough, for a new search. All it knows of the search
 * is the winner's reference (search_reference: per channel the rate that
 * ranks it, its mean, spread and stall bound) and the smallest drift worth
 * a new search. No I/O; the statistic is described in verify.c. */
#ifndef SMBTUNE_VERIFY_H
#define SMBTUNE_VERIFY_H

#include "search.h"

#define VERIFY_WINDOW 10 /* verification samples not yet in the reference */
#define VERIFY_WHY_LEN 512

enum verify_verdict {
    VERIFY_OK,
    VERIFY_RESEARCH, /* the winner drifted: start a new search */
};

struct verify;

/* Watch a winner from its reference; drift_min is the smallest drift worth
 * a new search (search_params.drift_min: 0.10). Returns 0, -EINVAL for a
 * reference without channels or a negative drift_min, -ENOMEM; *vp is NULL
 * on failure. */
int verify_new(const struct search_reference *ref, double drift_min, struct verify **vp);

/* verify_new for the winner of converged search s, with its drift_min.
 * -EINVAL before convergence. */
int verify_of_search(const struct search *s, struct verify **vp);

/* NULL is allowed. */
void verify_free(struct verify *v);

/* One sample of the winner. Returns VERIFY_OK, VERIFY_RESEARCH once a
 * drift of at least drift_min is significant (and from then on), or
 * -EINVAL for an infinite rate. */
int verify_tell(struct verify *v, const struct search_sample *x);

/* What the last verify_tell decided, one line ("drift write -20.1%, ...:
 * new search"); empty when it decided nothing. */
const char *verify_why(const struct verify *v);

#endif
