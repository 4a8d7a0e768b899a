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

#define VERIFY_WINDOW 10    /* verification samples not yet in the reference */
#define VERIFY_MAX_REF 1000 /* a reference's count stops growing here */
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

/* The reference as it stands now (the search's, and the verification
 * samples it took since), for the state file: a restart goes on from it
 * with verify_new. The samples of the window not yet in it are not kept.
 * -EINVAL after an alarm. */
int verify_reference(const struct verify *v, struct search_reference *ref);

/* The samples told since that the reference does not hold (a restart
 * replays them): up to VERIFY_WINDOW of them, oldest first, as ranked log
 * rates per channel (NAN: not measured, or no second channel). 0, or
 * -EINVAL after an alarm. */
int verify_recent(const struct verify *v, double y[][2], int *n);

/* verify_tell for one of verify_recent's samples, on a watch made from
 * verify_reference: it rebuilds what the watch held beside its reference
 * (the window, a run beyond the stall bound) and is judged as a sample. */
int verify_replay(struct verify *v, const double y[2]);

/* What the last verify_tell decided, one line ("drift write -20.1%, ...:
 * new search"); empty when it decided nothing. */
const char *verify_why(const struct verify *v);

#endif
