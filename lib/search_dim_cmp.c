/* search_dim_cmp: the comparison of search_dim.h (a part of the search_dim
 * module; the levels and the queue are in search_dim.c).
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

#include <math.h>

#include "stats.h"

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
#define FUT_SAFE_GAIN 0.20
#define FUT_SAFE_MOVE 0.15
#define FUT_Z_GAIN 2.0
#define FUT_Z_MOVE 3.5
#define FUT_MIN 5
/* AUTO as a candidate against a size (stay_futile() below) is dropped, the
 * size kept, when the non-inferiority test's chance of passing within the
 * budget is below FUT_POWER_MIN and the data rule out, at FUT_Z_GAIN
 * standard errors, that AUTO is better by FUT_SAFE_GAIN: it is the
 * dropped-candidate rule, for the same pair (a size and AUTO) seen from
 * the size. No move is made, so the move's 3.5 does not apply.
 *
 * A smaller size as a candidate against a larger one is dropped the same
 * way, the larger kept, with the move's guard mirrored: the data must rule
 * out at FUT_Z_MOVE standard errors that the side let go is FUT_SAFE_MOVE
 * better, the step between neighbours where buffers matter (not AUTO's
 * 20%), and the smaller needs FUTILITY_MIN samples first. And only where
 * the noise leaves no real chance to show the two equal: were they equal,
 * the non-inferiority test would pass within the budget less than
 * STAY_EQ_MAX of the time. At low noise an equal smaller size soon passes
 * it and wins the tie, and this rule must not take that away on a few
 * samples that happen to lean against it (without that condition cliff at
 * sigma 0.05 ended at its smallest full-rate size in 136 runs of 200, not
 * 189).
 * Without the rule such a comparison ran to the look at 41 a side and
 * ended there undecided, the larger kept all the same: one demo on
 * loopback spent 40 of its 118 samples on SO_RCVBUF 524288 against
 * 1048576 (write -3.9%, p=0.58). bench/search-sim at sigma 0.15: constrained
 * 118 -> 73 and cliff 103 -> 73 median samples from 8192; the cost is a
 * step next to the peak let go by bad luck: on the interior objective
 * (neighbours 15% below the peak) 2 or 3 runs more in 1000 end one step
 * off it; at z 3.0 the saving was a sixth larger and the loss 5 to 9. */
#define STAY_EQ_MAX 0.5
/* A gain candidate is worth chasing only if it may gain twice min_gain:
 * gains just above min_gain would take hundreds of samples to prove. */
#define GAIN_ZONE 2.0
/* The walk down from the cap stops at a point below a higher one at this
 * level. */
#define WALK_STOP_ALPHA 0.05

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
 * alpha the non-inferiority test's (search_dim_compare()). With `size`,
 * the candidate is a smaller size instead, guarded as the comment at
 * STAY_EQ_MAX says.
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
                        double se, double bar, double alpha, bool size, int *left)
{
    double z = size ? FUT_Z_MOVE : FUT_Z_GAIN, safe = size ? FUT_SAFE_MOVE : FUT_SAFE_GAIN;
    double se_f = se_at_end(p, d, lc, li, left);
    double need_f = bar + stats_t_quantile(1 - alpha, d->df) * se_f;
    double power = power_at_end(dh, se, se_f, need_f);
    double t = stats_t_quantile(stats_norm_cdf(z), d->df);

    if (size && power_at_end(0, se, se_f, need_f) >= STAY_EQ_MAX)
        return false;
    return power < FUT_POWER_MIN && dh + t * se < log1p(safe);
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
    bool pref = search_dim_preferred(d, c, i);
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
        /* Nor can the candidate be shown not worse, and it is no gain
         * worth having: the incumbent stays (checked after the move, which
         * keeps the cheaper side whenever it can). */
        bool a = search_dim_is_auto(d, c);
        out->safe = a ? FUT_SAFE_GAIN : FUT_SAFE_MOVE;
        if (lc->kept >= (a ? FUT_MIN : FUTILITY_MIN) &&
            stay_futile(p, d, lc, li, dh, se, bar, alpha, !a, &out->left)) {
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

/* Between looks, only the futility rule's endings that make no move: a
 * candidate dropped (the incumbent kept as the cheaper side), or AUTO or
 * a smaller size left as a candidate against a size (stay_futile()). A
 * drop moves nothing, so looking for one at every sample adds no false
 * move, where the gain and non-inferiority tests keep their spaced looks
 * (their levels are per look). What it can cost is a better candidate
 * dropped, and the rule guards that by itself: whenever it is looked at,
 * the data must rule out a gain for the side let go, of 20% at two
 * standard errors (15% at 3.5 for a smaller size). It waits for
 * FUTILITY_MIN samples of the candidate, as the hopeless rule does: at
 * fewer, the incumbent's samples still carry the luck that made it win,
 * and drops from min_samples on lost wan-1g's 4 MiB (52% over AUTO) in 7
 * runs of 1000 at sigma 0.25 (bench/search-sim --seeds 1000).
 *
 * Why: a comparison whose outcome was settled at 19 samples a side went
 * on to the next look, 27. On the flat objective, where every comparison
 * ends by futility, that was up to a quarter of the search's samples
 * (bench/README.md, search-sim). */
bool search_dim_futile_between(const struct search_params *p, const struct search_dim *d,
                               struct search_cmp *out)
{
    if (d->lv[d->cand].kept < FUTILITY_MIN)
        return false;
    return search_dim_compare(p, d, d->cand, d->inc, out) == SEARCH_REJECT &&
           (out->futile || out->stay);
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
