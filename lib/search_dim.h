/* search_dim: one buffer of the search (or, tied, both): its
 * configurations ("levels") and their samples, the statistics that compare
 * a candidate with the incumbent, and the queue of neighbours to try.
 * Private to the search: only lib/search.c and lib/search_decide.c drive
 * it, and no caller of the search sees these structs (struct search is
 * opaque). No I/O. */
#ifndef SMBTUNE_SEARCH_DIM_H
#define SMBTUNE_SEARCH_DIM_H

#include <stdbool.h>

#include "search.h"

/* One configuration of one buffer, as the search knows it. */
struct search_level {
    long size; /* SEARCH_AUTO or bytes */
    bool lattice;
    bool tabu;   /* has been the incumbent: never a candidate again */
    int strikes; /* trial samples in a row that ended a trial */
    int aborts;  /* samples that ended a trial */
    int timeouts;
    int since; /* samples it had when it became the incumbent */
    int n;
    double w[SEARCH_LEVEL_CAP], r[SEARCH_LEVEL_CAP]; /* log rates, NAN if not measured */
    /* refreshed after every sample */
    int kept;
    double mean;
    int fresh; /* samples since it became the incumbent */
};

/* One buffer (or, tied, both). */
/* The futility rule's bar on the dearer side's chance of showing a gain
 * of min_gain in the samples left (FUT_POWER_MIN in search_dim_cmp.c); the
 * why lines quote it. */
#define SEARCH_FUTILE_CHANCE 0.10

struct search_dim {
    const char *name; /* "SO_RCVBUF", "SO_SNDBUF", "SO_RCVBUF/SO_SNDBUF" */
    int rank;         /* enum search_rate: 0 the write rate ranks it, 1 the read rate, 2 both */
    int nlevels;
    struct search_level lv[SEARCH_MAX_LEVELS];
    int inc;  /* incumbent level */
    int cand; /* candidate on trial, -1 none */
    int look; /* the comparison is judged when both sides have this many */
    int cap;  /* samples the candidate may take: max_samples, or twice */
    int queue[2 * SEARCH_MAX_LEVELS];
    bool queue_walk[2 * SEARCH_MAX_LEVELS];
    int nqueue;
    bool cand_walk; /* the candidate came from a walk down from the cap */
    int walk_best;  /* best rejected walk point so far, -1 none */
    bool walked;    /* the walk was queued for a broken incumbent */
    int last_dir;   /* +1 the last move went up, -1 down, 0 neither */
    bool owed;      /* a trial sample ended its trial: the incumbent is
                     * measured once before the next trial sample */
    bool done;
    double sigma; /* pooled spread of log rates (kept samples) */
    double df;
    double reject; /* outlier bound around a level's median */
};

/* A comparison's outcome: more samples, the candidate wins, it is dropped. */
enum search_verdict { SEARCH_MORE, SEARCH_ACCEPT, SEARCH_REJECT };

/* What decided a comparison, for the journal. */
struct search_cmp {
    double d; /* log(candidate / incumbent) */
    double p; /* of the test that decides */
    int kc, ki;
    bool futile; /* decided by futility: the cheaper side kept */
    bool stay;   /* decided by futility the other way: AUTO or a smaller
                  * size, a candidate against a size, can neither be shown
                  * not worse nor be a gain worth having; the incumbent is
                  * kept */
    double safe; /* then: the gain that was ruled out (FUT_SAFE_GAIN or
                  * FUT_SAFE_MOVE in search_dim_cmp.c); the why line names it */
    int left;    /* then: the samples the comparison could still have taken */
};

/* ---- levels ---- */

/* Is level i AUTO? Is level a preferred to level b, on a tie (AUTO to any
 * size, a smaller size to a larger one)? */
bool search_dim_is_auto(const struct search_dim *d, int i);
bool search_dim_preferred(const struct search_dim *d, int a, int b);
/* The level of a size, -1 none. */
int search_dim_level_of(const struct search_dim *d, long size);
/* Has level i ended too many trials to be tried again? */
bool search_dim_dead(const struct search_dim *d, int i);
/* The log of the rate that ranks by rank (enum search_rate), from the log
 * rates of one sample. */
double search_dim_ranked(int rank, double w, double r);
/* Level i's ranked log rates from sample `from` on, into out; how many. */
int search_dim_values(const struct search_dim *d, int i, int from, double *out);
/* After a sample: every level's robust mean, the pooled spread, the
 * outlier bound. */
void search_dim_refresh(struct search_dim *d);
/* Robust mean of one direction (0 write, 1 read) of level i; the samples
 * it rests on go to *kept (when given). */
double search_dim_dir_mean_n(const struct search_dim *d, int i, int dir, int *kept);
double search_dim_dir_mean(const struct search_dim *d, int i, int dir);
/* Lattice: AUTO (if observable), the powers of two from min_size below
 * cap, then cap; and an off-lattice size inserted in order. */
int search_dim_lattice(struct search_dim *d, const struct search_params *p, long cap);
int search_dim_insert(struct search_dim *d, long size, bool lattice);
/* A log rate (NAN when not measured); one sample into level l. */
double search_dim_log_rate(double rate);
void search_dim_add(struct search_level *l, double w, double r, bool timeout);
/* Per-direction abort thresholds (log rates) of d's trial: below one, a
 * trial sample ends the trial; NAN for a direction on no trial. */
void search_dim_thresholds(const struct search_params *p, const struct search_dim *d, double *thr);
/* The incumbent as verification's reference (search_reference). */
void search_dim_channel(const struct search_dim *d, struct search_channel *c);

/* ---- the comparison ---- */

/* Candidate level c against incumbent i, with what decided it in *out. */
enum search_verdict search_dim_compare(const struct search_params *p, const struct search_dim *d,
                                       int c, int i, struct search_cmp *out);
/* The looks: the first one at or after n samples a side. */
int search_dim_first_look(const struct search_params *p, const struct search_dim *d, int n);
/* Can level l take another sample (cand: under the candidate's cap)? */
bool search_dim_can_grow(const struct search_dim *d, const struct search_level *l, bool cand);
/* Has the comparison reached its look (or can it not get there)? */
bool search_dim_at_look(const struct search_dim *d);
/* Between looks: may the futility rule end the comparison now, with no
 * move (the incumbent stays)? What decided it goes to *out. */
bool search_dim_futile_between(const struct search_params *p, const struct search_dim *d,
                               struct search_cmp *out);
/* Is level a significantly below level b? */
bool search_dim_below(const struct search_dim *d, int a, int b);

/* ---- the queue of neighbours ---- */

/* The neighbours of a new incumbent, in the order they are tried. */
void search_dim_queue(const struct search_params *p, struct search_dim *d);
/* Level i is tried again next. */
void search_dim_push_front(const struct search_params *p, struct search_dim *d, int i, bool walk);
/* A size that times out is no place to climb from: the walk down from the
 * cap goes first. */
void search_dim_walk_if_broken(const struct search_params *p, struct search_dim *d);
/* The next candidate, false when none is left. */
bool search_dim_pop(const struct search_params *p, struct search_dim *d);

#endif
