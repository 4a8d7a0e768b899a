/* search: see search.h. This file: the set-up, ask and tell, and what a
 * search tells of its samples; what a dim decides from them is in
 * search_decide.c.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_int.h"

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
        level[k] = s->done ? s->dim[k].inc : search_want(s, &s->dim[k]);
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
        if (level[k] == d->cand && search_trial_ended(s, d, w, r, x))
            aborted = true;
        search_advance(s, d);
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
