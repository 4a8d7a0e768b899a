/* search_decide: what a dim of the search decides from its samples (see
 * search.c for how the search goes): a comparison with the incumbent
 * ended by a move or a rejection, each said in the why text, the level
 * it wants measured next, and a trial that a sample ended. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "search_int.h"

/* At the cap, a comparison still leaning towards the candidate (its test
 * below this level) may go on to twice the cap: a real gain of a few
 * spreads' worth takes that long to show at high noise. */
#define EXTEND_P 0.15

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

/* The futility rule's words on what the samples left could show: `what`
 * is "a gain of" or "it not worse by". */
static const char *futile_str(const struct search *s, const struct search_cmp *c, const char *what,
                              char *buf, size_t len)
{
    if (c->left > 0)
        snprintf(buf, len,
                 "the %d samples left would show %s min_gain %g%% with a chance under %.0f%%",
                 c->left, what, 100 * s->p.min_gain, 100 * SEARCH_FUTILE_CHANCE);
    else
        snprintf(buf, len, "no sample is left to show %s min_gain %g%%", what, 100 * s->p.min_gain);
    return buf;
}

static void move(struct search *s, struct search_dim *d, const struct search_cmp *c)
{
    char a[24], b[24], g[32], f[128];
    long from = d->lv[d->inc].size, to = d->lv[d->cand].size;
    int lines = s->why_lines;

    if (c->futile)
        why(s, "%s %s -> %s: futile: %s %s %s over %s so far; %s (n=%d/%d); kept %s", d->name,
            search_size_str(from, a, sizeof(a)), search_size_str(to, b, sizeof(b)), a,
            rate_names[d->rank], gain_str(-c->d, g, sizeof(g)), b,
            futile_str(s, c, "a gain of", f, sizeof(f)), c->kc, c->ki,
            to == SEARCH_AUTO ? "auto" : "the smaller size");
    else
        why(s, "%s %s -> %s: %s %s (p=%.2g, n=%d/%d)", d->name, search_size_str(from, a, sizeof(a)),
            search_size_str(to, b, sizeof(b)), rate_names[d->rank], gain_str(c->d, g, sizeof(g)),
            c->p, c->kc, c->ki);
    if (s->why_lines > lines && lines < 32)
        s->why_moves |= 1u << lines;
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
    search_dim_refresh(d); /* its samples from now on */
    search_dim_queue(&s->p, d);
}

static void reject(struct search *s, struct search_dim *d, const struct search_cmp *c,
                   const char *how)
{
    char a[24], b[24], g[32], f[128];
    int cand = d->cand;

    if (c->stay)
        why(s,
            "%s stays %s: futile: %s %s %s so far; %s, and it is no gain of %.0f%% (n=%d/%d); "
            "kept %s",
            d->name, search_size_str(d->lv[d->inc].size, a, sizeof(a)),
            search_size_str(d->lv[cand].size, b, sizeof(b)), rate_names[d->rank],
            gain_str(c->d, g, sizeof(g)), futile_str(s, c, "it not worse by", f, sizeof(f)),
            100 * c->safe, c->kc, c->ki, a);
    else if (c->futile)
        why(s, "%s stays %s: futile: %s %s %s so far; %s (n=%d/%d); kept %s", d->name,
            search_size_str(d->lv[d->inc].size, a, sizeof(a)),
            search_size_str(d->lv[cand].size, b, sizeof(b)), rate_names[d->rank],
            gain_str(c->d, g, sizeof(g)), futile_str(s, c, "a gain of", f, sizeof(f)), c->kc, c->ki,
            d->lv[d->inc].size == SEARCH_AUTO ? "auto" : "the smaller size");
    else
        why(s, "%s stays %s: %s %s %s (p=%.2g, n=%d/%d)%s", d->name,
            search_size_str(d->lv[d->inc].size, a, sizeof(a)),
            search_size_str(d->lv[cand].size, b, sizeof(b)), rate_names[d->rank],
            gain_str(c->d, g, sizeof(g)), c->p, c->kc, c->ki, how);
    d->cand = -1;
    if (!d->cand_walk)
        return;
    if (d->walk_best >= 0 && search_dim_below(d, cand, d->walk_best)) {
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
void search_advance(struct search *s, struct search_dim *d)
{
    while (!d->done) {
        if (d->lv[d->inc].fresh < s->p.min_samples || d->owed)
            return;
        if (d->cand < 0)
            search_dim_walk_if_broken(&s->p, d);
        if (d->cand < 0 && !search_dim_pop(&s->p, d)) {
            char a[24];
            d->done = true;
            why(s, "%s converged at %s after %d samples", d->name,
                search_size_str(d->lv[d->inc].size, a, sizeof(a)), s->total);
            return;
        }
        struct search_cmp c;
        if (!search_dim_at_look(d)) {
            if (!search_dim_futile_between(&s->p, d, &c))
                return;
            reject(s, d, &c, "");
            continue;
        }
        enum search_verdict v = search_dim_compare(&s->p, d, d->cand, d->inc, &c);
        if (v == SEARCH_MORE && !search_dim_can_grow(d, &d->lv[d->cand], true) &&
            d->cap == s->p.max_samples && c.p < EXTEND_P) {
            /* Undecided at the cap but leaning towards the candidate: a
             * real gain of a few spreads' worth takes that long to show. */
            d->cap =
                2 * s->p.max_samples < SEARCH_LEVEL_CAP ? 2 * s->p.max_samples : SEARCH_LEVEL_CAP;
        }
        if (v == SEARCH_MORE && search_dim_can_grow(d, &d->lv[d->cand], true)) {
            d->look = search_dim_first_look(&s->p, d, d->look + 1);
            return;
        }
        if (v == SEARCH_ACCEPT)
            move(s, d, &c);
        else
            reject(s, d, &c, v == SEARCH_MORE ? ", undecided at the sample cap" : "");
    }
}

/* The level the dim wants measured next. */
int search_want(const struct search *s, const struct search_dim *d)
{
    if (d->done || d->cand < 0 || d->lv[d->inc].fresh < s->p.min_samples || d->owed)
        return d->inc;
    const struct search_level *lc = &d->lv[d->cand], *li = &d->lv[d->inc];
    bool cand = lc->kept < d->look && search_dim_can_grow(d, lc, true);
    bool inc = li->kept < d->look && search_dim_can_grow(d, li, false);
    if (cand && inc)
        return lc->kept <= li->kept ? d->cand : d->inc;
    return inc ? d->inc : d->cand;
}

/* ---- samples ---- */

/* Did this sample end dim d's trial? */
static bool trial_aborted(struct search *s, struct search_dim *d, double w, double r,
                          const struct search_sample *x)
{
    double thr[2], v[2] = {w, r};
    bool timeout[2] = {x->write_timeout, x->read_timeout};
    char a[24];

    search_dim_thresholds(&s->p, d, thr);
    for (int dir = 0; dir < 2; dir++) {
        if (d->rank != dir && d->rank != 2)
            continue;
        if (timeout[dir] || (!isnan(thr[dir]) && !isnan(v[dir]) && v[dir] < thr[dir])) {
            why(s, "%s %s trial ended: %s %.1f MB/s%s, %.0f%% of the incumbent's %.1f MB/s",
                d->name, search_size_str(d->lv[d->cand].size, a, sizeof(a)), rate_names[dir],
                exp(v[dir]), timeout[dir] ? " (timeout)" : "",
                100 * exp(v[dir] - search_dim_dir_mean(d, d->inc, dir)),
                exp(search_dim_dir_mean(d, d->inc, dir)));
            return true;
        }
    }
    return false;
}

/* A sample of dim d's candidate came in: did it end the trial? */
bool search_trial_ended(struct search *s, struct search_dim *d, double w, double r,
                        const struct search_sample *x)
{
    struct search_level *l = &d->lv[d->cand];

    if (!trial_aborted(s, d, w, r, x)) {
        l->strikes = 0;
        return false;
    }
    /* The next sample is the incumbent's, whatever is tried after it: a
     * trial far below the incumbent (in live trials, every client's rate)
     * lasts one sample at a time, never two in a row (issue 12). */
    d->owed = true;
    /* One stalled transfer in fifty is noise: the candidate goes to the
     * back of the queue, and dies only when two of its trial samples in a
     * row ended trials and so did most of its samples. */
    l->aborts++;
    l->strikes++;
    if (search_dim_dead(d, d->cand)) {
        struct search_cmp c;
        search_dim_compare(&s->p, d, d->cand, d->inc, &c);
        c.futile = c.stay = false; /* it ended twice: that, not futility, drops it */
        reject(s, d, &c, ", ended twice");
    } else {
        search_dim_push_front(&s->p, d, d->cand, d->cand_walk);
        d->cand = -1;
    }
    return true;
}
