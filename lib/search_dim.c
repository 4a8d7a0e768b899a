/* search_dim: see search_dim.h. The comparison of a candidate with the
 * incumbent is in search_dim_cmp.c. */
#include "search_dim.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "stats.h"

/* Outliers: a sample further than REJECT_K spreads from its level's median
 * is dropped, and the spread used for that is never taken below
 * REJECT_FLOOR (about 5%), so that samples within 22% of the median always
 * count. The stalls the bound is for are far outside it. */
#define REJECT_K 4.0
#define REJECT_FLOOR 0.05
/* Rates at or below this (a timeout that reached nothing) count as this. */
#define RATE_FLOOR 1e-12

/* ---- levels ---- */

bool search_dim_is_auto(const struct search_dim *d, int i)
{
    return d->lv[i].size == SEARCH_AUTO;
}

static int auto_level(const struct search_dim *d)
{
    return d->nlevels > 0 && search_dim_is_auto(d, 0) ? 0 : -1;
}

int search_dim_level_of(const struct search_dim *d, long size)
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
            if (d->lv[j].lattice && d->lv[j].size < size && !search_dim_is_auto(d, j))
                return j;
    }
    return -1;
}

/* AUTO is preferred to any size, a smaller size to a larger one. */
bool search_dim_preferred(const struct search_dim *d, int a, int b)
{
    if (search_dim_is_auto(d, a))
        return !search_dim_is_auto(d, b);
    if (search_dim_is_auto(d, b))
        return false;
    return d->lv[a].size < d->lv[b].size;
}

bool search_dim_dead(const struct search_dim *d, int i)
{
    const struct search_level *l = &d->lv[i];
    return l->strikes >= 2 && 2 * l->aborts > l->n;
}

/* The log of the rate that ranks by `rank`, from the log rates of one
 * sample. */
double search_dim_ranked(int rank, double w, double r)
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
int search_dim_values(const struct search_dim *d, int i, int from, double *out)
{
    const struct search_level *l = &d->lv[i];
    int n = 0;
    for (int j = from; j < l->n; j++) {
        double v = search_dim_ranked(d->rank, l->w[j], l->r[j]);
        if (!isnan(v))
            out[n++] = v;
    }
    return n;
}

/* Recompute every level's robust mean and the dim's pooled spread. */
void search_dim_refresh(struct search_dim *d)
{
    static const int maxd = SEARCH_MAX_LEVELS * SEARCH_LEVEL_CAP;
    double devs[SEARCH_MAX_LEVELS * SEARCH_LEVEL_CAP];
    double v[SEARCH_LEVEL_CAP];
    int nd = 0;

    for (int i = 0; i < d->nlevels; i++) {
        int n = search_dim_values(d, i, 0, v);
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
        int n = search_dim_values(d, i, 0, v);
        /* With fewer than three samples nothing was rejected: such a level
         * may hold a stall, and stays out of the spread. */
        if (n >= 3 && stats_summarize(v, n, d->reject, &sum) == 0) {
            ss += sum.ss;
            df += sum.kept - 1;
        }
        /* A level's rate is judged on its samples since it became the
         * incumbent: the ones that made it win were high, or it would not
         * have won, and its neighbours would look worse than they are. */
        l->fresh = search_dim_values(d, i, l->since, v);
        n = search_dim_values(d, i, 0, v);
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
double search_dim_dir_mean_n(const struct search_dim *d, int i, int dir, int *kept)
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

double search_dim_dir_mean(const struct search_dim *d, int i, int dir)
{
    return search_dim_dir_mean_n(d, i, dir, NULL);
}

/* Per-direction abort thresholds (log) of dim d's trial, NAN if none. */
void search_dim_thresholds(const struct search_params *p, const struct search_dim *d, double *thr)
{
    double ar = log(p->abort_ratio);
    thr[0] = thr[1] = NAN;
    if (d->done || d->cand < 0 || p->abort_ratio <= 0)
        return;
    for (int dir = 0; dir < 2; dir++)
        if (d->rank == dir || d->rank == 2)
            thr[dir] = search_dim_dir_mean(d, d->inc, dir) + ar;
}

/* The incumbent's summary as verify wants it (c is zeroed by the caller). */
void search_dim_channel(const struct search_dim *d, struct search_channel *c)
{
    const struct search_level *l = &d->lv[d->inc];
    c->rate = (enum search_rate)d->rank;
    c->reject = d->reject;
    /* The samples that made the winner win are biased upwards (it won
     * because they were high): only those taken since are a fair
     * reference. */
    double x[SEARCH_LEVEL_CAP];
    struct stats_summary sum;
    int n = search_dim_values(d, d->inc, l->since, x);
    if (n > 0 && stats_summarize(x, n, d->reject, &sum) == 0) {
        c->mean = sum.mean;
        c->n = sum.kept;
    }
    c->ss = isnan(d->sigma) ? 0 : d->sigma * d->sigma * d->df;
    c->df = isnan(d->sigma) ? 0 : d->df;
}

/* ---- the queue of neighbours ---- */

static void push(const struct search_params *p, struct search_dim *d, int i, bool walk)
{
    if (i < 0 || i == d->inc || d->lv[i].tabu || search_dim_dead(d, i))
        return;
    if (search_dim_is_auto(d, i) && !p->auto_observable)
        return;
    for (int j = 0; j < d->nqueue; j++)
        if (d->queue[j] == i)
            return;
    d->queue_walk[d->nqueue] = walk;
    d->queue[d->nqueue++] = i;
}

/* Put level i first in the queue: it is tried again next. */
void search_dim_push_front(const struct search_params *p, struct search_dim *d, int i, bool walk)
{
    push(p, d, i, walk);
    for (int j = d->nqueue - 1; j > 0; j--) {
        int q = d->queue[j];
        bool w = d->queue_walk[j];
        d->queue[j] = d->queue[j - 1];
        d->queue_walk[j] = d->queue_walk[j - 1];
        d->queue[j - 1] = q;
        d->queue_walk[j - 1] = w;
    }
}

static void push_walk(const struct search_params *p, struct search_dim *d)
{
    int step = 0;
    for (int i = top_level(d); i >= 0; i--) {
        if (!d->lv[i].lattice || search_dim_is_auto(d, i))
            continue;
        if (step++ % 2 == 0)
            push(p, d, i, true);
    }
}

static bool broken(const struct search_level *l)
{
    return l->n > 0 && 2 * l->timeouts > l->n;
}

void search_dim_queue(const struct search_params *p, struct search_dim *d)
{
    d->nqueue = 0;
    d->walk_best = -1;
    d->walked = false;
    /* From AUTO, and from the cap, the walk down: each second size.
     * Without AUTO the largest size stands in for AUTO (below), and so
     * does the walk down from it, so that one unlucky comparison with the
     * next size down does not end the search at the cap (bench/search-sim,
     * "8192, no AUTO"); there the walk ends at a size below the best one
     * walked, not at the first one below the cap: two trials cut short by
     * a loopback stall would end it there (the demo's start).
     * With AUTO observable the cap is where a stalled 8192 jumps to: AUTO
     * first, then the walk, the cap counting as walked as it does from
     * AUTO (the cap is AUTO's first walk point), so that a size
     * significantly below it ends the walk (wan-1g, the cap best: at 1M,
     * not 256K, 4 samples fewer in the median). Stepping down one size at
     * a time from the cap instead, steps of a few percent stopped the
     * search short: loopback's reads from 8192 (tests/unit/sim.c: 2 MiB 6%
     * above 4 MiB, 1 MiB 9% above that, the peak at 256-512 KiB) ended 17%
     * of the runs at sigma 0.25 at 4 or 2 MiB, 79-83% of the peak; with
     * the walk 1 in 400 (bench/search-sim); a dip below the cap stopped it
     * too (test_walk_from_cap_with_auto). */
    if (search_dim_is_auto(d, d->inc) || d->inc == top_level(d)) {
        if (!search_dim_is_auto(d, d->inc) && p->auto_observable) {
            push(p, d, auto_level(d), false);
            d->walk_best = d->inc;
        }
        push_walk(p, d);
        return;
    }
    int up = lattice_step(d, d->inc, +1), down = lattice_step(d, d->inc, -1);
    if (d->last_dir > 0)
        push(p, d, up, false);
    else if (d->last_dir < 0)
        push(p, d, down, false);
    /* Without AUTO, the largest size stands in for it: the one jump that
     * gets a search off a plateau of slow small sizes, where every
     * neighbour is as slow (8192 and 16384 both stall on loopback). */
    push(p, d, p->auto_observable ? auto_level(d) : top_level(d), false);
    push(p, d, up, false);
    push(p, d, down, false);
}

/* A size that times out is no place to climb from (its neighbours stall
 * too): once its own samples show it, the walk down from the cap goes
 * first. */
void search_dim_walk_if_broken(const struct search_params *p, struct search_dim *d)
{
    if (d->walked || search_dim_is_auto(d, d->inc) || !broken(&d->lv[d->inc]))
        return;
    d->walked = true;
    int keep[2 * SEARCH_MAX_LEVELS], n = d->nqueue;
    bool keep_walk[2 * SEARCH_MAX_LEVELS];
    memcpy(keep, d->queue, sizeof(keep[0]) * (size_t)n);
    memcpy(keep_walk, d->queue_walk, sizeof(keep_walk[0]) * (size_t)n);
    d->nqueue = 0;
    push_walk(p, d);
    for (int j = 0; j < n; j++)
        push(p, d, keep[j], keep_walk[j]);
}

bool search_dim_pop(const struct search_params *p, struct search_dim *d)
{
    while (d->nqueue > 0) {
        int i = d->queue[0];
        bool walk = d->queue_walk[0];
        d->nqueue--;
        memmove(d->queue, d->queue + 1, sizeof(d->queue[0]) * (size_t)d->nqueue);
        memmove(d->queue_walk, d->queue_walk + 1, sizeof(d->queue_walk[0]) * (size_t)d->nqueue);
        if (i == d->inc || d->lv[i].tabu || search_dim_dead(d, i))
            continue;
        d->cand = i;
        d->cand_walk = walk;
        d->cap = p->max_samples;
        d->look = search_dim_first_look(p, d, d->lv[i].kept);
        return true;
    }
    return false;
}

/* ---- set-up ---- */

static long round_up_pow2(long x)
{
    long p = 1;
    while (p < x && p <= (1L << 61))
        p <<= 1;
    return p;
}

int search_dim_insert(struct search_dim *d, long size, bool lattice)
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
int search_dim_lattice(struct search_dim *d, const struct search_params *p, long cap)
{
    int rc;
    d->sigma = NAN; /* no spread, and the widest outlier bound, until samples */
    d->reject = REJECT_K * REJECT_FLOOR;
    d->nlevels = 0;
    if (p->auto_observable && (rc = search_dim_insert(d, SEARCH_AUTO, true)) < 0)
        return rc;
    for (long size = round_up_pow2(p->min_size); size < cap; size <<= 1)
        if ((rc = search_dim_insert(d, size, true)) < 0)
            return rc;
    if ((rc = search_dim_insert(d, cap, true)) < 0)
        return rc;
    return 0;
}

/* ---- samples ---- */

double search_dim_log_rate(double rate)
{
    if (isnan(rate) || rate < 0)
        return NAN;
    return log(fmax(rate, RATE_FLOOR));
}

void search_dim_add(struct search_level *l, double w, double r, bool timeout)
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
