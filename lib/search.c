/* search: see search.h.
 *
 * How it goes. Each buffer is a "dim" with its own incumbent, its own
 * queue of neighbours to try and its own samples per configuration
 * ("level"). Untied, the two buffers are searched at the same time: one
 * probe gives a write rate and a read rate, and each ranks only its own
 * buffer, so the configuration asked for carries the rcvbuf that the
 * rcvbuf dim wants measured and the sndbuf that the sndbuf dim wants, and
 * every sample answers a question for both. One after the other would
 * spend each sample on one question and throw the other rate away: about
 * twice the samples for the same decisions. The price is an assumption:
 * a buffer's rate does not depend on the other buffer by more than the
 * noise (true of the measurements in FACTS.md: a small SO_SNDBUF costs the
 * write direction nothing measurable). Tied, there is one dim, ranked by
 * the harmonic mean of both rates (the rate of a workload that writes and
 * reads the same amount).
 *
 * A dim starts by measuring its incumbent, then tries neighbours one at a
 * time: from a size, the next lattice size in the direction that last won,
 * AUTO, then the other sizes next to it; from AUTO, a walk down from the
 * cap in steps of four (cap, cap/4, ...), which stops at the first point
 * significantly below a point above it (on the rising side of the curve
 * every smaller size is worse still). A size that times out is no place to
 * climb from: from it the walk is tried too. Levels that were incumbents
 * are never tried again, so the search cannot cycle.
 *
 * A candidate is compared with the incumbent on the rate that ranks the
 * dim, in logs of rates, with the spread pooled over every configuration
 * of the dim (multiplicative noise is the same for all of them, and a
 * pooled spread lets three samples a side decide a factor of two):
 * - a larger size (a "gain" candidate) must beat the incumbent by at least
 *   min_gain and be significantly better (one-sided t test at alpha);
 * - AUTO, or a smaller size (a "preferred" candidate), must be shown not
 *   worse than the incumbent by more than min_gain (non-inferiority);
 *   then it wins the tie: AUTO, then less memory per connection;
 * - either is dropped as soon as an optimistic bound on it could not pass
 *   its test with max_samples a side (futility), which keeps the cost of a
 *   candidate that is merely equal small when the noise is low and bounded
 *   when it is high.
 * Both sides are sampled up to the next look (3, 5, 8, 12, ... samples a
 * side) and judged there; a trial sample far below the incumbent ends the
 * trial at once (the candidate is tried again next, and dropped when two
 * trial samples in a row end trials). After a move the new incumbent takes
 * min_samples more samples before it is compared again: the samples that
 * made it win were lucky ones. */
#include "search.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

/* Outliers: a sample further than REJECT_K spreads from its level's median
 * is dropped, and the spread used for that is never taken below
 * REJECT_FLOOR (about 5%), so that samples within 22% of the median always
 * count. The stalls the bound is for are far outside it. */
#define REJECT_K 4.0
#define REJECT_FLOOR 0.05
/* The preference tests (AUTO, smaller) may make more false moves per look
 * than the gain tests (alpha): a false preference move costs at most
 * min_gain by construction (the test is one of non-inferiority at that
 * margin), a false gain move costs memory for nothing; and showing that two
 * rates are within 3% of each other takes many samples at a small alpha. */
#define PREF_ALPHA 0.03
/* Futility: a candidate is dropped when an optimistic bound on its gain (at
 * this one-sided level) falls below what it would have to show at the
 * sample cap. Before FUTILITY_MIN samples it is dropped only when the bound
 * is below the bar itself: early on, the incumbent's samples still carry
 * the luck that made it win. */
#define FUTILITY_ALPHA 0.02
#define FUTILITY_MIN 8
/* A gain candidate is worth chasing only if it may gain twice min_gain:
 * gains just above min_gain would take hundreds of samples to prove. */
#define GAIN_ZONE 2.0
/* At the cap, a comparison still leaning towards the candidate (its test
 * below this level) may go on to twice the cap: a real gain of a few
 * spreads' worth takes that long to show at high noise. */
#define EXTEND_P 0.15
/* The walk down from the cap stops at a point below a higher one at this
 * level. */
#define WALK_STOP_ALPHA 0.05
/* Rates at or below this (a timeout that reached nothing) count as this. */
#define RATE_FLOOR 1e-12
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
    bool done;
    double sigma; /* pooled spread of log rates (kept samples) */
    double df;
    double reject; /* outlier bound around a level's median */
};

struct search {
    struct search_params p;
    int ndims;
    struct search_dim dim[2]; /* untied: [0] rcvbuf, [1] sndbuf; tied: [0] */
    int total;
    bool done;
    struct search_reference ref; /* the winner's, taken when done */
    char why[SEARCH_WHY_LEN];
};

enum verdict { MORE, ACCEPT, REJECT };

struct cmp {
    double d; /* log(candidate / incumbent) */
    double p; /* of the test that decides */
    int kc, ki;
};

static const char *const rate_names[] = {"write", "read", "write+read"};

static void why(struct search *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void why(struct search *s, const char *fmt, ...)
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
}

const char *search_size_str(long size, char *buf, size_t len)
{
    if (size == SEARCH_AUTO)
        snprintf(buf, len, "auto");
    else
        snprintf(buf, len, "%ld", size);
    return buf;
}

void search_params_default(struct search_params *p)
{
    *p = (struct search_params){
        .min_size = 4096,
        /* conf/smbtuned.conf's max_size = 16M; the kernel's cap applies. */
        .max_rcvbuf = 16777216,
        .max_sndbuf = 16777216,
        .auto_observable = true,
        .mapping = SEARCH_RANK_SERVER,
        .tied = false,
        .min_gain = 0.03,
        .abort_ratio = 0.5,
        .min_samples = 3,
        .max_samples = 40,
        .max_total = 400,
        .alpha = 0.001,
        .drift_min = 0.10,
    };
}

/* ---- levels ---- */

static bool is_auto(const struct search_dim *d, int i)
{
    return d->lv[i].size == SEARCH_AUTO;
}

static int auto_level(const struct search_dim *d)
{
    return d->nlevels > 0 && is_auto(d, 0) ? 0 : -1;
}

static int level_of(const struct search_dim *d, long size)
{
    for (int i = 0; i < d->nlevels; i++)
        if (d->lv[i].size == size)
            return i;
    return -1;
}

static int top_level(const struct search_dim *d)
{
    return d->nlevels - 1;
}

/* Next lattice level above (dir > 0) or below (dir < 0) level i, -1 none. */
static int lattice_step(const struct search_dim *d, int i, int dir)
{
    long size = d->lv[i].size;
    if (dir > 0) {
        for (int j = 0; j < d->nlevels; j++)
            if (d->lv[j].lattice && d->lv[j].size > size)
                return j;
    } else {
        for (int j = d->nlevels - 1; j >= 0; j--)
            if (d->lv[j].lattice && d->lv[j].size < size && !is_auto(d, j))
                return j;
    }
    return -1;
}

/* AUTO is preferred to any size, a smaller size to a larger one. */
static bool preferred(const struct search_dim *d, int a, int b)
{
    if (is_auto(d, a))
        return !is_auto(d, b);
    if (is_auto(d, b))
        return false;
    return d->lv[a].size < d->lv[b].size;
}

static bool dead(const struct search_dim *d, int i)
{
    const struct search_level *l = &d->lv[i];
    return l->strikes >= 2 && 2 * l->aborts > l->n;
}

/* The log of the rate that ranks by `rank`, from the log rates of one
 * sample. */
static double ranked(int rank, double w, double r)
{
    if (rank == SEARCH_RATE_WRITE)
        return w;
    if (rank == SEARCH_RATE_READ)
        return r;
    /* log of the harmonic mean 2 / (1/W + 1/R), computed stably */
    double m = fmax(-w, -r);
    return log(2) - (m + log(exp(-w - m) + exp(-r - m)));
}

/* The level's ranked values from sample `from` on; returns how many. */
static int level_values(const struct search_dim *d, int i, int from, double *out)
{
    const struct search_level *l = &d->lv[i];
    int n = 0;
    for (int j = from; j < l->n; j++) {
        double v = ranked(d->rank, l->w[j], l->r[j]);
        if (!isnan(v))
            out[n++] = v;
    }
    return n;
}

/* Recompute every level's robust mean and the dim's pooled spread. */
static void dim_refresh(struct search_dim *d)
{
    static const int maxd = SEARCH_MAX_LEVELS * SEARCH_LEVEL_CAP;
    double devs[SEARCH_MAX_LEVELS * SEARCH_LEVEL_CAP];
    double v[SEARCH_LEVEL_CAP];
    int nd = 0;

    for (int i = 0; i < d->nlevels; i++) {
        int n = level_values(d, i, 0, v);
        if (n < 2)
            continue;
        double med = stats_median(v, n);
        bool zero = n % 2 == 1; /* drop the median sample itself once */
        for (int j = 0; j < n && nd < maxd; j++) {
            if (zero && v[j] == med)
                zero = false;
            else
                devs[nd++] = fabs(v[j] - med);
        }
    }
    double scale = nd > 0 ? stats_mad_scale(devs, nd) : REJECT_FLOOR;
    d->reject = REJECT_K * fmax(scale, REJECT_FLOOR);

    double ss = 0, df = 0;
    for (int i = 0; i < d->nlevels; i++) {
        struct search_level *l = &d->lv[i];
        struct stats_summary sum;
        int n = level_values(d, i, 0, v);
        /* With fewer than three samples nothing was rejected: such a level
         * may hold a stall, and stays out of the spread. */
        if (n >= 3 && stats_summarize(v, n, d->reject, &sum) == 0) {
            ss += sum.ss;
            df += sum.kept - 1;
        }
        /* A level's rate is judged on its samples since it became the
         * incumbent: the ones that made it win were high, or it would not
         * have won, and its neighbours would look worse than they are. */
        l->fresh = level_values(d, i, l->since, v);
        n = level_values(d, i, 0, v);
        if (n == 0 || stats_summarize(v, n, d->reject, &sum) < 0) {
            l->kept = 0;
            l->mean = NAN;
        } else {
            l->kept = sum.kept;
            l->mean = sum.mean;
        }
    }
    d->df = df;
    d->sigma = df > 0 ? fmax(sqrt(ss / df), SEARCH_SIGMA_FLOOR) : NAN;
}

/* Robust mean of one direction (0 write, 1 read) of a level, for the
 * tied dim's per-direction abort thresholds and the estimates; the samples
 * it rests on go to *kept (when given). */
static double level_dir_mean_n(const struct search_dim *d, int i, int dir, int *kept)
{
    const struct search_level *l = &d->lv[i];
    double v[SEARCH_LEVEL_CAP];
    struct stats_summary sum;
    int n = 0, k = 0;
    double mean = NAN;

    if (d->rank == dir) {
        k = l->kept;
        mean = l->mean;
    } else {
        for (int j = 0; j < l->n; j++) {
            double x = dir == 0 ? l->w[j] : l->r[j];
            if (!isnan(x))
                v[n++] = x;
        }
        if (n > 0 && stats_summarize(v, n, d->reject, &sum) == 0) {
            k = sum.kept;
            mean = sum.mean;
        }
    }
    if (kept)
        *kept = k;
    return mean;
}

static double level_dir_mean(const struct search_dim *d, int i, int dir)
{
    return level_dir_mean_n(d, i, dir, NULL);
}

/* ---- the comparison ---- */

static double t_upper(double t, double df)
{
    return 1 - stats_t_cdf(t, df);
}

static enum verdict compare(const struct search *s, const struct search_dim *d, int c, int i,
                            struct cmp *out)
{
    const struct search_level *lc = &d->lv[c], *li = &d->lv[i];
    int min = s->p.min_samples, max = s->p.max_samples;

    *out = (struct cmp){.d = lc->mean - li->mean, .p = 1, .kc = lc->kept, .ki = li->kept};
    if (lc->kept < min || li->kept < min || isnan(d->sigma))
        return MORE;

    double se = d->sigma * sqrt(1.0 / lc->kept + 1.0 / li->kept);
    bool pref = preferred(d, c, i);
    double alpha = pref ? PREF_ALPHA : s->p.alpha;
    double bar = pref ? log1p(-s->p.min_gain) : log1p(s->p.min_gain);
    double dh = out->d;

    if (pref) {
        out->p = t_upper((dh - bar) / se, d->df);
        if (out->p < alpha)
            return ACCEPT;
    } else {
        out->p = t_upper(dh / se, d->df);
        if (dh >= bar && out->p < alpha)
            return ACCEPT;
    }

    /* Futility: what the estimate must exceed once both sides have
     * max_samples, against an optimistic bound on it now. */
    double se_max = d->sigma * sqrt(1.0 / fmax(lc->kept, max) + 1.0 / fmax(li->kept, max));
    double tq = stats_t_quantile(1 - alpha, d->df);
    double need = pref ? bar + tq * se_max : fmax(GAIN_ZONE * bar, tq * se_max);
    /* Early on, the incumbent's samples still carry the luck that made it
     * win: a candidate is dropped only when it cannot even reach the bar. */
    if (lc->kept < FUTILITY_MIN)
        need = bar;
    if (dh + stats_t_quantile(1 - FUTILITY_ALPHA, d->df) * se < need)
        return REJECT;
    return MORE;
}

/* The looks: a comparison is judged only when both sides have min_samples,
 * then half as many again, and so on (3, 5, 8, 12, 18, 27, 41, 62, ...) up
 * to max_samples. A test repeated after every sample has that many chances
 * to be fooled; spaced looks keep them few, so each can be less strict. */
static int first_look(const struct search *s, const struct search_dim *d, int n)
{
    int look = s->p.min_samples;
    while (look < n && look < d->cap)
        look = (3 * look + 1) / 2;
    return look < d->cap ? look : d->cap;
}

static bool can_grow(const struct search_dim *d, const struct search_level *l, bool cand)
{
    return l->n < SEARCH_LEVEL_CAP && (!cand || l->kept < d->cap);
}

/* Has the comparison reached its look (or can it not get there)? */
static bool at_look(const struct search_dim *d)
{
    const struct search_level *lc = &d->lv[d->cand], *li = &d->lv[d->inc];
    return (lc->kept >= d->look || !can_grow(d, lc, true)) &&
           (li->kept >= d->look || !can_grow(d, li, false));
}

/* ---- the queue of neighbours ---- */

static void push(struct search *s, struct search_dim *d, int i, bool walk)
{
    if (i < 0 || i == d->inc || d->lv[i].tabu || dead(d, i))
        return;
    if (is_auto(d, i) && !s->p.auto_observable)
        return;
    for (int j = 0; j < d->nqueue; j++)
        if (d->queue[j] == i)
            return;
    d->queue_walk[d->nqueue] = walk;
    d->queue[d->nqueue++] = i;
}

/* Put level i first in the queue: it is tried again next. */
static void push_front(struct search *s, struct search_dim *d, int i, bool walk)
{
    push(s, d, i, walk);
    for (int j = d->nqueue - 1; j > 0; j--) {
        int q = d->queue[j];
        bool w = d->queue_walk[j];
        d->queue[j] = d->queue[j - 1];
        d->queue_walk[j] = d->queue_walk[j - 1];
        d->queue[j - 1] = q;
        d->queue_walk[j - 1] = w;
    }
}

static void push_walk(struct search *s, struct search_dim *d)
{
    int step = 0;
    for (int i = top_level(d); i >= 0; i--) {
        if (!d->lv[i].lattice || is_auto(d, i))
            continue;
        if (step++ % 2 == 0)
            push(s, d, i, true);
    }
}

static bool broken(const struct search_level *l)
{
    return l->n > 0 && 2 * l->timeouts > l->n;
}

static void build_queue(struct search *s, struct search_dim *d)
{
    d->nqueue = 0;
    d->walk_best = -1;
    d->walked = false;
    if (is_auto(d, d->inc)) {
        push_walk(s, d);
        return;
    }
    int up = lattice_step(d, d->inc, +1), down = lattice_step(d, d->inc, -1);
    if (d->last_dir > 0)
        push(s, d, up, false);
    else if (d->last_dir < 0)
        push(s, d, down, false);
    /* Without AUTO, the largest size stands in for it: the one jump that
     * gets a search off a plateau of slow small sizes, where every
     * neighbour is as slow (8192 and 16384 both stall on loopback). */
    push(s, d, s->p.auto_observable ? auto_level(d) : top_level(d), false);
    push(s, d, up, false);
    push(s, d, down, false);
}

/* A size that times out is no place to climb from (its neighbours stall
 * too): once its own samples show it, the walk down from the cap goes
 * first. */
static void walk_if_broken(struct search *s, struct search_dim *d)
{
    if (d->walked || is_auto(d, d->inc) || !broken(&d->lv[d->inc]))
        return;
    d->walked = true;
    int keep[2 * SEARCH_MAX_LEVELS], n = d->nqueue;
    bool keep_walk[2 * SEARCH_MAX_LEVELS];
    memcpy(keep, d->queue, sizeof(keep[0]) * (size_t)n);
    memcpy(keep_walk, d->queue_walk, sizeof(keep_walk[0]) * (size_t)n);
    d->nqueue = 0;
    push_walk(s, d);
    for (int j = 0; j < n; j++)
        push(s, d, keep[j], keep_walk[j]);
}

static bool pop(const struct search *s, struct search_dim *d)
{
    while (d->nqueue > 0) {
        int i = d->queue[0];
        bool walk = d->queue_walk[0];
        d->nqueue--;
        memmove(d->queue, d->queue + 1, sizeof(d->queue[0]) * (size_t)d->nqueue);
        memmove(d->queue_walk, d->queue_walk + 1, sizeof(d->queue_walk[0]) * (size_t)d->nqueue);
        if (i == d->inc || d->lv[i].tabu || dead(d, i))
            continue;
        d->cand = i;
        d->cand_walk = walk;
        d->cap = s->p.max_samples;
        d->look = first_look(s, d, d->lv[i].kept);
        return true;
    }
    return false;
}

/* ---- decisions ---- */

/* A difference of log rates for the journal: "+12.3%", or "1234x" when the
 * base was a stall (a timed-out sample can be near zero). */
static const char *gain_str(double d, char *buf, size_t len)
{
    if (d > log(10.0))
        snprintf(buf, len, "%.0fx", exp(fmin(d, 700.0)));
    else
        snprintf(buf, len, "%+.1f%%", 100 * expm1(d));
    return buf;
}

static void move(struct search *s, struct search_dim *d, const struct cmp *c)
{
    char a[24], b[24], g[32];
    long from = d->lv[d->inc].size, to = d->lv[d->cand].size;

    why(s, "%s %s -> %s: %s %s (p=%.2g, n=%d/%d)", d->name, search_size_str(from, a, sizeof(a)),
        search_size_str(to, b, sizeof(b)), rate_names[d->rank], gain_str(c->d, g, sizeof(g)), c->p,
        c->kc, c->ki);
    d->lv[d->inc].tabu = true;
    d->lv[d->cand].since = d->lv[d->cand].n;
    if (to == SEARCH_AUTO)
        d->last_dir = 0;
    else if (from == SEARCH_AUTO)
        d->last_dir = -1; /* found walking down from the cap */
    else
        d->last_dir = to > from ? 1 : -1;
    d->inc = d->cand;
    d->cand = -1;
    dim_refresh(d); /* its samples from now on */
    build_queue(s, d);
}

/* Is level a significantly below level b? */
static bool below(const struct search_dim *d, int a, int b)
{
    const struct search_level *la = &d->lv[a], *lb = &d->lv[b];
    if (la->kept < 1 || lb->kept < 1 || isnan(d->sigma))
        return false;
    double se = d->sigma * sqrt(1.0 / la->kept + 1.0 / lb->kept);
    return stats_t_cdf((la->mean - lb->mean) / se, d->df) < WALK_STOP_ALPHA;
}

static void reject(struct search *s, struct search_dim *d, const struct cmp *c, const char *how)
{
    char a[24], b[24], g[32];
    int cand = d->cand;

    why(s, "%s stays %s: %s %s %s (p=%.2g, n=%d/%d)%s", d->name,
        search_size_str(d->lv[d->inc].size, a, sizeof(a)),
        search_size_str(d->lv[cand].size, b, sizeof(b)), rate_names[d->rank],
        gain_str(c->d, g, sizeof(g)), c->p, c->kc, c->ki, how);
    d->cand = -1;
    if (!d->cand_walk)
        return;
    if (d->walk_best >= 0 && below(d, cand, d->walk_best)) {
        int n = 0;
        for (int j = 0; j < d->nqueue; j++) {
            if (!d->queue_walk[j] || d->lv[d->queue[j]].size > d->lv[cand].size) {
                d->queue_walk[n] = d->queue_walk[j];
                d->queue[n++] = d->queue[j];
            }
        }
        d->nqueue = n;
        why(s, "%s: %s is below %s, the walk down stops", d->name, b,
            search_size_str(d->lv[d->walk_best].size, a, sizeof(a)));
    }
    if (d->walk_best < 0 || d->lv[cand].mean > d->lv[d->walk_best].mean)
        d->walk_best = cand;
}

/* Decide what can be decided with the samples at hand, until the dim needs
 * a new sample or has converged. */
static void advance(struct search *s, struct search_dim *d)
{
    while (!d->done) {
        if (d->lv[d->inc].fresh < s->p.min_samples)
            return;
        if (d->cand < 0)
            walk_if_broken(s, d);
        if (d->cand < 0 && !pop(s, d)) {
            char a[24];
            d->done = true;
            why(s, "%s converged at %s after %d samples", d->name,
                search_size_str(d->lv[d->inc].size, a, sizeof(a)), s->total);
            return;
        }
        if (!at_look(d))
            return;
        struct cmp c;
        enum verdict v = compare(s, d, d->cand, d->inc, &c);
        if (v == MORE && !can_grow(d, &d->lv[d->cand], true) && d->cap == s->p.max_samples &&
            c.p < EXTEND_P) {
            /* Undecided at the cap but leaning towards the candidate: a
             * real gain of a few spreads' worth takes that long to show. */
            d->cap =
                2 * s->p.max_samples < SEARCH_LEVEL_CAP ? 2 * s->p.max_samples : SEARCH_LEVEL_CAP;
        }
        if (v == MORE && can_grow(d, &d->lv[d->cand], true)) {
            d->look = first_look(s, d, d->look + 1);
            return;
        }
        if (v == ACCEPT)
            move(s, d, &c);
        else
            reject(s, d, &c, v == MORE ? ", undecided at the sample cap" : "");
    }
}

/* The level the dim wants measured next. */
static int want(const struct search *s, const struct search_dim *d)
{
    if (d->done || d->cand < 0 || d->lv[d->inc].fresh < s->p.min_samples)
        return d->inc;
    const struct search_level *lc = &d->lv[d->cand], *li = &d->lv[d->inc];
    bool cand = lc->kept < d->look && can_grow(d, lc, true);
    bool inc = li->kept < d->look && can_grow(d, li, false);
    if (cand && inc)
        return lc->kept <= li->kept ? d->cand : d->inc;
    return inc ? d->inc : d->cand;
}

/* ---- set-up ---- */

static long round_up_pow2(long x)
{
    long p = 1;
    while (p < x && p <= (1L << 61))
        p <<= 1;
    return p;
}

static int insert_level(struct search_dim *d, long size, bool lattice)
{
    if (d->nlevels >= SEARCH_MAX_LEVELS)
        return -ERANGE;
    int i = d->nlevels;
    while (i > 0 && d->lv[i - 1].size > size) {
        d->lv[i] = d->lv[i - 1];
        i--;
    }
    memset(&d->lv[i], 0, sizeof(d->lv[i]));
    d->lv[i].size = size;
    d->lv[i].lattice = lattice;
    d->lv[i].mean = NAN;
    d->nlevels++;
    return i;
}

/* AUTO (if observable), then min_size, 2 min_size, ... below cap, then cap. */
static int build_lattice(struct search_dim *d, const struct search_params *p, long cap)
{
    int rc;
    d->nlevels = 0;
    if (p->auto_observable && (rc = insert_level(d, SEARCH_AUTO, true)) < 0)
        return rc;
    for (long size = round_up_pow2(p->min_size); size < cap; size <<= 1)
        if ((rc = insert_level(d, size, true)) < 0)
            return rc;
    if ((rc = insert_level(d, cap, true)) < 0)
        return rc;
    return 0;
}

static int dim_init(struct search *s, struct search_dim *d, long cap, long start)
{
    int rc = build_lattice(d, &s->p, cap);
    if (rc < 0)
        return rc;
    d->cand = -1;
    d->last_dir = 0;
    d->sigma = NAN;
    d->reject = REJECT_K * REJECT_FLOOR;
    if (start == SEARCH_AUTO && !s->p.auto_observable) {
        why(s, "%s: auto cannot be measured, starting from %ld", d->name, cap);
        start = cap;
    }
    if (start > cap)
        start = cap; /* the kernel clamps it there anyway */
    d->inc = level_of(d, start);
    if (d->inc < 0) {
        if ((rc = insert_level(d, start, false)) < 0)
            return rc;
        d->inc = rc;
    }
    build_queue(s, d);
    return 0;
}

static int search_init(struct search *s, const struct search_params *p,
                       struct search_config incumbent)
{
    memset(s, 0, sizeof(*s));
    if (p->min_size < 1 || p->min_size > (1L << 40) || p->max_rcvbuf < 1 || p->max_sndbuf < 1 ||
        !(p->min_gain >= 0 && p->min_gain < 1) || !(p->abort_ratio >= 0 && p->abort_ratio < 1) ||
        p->min_samples < 2 || p->max_samples < p->min_samples ||
        p->max_samples > SEARCH_LEVEL_CAP || p->max_total < 1 ||
        !(p->alpha > 0 && p->alpha < 0.5) || !(p->drift_min >= 0) || incumbent.rcvbuf < 0 ||
        incumbent.sndbuf < 0 ||
        (p->mapping != SEARCH_RANK_SERVER && p->mapping != SEARCH_RANK_CLIENT))
        return -EINVAL;
    if (p->tied && incumbent.rcvbuf != incumbent.sndbuf &&
        (incumbent.rcvbuf == SEARCH_AUTO || incumbent.sndbuf == SEARCH_AUTO))
        return -EINVAL;
    s->p = *p;

    int rc;
    if (p->tied) {
        /* One size for both; each side clamped at its own cap. */
        s->ndims = 1;
        s->dim[0].name = "SO_RCVBUF/SO_SNDBUF";
        s->dim[0].rank = 2;
        long cap = p->max_rcvbuf > p->max_sndbuf ? p->max_rcvbuf : p->max_sndbuf;
        long start = incumbent.rcvbuf > incumbent.sndbuf ? incumbent.rcvbuf : incumbent.sndbuf;
        if ((rc = dim_init(s, &s->dim[0], cap, start)) < 0)
            return rc;
    } else {
        bool server = p->mapping == SEARCH_RANK_SERVER;
        s->ndims = 2;
        s->dim[0].name = "SO_RCVBUF";
        s->dim[0].rank = server ? 0 : 1;
        s->dim[1].name = "SO_SNDBUF";
        s->dim[1].rank = server ? 1 : 0;
        if ((rc = dim_init(s, &s->dim[0], p->max_rcvbuf, incumbent.rcvbuf)) < 0 ||
            (rc = dim_init(s, &s->dim[1], p->max_sndbuf, incumbent.sndbuf)) < 0)
            return rc;
    }
    return 0;
}

int search_new(const struct search_params *p, struct search_config incumbent,
               struct search **sp)
{
    struct search *s = malloc(sizeof(*s));
    int rc;

    *sp = NULL;
    if (s == NULL)
        return -ENOMEM;
    if ((rc = search_init(s, p, incumbent)) < 0) {
        free(s);
        return rc;
    }
    *sp = s;
    return 0;
}

void search_free(struct search *s)
{
    free(s);
}

/* ---- configurations <-> levels ---- */

static long clamp(long size, long cap)
{
    return size != SEARCH_AUTO && size > cap ? cap : size;
}

static struct search_config config_of(const struct search *s, const int *level)
{
    if (s->ndims == 1) {
        long size = s->dim[0].lv[level[0]].size;
        return (struct search_config){clamp(size, s->p.max_rcvbuf), clamp(size, s->p.max_sndbuf)};
    }
    return (struct search_config){s->dim[0].lv[level[0]].size, s->dim[1].lv[level[1]].size};
}

/* The level of each dim that cfg names; -1 when it names none. */
static int levels_of(const struct search *s, struct search_config cfg, int *level)
{
    if (s->ndims == 2) {
        level[0] = level_of(&s->dim[0], cfg.rcvbuf);
        level[1] = level_of(&s->dim[1], cfg.sndbuf);
        return level[0] < 0 || level[1] < 0 ? -1 : 0;
    }
    const struct search_dim *d = &s->dim[0];
    for (int i = 0; i < d->nlevels; i++) {
        long size = d->lv[i].size;
        if (clamp(size, s->p.max_rcvbuf) == cfg.rcvbuf &&
            clamp(size, s->p.max_sndbuf) == cfg.sndbuf) {
            level[0] = i;
            return 0;
        }
    }
    return -1;
}

enum search_step search_ask(const struct search *s, struct search_config *next)
{
    int level[2];
    for (int k = 0; k < s->ndims; k++)
        level[k] = s->done ? s->dim[k].inc : want(s, &s->dim[k]);
    *next = config_of(s, level);
    return s->done ? SEARCH_DONE : SEARCH_MEASURE;
}

struct search_config search_incumbent(const struct search *s)
{
    int level[2];
    for (int k = 0; k < s->ndims; k++)
        level[k] = s->dim[k].inc;
    return config_of(s, level);
}

int search_samples(const struct search *s)
{
    return s->total;
}

const char *search_why(const struct search *s)
{
    return s->why;
}

const struct search_params *search_params_of(const struct search *s)
{
    return &s->p;
}

bool search_converged(const struct search *s)
{
    return s->done;
}

int search_reference(const struct search *s, struct search_reference *ref)
{
    if (!s->done)
        return -EINVAL;
    *ref = s->ref;
    return 0;
}

const char *search_rate_name(enum search_rate r)
{
    return rate_names[r];
}

int search_estimate(const struct search *s, struct search_config cfg, struct search_estimate *est)
{
    int level[2];
    double mean[2] = {NAN, NAN};
    int kept[2] = {0, 0};

    if (levels_of(s, cfg, level) < 0)
        return -EINVAL;
    /* Each rate from the dim it ranks (untied, the other buffer's level
     * says nothing of it: the search assumes so), or both from the one. */
    for (int k = 0; k < s->ndims; k++) {
        const struct search_dim *d = &s->dim[k];
        for (int dir = 0; dir < 2; dir++)
            if (d->rank == dir || d->rank == SEARCH_RATE_BOTH)
                mean[dir] = level_dir_mean_n(d, level[k], dir, &kept[dir]);
    }
    *est = (struct search_estimate){exp(mean[0]), exp(mean[1]), kept[0], kept[1]};
    return 0;
}

/* Per-direction abort thresholds (log) of dim d's trial, NAN if none. */
static void dim_thresholds(const struct search *s, const struct search_dim *d, double *thr)
{
    double ar = log(s->p.abort_ratio);
    thr[0] = thr[1] = NAN;
    if (d->done || d->cand < 0 || s->p.abort_ratio <= 0)
        return;
    for (int dir = 0; dir < 2; dir++)
        if (d->rank == dir || d->rank == 2)
            thr[dir] = level_dir_mean(d, d->inc, dir) + ar;
}

void search_abort_rates(const struct search *s, struct search_config cfg, double *write_min,
                        double *read_min)
{
    int level[2];
    double rate[2] = {0, 0};

    if (!s->done && levels_of(s, cfg, level) == 0) {
        for (int k = 0; k < s->ndims; k++) {
            const struct search_dim *d = &s->dim[k];
            double thr[2];
            if (level[k] != d->cand)
                continue;
            dim_thresholds(s, d, thr);
            for (int dir = 0; dir < 2; dir++)
                if (!isnan(thr[dir]))
                    rate[dir] = fmax(rate[dir], exp(thr[dir]));
        }
    }
    *write_min = rate[0];
    *read_min = rate[1];
}

/* ---- samples ---- */

static double log_rate(double rate)
{
    if (isnan(rate) || rate < 0)
        return NAN;
    return log(fmax(rate, RATE_FLOOR));
}

double search_sample_rate(const struct search_sample *x, enum search_rate r)
{
    return ranked(r, log_rate(x->write), log_rate(x->read));
}

static void add_sample(struct search_level *l, double w, double r, bool timeout)
{
    if (l->n == SEARCH_LEVEL_CAP) {
        memmove(l->w, l->w + 1, sizeof(l->w[0]) * (SEARCH_LEVEL_CAP - 1));
        memmove(l->r, l->r + 1, sizeof(l->r[0]) * (SEARCH_LEVEL_CAP - 1));
        l->n--;
        if (l->since > 0)
            l->since--;
    }
    l->w[l->n] = w;
    l->r[l->n] = r;
    l->n++;
    if (timeout)
        l->timeouts++;
}

/* Did this sample end dim d's trial? */
static bool trial_aborted(struct search *s, struct search_dim *d, double w, double r,
                          const struct search_sample *x)
{
    double thr[2], v[2] = {w, r};
    bool timeout[2] = {x->write_timeout, x->read_timeout};
    char a[24];

    dim_thresholds(s, d, thr);
    for (int dir = 0; dir < 2; dir++) {
        if (d->rank != dir && d->rank != 2)
            continue;
        if (timeout[dir] || (!isnan(thr[dir]) && !isnan(v[dir]) && v[dir] < thr[dir])) {
            why(s, "%s %s trial ended: %s %.3g%s, %.0f%% of the incumbent's %.3g", d->name,
                search_size_str(d->lv[d->cand].size, a, sizeof(a)), rate_names[dir], exp(v[dir]),
                timeout[dir] ? " (timeout)" : "",
                100 * exp(v[dir] - level_dir_mean(d, d->inc, dir)),
                exp(level_dir_mean(d, d->inc, dir)));
            return true;
        }
    }
    return false;
}

/* A sample of dim d's candidate came in: did it end the trial? */
static bool trial_ended(struct search *s, struct search_dim *d, double w, double r,
                        const struct search_sample *x)
{
    struct search_level *l = &d->lv[d->cand];

    if (!trial_aborted(s, d, w, r, x)) {
        l->strikes = 0;
        return false;
    }
    /* One stalled transfer in fifty is noise: the candidate goes to the
     * back of the queue, and dies only when two of its trial samples in a
     * row ended trials and so did most of its samples. */
    l->aborts++;
    l->strikes++;
    if (dead(d, d->cand)) {
        struct cmp c;
        compare(s, d, d->cand, d->inc, &c);
        reject(s, d, &c, ", ended twice");
    } else {
        push_front(s, d, d->cand, d->cand_walk);
        d->cand = -1;
    }
    return true;
}

/* The winner's reference for verification (lib/verify.c), taken once, at
 * convergence. */
static void take_reference(struct search *s)
{
    struct search_reference *ref = &s->ref;

    memset(ref, 0, sizeof(*ref));
    ref->nch = s->ndims;
    for (int ch = 0; ch < ref->nch; ch++) {
        const struct search_dim *d = &s->dim[ch];
        const struct search_level *l = &d->lv[d->inc];
        struct search_channel *c = &ref->ch[ch];
        c->rate = (enum search_rate)d->rank;
        c->reject = d->reject;
        /* The samples that made the winner win are biased upwards (it won
         * because they were high): only those taken since are a fair
         * reference. */
        double x[SEARCH_LEVEL_CAP];
        struct stats_summary sum;
        int n = level_values(d, d->inc, l->since, x);
        if (n > 0 && stats_summarize(x, n, d->reject, &sum) == 0) {
            c->mean = sum.mean;
            c->n = sum.kept;
        }
        c->ss = isnan(d->sigma) ? 0 : d->sigma * d->sigma * d->df;
        c->df = isnan(d->sigma) ? 0 : d->df;
    }
}

int search_tell(struct search *s, struct search_config cfg, const struct search_sample *x)
{
    int level[2];
    bool aborted = false;

    if (levels_of(s, cfg, level) < 0 || isinf(x->write) || isinf(x->read))
        return -EINVAL;
    s->why[0] = '\0';
    s->total++;
    double w = log_rate(x->write), r = log_rate(x->read);
    for (int k = 0; k < s->ndims; k++) {
        struct search_dim *d = &s->dim[k];
        bool timeout = (d->rank != 1 && x->write_timeout) || (d->rank != 0 && x->read_timeout);
        add_sample(&d->lv[level[k]], w, r, timeout);
        dim_refresh(d);
        if (s->done || d->done)
            continue;
        if (level[k] == d->cand && trial_ended(s, d, w, r, x))
            aborted = true;
        advance(s, d);
    }
    if (!s->done && s->total >= s->p.max_total) {
        for (int k = 0; k < s->ndims; k++)
            s->dim[k].done = true;
        why(s, "sample budget of %d spent: keeping the incumbents", s->p.max_total);
    }
    bool all = true;
    for (int k = 0; k < s->ndims; k++)
        all = all && s->dim[k].done;
    if (all && !s->done) {
        s->done = true;
        take_reference(s);
    }
    return aborted ? SEARCH_ABORTED : SEARCH_TOLD;
}
