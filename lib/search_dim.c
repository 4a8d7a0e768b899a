/* search_dim: see search_dim.h.
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
 *   its test with max_samples a side, which keeps the cost of a candidate
 *   that is merely equal small when the noise is low and bounded when it is
 *   high;
 * - and the comparison ends, keeping its cheaper side, as soon as the
 *   dearer side could no longer establish a gain in what is left of the
 *   budget (futile(): issue 12's "nothing left to learn"). */
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
/* The futility rule that ends a comparison early and keeps its cheaper
 * side (see futile() below): it fires when the dearer side's chance of
 * passing the gain test by the end of the budget, were it to go on as it
 * has (the conditional power under the trend seen), is below FUT_POWER_MIN
 * and the data rule out, at FUT_Z_GAIN (a dearer candidate dropped) or
 * FUT_Z_MOVE (a dearer incumbent left) one-sided standard errors, a gain
 * the budget could establish: one it would pass FUT_POWER_DET of the time,
 * and never less than FUT_SAFE_GAIN or FUT_SAFE_MOVE. Leaving an incumbent
 * is a move, and a false one costs that gain on every connection until a
 * drift is seen, where dropping a candidate only leaves the search where
 * it was: hence the stricter z and the lower floor for a move
 * (bench/search-sim: at z 2.33 the interior objective made 8 to 14 wrong
 * moves in 200 runs at sigma 0.25, at 3.5 as few as before the rule).
 * FUT_SAFE_MOVE is the smallest step between neighbours where buffers
 * matter (a window-limited rate halves with the buffer; the knee's
 * neighbours in shared/FACTS.md differ by 14-16%): low noise must not talk
 * the search out of the better of two such neighbours. A dropped candidate
 * gets a floor of 20%: from AUTO the sizes worth taking gain 35% and more
 * in FACTS.md, and a floor of 25% lost wan-1g's 52% gain in runs at sigma
 * 0.25. The candidate needs FUT_MIN samples first. */
#define FUT_POWER_MIN SEARCH_FUTILE_CHANCE
#define FUT_POWER_DET 0.80
#define FUT_SAFE_GAIN SEARCH_STAY_GAIN
#define FUT_SAFE_MOVE 0.15
#define FUT_Z_GAIN 2.0
#define FUT_Z_MOVE 3.5
#define FUT_MIN 5
/* AUTO as a candidate against a size (stay_futile() below) is dropped, the
 * size kept, when the non-inferiority test's chance of passing within the
 * budget is below FUT_POWER_MIN and the data rule out, at FUT_Z_GAIN
 * standard errors, that AUTO is better by FUT_SAFE_GAIN: it is the
 * dropped-candidate rule, for the same pair (a size and AUTO) seen from
 * the size. No move is made, so the move's 3.5 does not apply. */
/* A gain candidate is worth chasing only if it may gain twice min_gain:
 * gains just above min_gain would take hundreds of samples to prove. */
#define GAIN_ZONE 2.0
/* The walk down from the cap stops at a point below a higher one at this
 * level. */
#define WALK_STOP_ALPHA 0.05
/* Rates at or below this (a timeout that reached nothing) count as this. */
#define RATE_FLOOR 1e-12

/* ---- levels ---- */

static bool is_auto(const struct search_dim *d, int i)
{
    return d->lv[i].size == SEARCH_AUTO;
}

static int auto_level(const struct search_dim *d)
{
    return d->nlevels > 0 && is_auto(d, 0) ? 0 : -1;
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

/* ---- the comparison ---- */

static double t_upper(double t, double df)
{
    return 1 - stats_t_cdf(t, df);
}

/* The samples a side may still reach in this comparison: twice the cap
 * while the extension (search.c) may still be granted, else the cap. */
static int budget_of(const struct search_params *p, const struct search_dim *d)
{
    if (d->cap == p->max_samples)
        return 2 * p->max_samples < SEARCH_LEVEL_CAP ? 2 * p->max_samples : SEARCH_LEVEL_CAP;
    return d->cap;
}

/* Is it futile to go on: can the dearer side (AUTO is the cheapest, then
 * the smaller size) no longer establish a gain over the cheaper one within
 * the budget? gain is log(dearer / cheaper) now and se its standard error;
 * z and safe are the FUT_Z_ and FUT_SAFE_ of the side that would be kept;
 * *left gets the samples the comparison could still take.
 *
 * At the end of the budget (both sides at `budget` samples, standard error
 * se_f) the gain test needs the estimate to clear need_f = max(GAIN_ZONE
 * bar, t(1 - alpha) se_f): a gain worth chasing, shown at the test's
 * level. Two conditions, both needed:
 * - the conditional power under the current trend (the true gain is what
 *   is seen now; stochastic curtailment): the end's estimate is then
 *   spread around today's by the samples still to come, with standard
 *   error se_f sqrt(1 - w), w = se_f^2 / se^2 the share of the end's
 *   information in hand; the chance that it clears need_f is below
 *   FUT_POWER_MIN. Alone this is too bold early on, when today's estimate
 *   is itself far from the truth;
 * - so the data must also rule out (the upper bound gain + t se, t at the
 *   pooled spread's degrees of freedom: a spread from few samples is
 *   itself uncertain) a gain the budget would establish: need_f + z(0.8)
 *   se_f, and never less than `safe`. That is the distance from
 *   the observed difference to what could still be shown, against the
 *   half-width the samples at hand leave.
 * At the end (w = 1) the first is the gain test's own verdict. */
/* The standard error the comparison will have once both sides reach the
 * budget (or stay where they are, past it), and in *left the samples it
 * may still take: the end futile() and stay_futile() look ahead to. */
static double se_at_end(const struct search_params *p, const struct search_dim *d,
                        const struct search_level *lc, const struct search_level *li, int *left)
{
    int b = budget_of(p, d);
    double nc = fmax(lc->kept, b), ni = fmax(li->kept, b);

    *left = (int)(nc - lc->kept + ni - li->kept);
    return d->sigma * sqrt(1.0 / nc + 1.0 / ni);
}

/* The chance that the estimate at the end (standard error se_f) clears
 * need_f, under the trend seen (est, standard error se): the end's
 * estimate spread around today's by the samples still to come. */
static double power_at_end(double est, double se, double se_f, double need_f)
{
    double w = fmin(1.0, se_f * se_f / (se * se));
    double sd = se_f * sqrt(1 - w);

    return sd > 0 ? stats_norm_cdf((est - need_f) / sd) : est >= need_f;
}

static bool futile(const struct search_params *p, const struct search_dim *d,
                   const struct search_level *lc, const struct search_level *li, double gain,
                   double se, double z, double safe, int *left)
{
    double se_f = se_at_end(p, d, lc, li, left);
    double need_f =
        fmax(GAIN_ZONE * log1p(p->min_gain), stats_t_quantile(1 - p->alpha, d->df) * se_f);
    double power = power_at_end(gain, se, se_f, need_f);
    double det = fmax(need_f + stats_norm_quantile(FUT_POWER_DET) * se_f, log1p(safe));
    double t = stats_t_quantile(stats_norm_cdf(z), d->df);

    return power < FUT_POWER_MIN && gain + t * se < det;
}

/* Is it futile to go on with AUTO as the candidate against a size (the
 * incumbent)? dh is log(AUTO / size) now, se its standard error, bar and
 * alpha the non-inferiority test's (search_dim_compare()).
 *
 * Shown not worse, AUTO would win the tie; but at a spread of 15% and more
 * per sample showing two rates within min_gain (3%) of each other takes
 * hundreds of samples a side, and the futility rule for the move to AUTO
 * (futile() at FUT_Z_MOVE) needs 27 to 40 a side at 0.15 and cannot fire
 * within the cap at 0.25: on a flat path the comparison ran to the cap,
 * 80 samples of 96 from 8192 at sigma 0.15 (bench/search-sim), mostly to
 * end undecided, the size kept. This ends it where that outcome is the only
 * one left worth waiting for:
 * - the non-inferiority test's conditional power under the trend seen (as
 *   in futile(): the end's estimate spread around today's by the samples
 *   still to come) is below FUT_POWER_MIN; with low noise it is high, and
 *   AUTO keeps its preference: at sigma 0.05 an equal AUTO passes;
 * - and the data rule out (upper bound dh + t se, t at FUT_Z_GAIN and the
 *   pooled spread's degrees of freedom) that AUTO is FUT_SAFE_GAIN better
 *   than the size, the gain below which a size dropped against AUTO is let
 *   go (FACTS.md: where AUTO and a size differ, by 35% and more). A large
 *   gain of AUTO passes the non-inferiority test in a few samples anyway.
 * Nothing moves: the incumbent stays, as at the cap, so no move can be
 * wrong; what it may cost is AUTO's preference on a tie, and a flat path
 * ends at the size it started from (which search-sim counts as the
 * smallest, like AUTO, when it is). */
static bool stay_futile(const struct search_params *p, const struct search_dim *d,
                        const struct search_level *lc, const struct search_level *li, double dh,
                        double se, double bar, double alpha, int *left)
{
    double se_f = se_at_end(p, d, lc, li, left);
    double need_f = bar + stats_t_quantile(1 - alpha, d->df) * se_f;
    double power = power_at_end(dh, se, se_f, need_f);
    double t = stats_t_quantile(stats_norm_cdf(FUT_Z_GAIN), d->df);

    return power < FUT_POWER_MIN && dh + t * se < log1p(FUT_SAFE_GAIN);
}

enum search_verdict search_dim_compare(const struct search_params *p, const struct search_dim *d,
                                       int c, int i, struct search_cmp *out)
{
    const struct search_level *lc = &d->lv[c], *li = &d->lv[i];
    int min = p->min_samples, max = p->max_samples;

    *out = (struct search_cmp){.d = lc->mean - li->mean, .p = 1, .kc = lc->kept, .ki = li->kept};
    if (lc->kept < min || li->kept < min || isnan(d->sigma))
        return SEARCH_MORE;

    double se = d->sigma * sqrt(1.0 / lc->kept + 1.0 / li->kept);
    bool pref = preferred(d, c, i);
    double alpha = pref ? PREF_ALPHA : p->alpha;
    double bar = pref ? log1p(-p->min_gain) : log1p(p->min_gain);
    double dh = out->d;

    if (pref) {
        out->p = t_upper((dh - bar) / se, d->df);
        if (out->p < alpha)
            return SEARCH_ACCEPT;
    } else {
        out->p = t_upper(dh / se, d->df);
        if (dh >= bar && out->p < alpha)
            return SEARCH_ACCEPT;
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
    bool hopeless = dh + stats_t_quantile(1 - FUTILITY_ALPHA, d->df) * se < need;
    if (pref) {
        /* The cheaper candidate cannot be shown not worse: the incumbent
         * stays. First: this is evidence against the move. */
        if (hopeless)
            return SEARCH_REJECT;
        /* Nor can the dearer incumbent show a gain over it: nothing is
         * left to learn, the cheaper side is kept. */
        if (lc->kept >= FUT_MIN &&
            futile(p, d, lc, li, -dh, se, FUT_Z_MOVE, FUT_SAFE_MOVE, &out->left)) {
            out->futile = true;
            return SEARCH_ACCEPT;
        }
        /* Nor can AUTO be shown not worse, and it is no gain worth having:
         * the size stays (checked after the move, which keeps the cheaper
         * side whenever it can). */
        if (is_auto(d, c) && lc->kept >= FUT_MIN &&
            stay_futile(p, d, lc, li, dh, se, bar, alpha, &out->left)) {
            out->stay = true;
            return SEARCH_REJECT;
        }
        return SEARCH_MORE;
    }
    if (hopeless)
        return SEARCH_REJECT;
    if (lc->kept >= FUT_MIN &&
        futile(p, d, lc, li, dh, se, FUT_Z_GAIN, FUT_SAFE_GAIN, &out->left)) {
        out->futile = true;
        return SEARCH_REJECT;
    }
    return SEARCH_MORE;
}

/* The looks: a comparison is judged only when both sides have min_samples,
 * then half as many again, and so on (3, 5, 8, 12, 18, 27, 41, 62, ...) up
 * to max_samples. A test repeated after every sample has that many chances
 * to be fooled; spaced looks keep them few, so each can be less strict. */
int search_dim_first_look(const struct search_params *p, const struct search_dim *d, int n)
{
    int look = p->min_samples;
    while (look < n && look < d->cap)
        look = (3 * look + 1) / 2;
    return look < d->cap ? look : d->cap;
}

bool search_dim_can_grow(const struct search_dim *d, const struct search_level *l, bool cand)
{
    return l->n < SEARCH_LEVEL_CAP && (!cand || l->kept < d->cap);
}

/* Has the comparison reached its look (or can it not get there)? */
bool search_dim_at_look(const struct search_dim *d)
{
    const struct search_level *lc = &d->lv[d->cand], *li = &d->lv[d->inc];
    return (lc->kept >= d->look || !search_dim_can_grow(d, lc, true)) &&
           (li->kept >= d->look || !search_dim_can_grow(d, li, false));
}

/* Is level a significantly below level b? */
bool search_dim_below(const struct search_dim *d, int a, int b)
{
    const struct search_level *la = &d->lv[a], *lb = &d->lv[b];
    if (la->kept < 1 || lb->kept < 1 || isnan(d->sigma))
        return false;
    double se = d->sigma * sqrt(1.0 / la->kept + 1.0 / lb->kept);
    return stats_t_cdf((la->mean - lb->mean) / se, d->df) < WALK_STOP_ALPHA;
}

/* ---- the queue of neighbours ---- */

static void push(const struct search_params *p, struct search_dim *d, int i, bool walk)
{
    if (i < 0 || i == d->inc || d->lv[i].tabu || search_dim_dead(d, i))
        return;
    if (is_auto(d, i) && !p->auto_observable)
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
        if (!d->lv[i].lattice || is_auto(d, i))
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
    /* Without AUTO, the largest size stands in for it (below), and so
     * does the walk down from it: each second size, so that one unlucky
     * comparison with the next size down does not end the search at the
     * cap (bench/search-sim, "8192, no AUTO"). As from AUTO, the walk ends
     * at a size below the best one walked, not at the first one below the
     * cap: two trials cut short by a loopback stall would end it there. */
    if (is_auto(d, d->inc) || (!p->auto_observable && d->inc == top_level(d))) {
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
    if (d->walked || is_auto(d, d->inc) || !broken(&d->lv[d->inc]))
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
