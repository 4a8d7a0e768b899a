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
 * every smaller size is worse still); from the cap, AUTO and then the same
 * walk. A size that times out is no place to climb from: from it the walk
 * is tried too. Levels that were incumbents
 * are never tried again, so the search cannot cycle.
 *
 * A candidate is compared with the incumbent (how: search_dim_cmp.c) once
 * both sides are sampled up to the next look (3, 5, 8, 12, ... samples a
 * side); between looks, only the futility rule may end a comparison, and
 * only where the incumbent stays. A trial sample far below the incumbent
 * ends the trial at once: the incumbent is measured next, then the
 * candidate is tried again, and dropped when two of its trial samples in a
 * row end trials. After a move the new incumbent takes
 * min_samples more samples before it is compared again: the samples that
 * made it win were lucky ones. */
#include "search.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_dim.h"

/* At the cap, a comparison still leaning towards the candidate (its test
 * below this level) may go on to twice the cap: a real gain of a few
 * spreads' worth takes that long to show at high noise. */
#define EXTEND_P 0.15

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
    s->why_lines++;
}

const char *search_size_str(long size, char *buf, size_t len)
{
    if (size == SEARCH_AUTO)
        snprintf(buf, len, "auto");
    else
        snprintf(buf, len, "%ld", size);
    return buf;
}

const char *search_config_str(struct search_config c, char *buf, size_t len)
{
    char a[32], b[32];

    snprintf(buf, len, "SO_RCVBUF %s SO_SNDBUF %s", search_size_str(c.rcvbuf, a, sizeof(a)),
             search_size_str(c.sndbuf, b, sizeof(b)));
    return buf;
}

bool search_config_eq(struct search_config a, struct search_config b)
{
    return a.rcvbuf == b.rcvbuf && a.sndbuf == b.sndbuf;
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
static void advance(struct search *s, struct search_dim *d)
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
static int want(const struct search *s, const struct search_dim *d)
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

/* ---- set-up ---- */

static int dim_init(struct search *s, struct search_dim *d, long cap, long start)
{
    int rc = search_dim_lattice(d, &s->p, cap);
    if (rc < 0)
        return rc;
    d->cand = -1;
    d->last_dir = 0;
    if (start == SEARCH_AUTO && !s->p.auto_observable) {
        why(s, "%s: auto cannot be measured, starting from %ld", d->name, cap);
        start = cap;
    }
    if (start > cap)
        start = cap; /* the kernel clamps it there anyway */
    d->inc = search_dim_level_of(d, start);
    if (d->inc < 0) {
        if ((rc = search_dim_insert(d, start, false)) < 0)
            return rc;
        d->inc = rc;
    }
    search_dim_queue(&s->p, d);
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
    s->p = *p;

    int rc;
    if (p->tied) {
        /* One size for both; each side clamped at its own cap. */
        s->ndims = 1;
        s->dim[0].name = "SO_RCVBUF/SO_SNDBUF";
        s->dim[0].rank = 2;
        long cap = p->max_rcvbuf > p->max_sndbuf ? p->max_rcvbuf : p->max_sndbuf;
        long start = incumbent.rcvbuf > incumbent.sndbuf ? incumbent.rcvbuf : incumbent.sndbuf;
        /* A line that names one size and leaves the other to autotuning
         * is no tied configuration: the search starts from the size it
         * names, for both (the line in force is not measured as such). */
        if ((incumbent.rcvbuf == SEARCH_AUTO) != (incumbent.sndbuf == SEARCH_AUTO))
            why(s,
                "tied: the line in force names one size, %s; searching one size for both "
                "from %ld",
                incumbent.rcvbuf == SEARCH_AUTO ? "SO_SNDBUF" : "SO_RCVBUF", start);
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

int search_new(const struct search_params *p, struct search_config incumbent, struct search **sp)
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
        level[0] = search_dim_level_of(&s->dim[0], cfg.rcvbuf);
        level[1] = search_dim_level_of(&s->dim[1], cfg.sndbuf);
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

bool search_why_move(const struct search *s, int line)
{
    return line >= 0 && line < 32 && line < s->why_lines && (s->why_moves >> line & 1u);
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
                mean[dir] = search_dim_dir_mean_n(d, level[k], dir, &kept[dir]);
    }
    *est = (struct search_estimate){exp(mean[0]), exp(mean[1]), kept[0], kept[1]};
    return 0;
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
            search_dim_thresholds(&s->p, d, thr);
            for (int dir = 0; dir < 2; dir++)
                if (!isnan(thr[dir]))
                    rate[dir] = fmax(rate[dir], exp(thr[dir]));
        }
    }
    *write_min = rate[0];
    *read_min = rate[1];
}

/* ---- samples ---- */

double search_sample_rate(const struct search_sample *x, enum search_rate r)
{
    return search_dim_ranked(r, search_dim_log_rate(x->write), search_dim_log_rate(x->read));
}

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
static bool trial_ended(struct search *s, struct search_dim *d, double w, double r,
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

/* The winner's reference for verification (lib/verify.c), taken once, at
 * convergence. */
static void take_reference(struct search *s)
{
    struct search_reference *ref = &s->ref;

    memset(ref, 0, sizeof(*ref));
    ref->nch = s->ndims;
    for (int ch = 0; ch < ref->nch; ch++)
        search_dim_channel(&s->dim[ch], &ref->ch[ch]);
}

int search_tell(struct search *s, struct search_config cfg, const struct search_sample *x)
{
    int level[2];
    bool aborted = false;

    if (levels_of(s, cfg, level) < 0 || isinf(x->write) || isinf(x->read))
        return -EINVAL;
    s->why[0] = '\0';
    s->why_lines = 0;
    s->why_moves = 0;
    s->total++;
    double w = search_dim_log_rate(x->write), r = search_dim_log_rate(x->read);
    for (int k = 0; k < s->ndims; k++) {
        struct search_dim *d = &s->dim[k];
        bool timeout = (d->rank != 1 && x->write_timeout) || (d->rank != 0 && x->read_timeout);
        search_dim_add(&d->lv[level[k]], w, r, timeout);
        search_dim_refresh(d);
        if (level[k] == d->inc)
            d->owed = false;
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
