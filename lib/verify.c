/* verify: see verify.h.
 *
 * Each sample's ranked rates (write and read untied: a change of the path
 * moves both) are scored against the winner's reference, in spreads,
 * clipped so that one stall is no drift. The channels are summed into one
 * score and standardized by the variance of clipped scores (normal noise
 * plus VERIFY_STALL_SHARE stalls at the clip): two channels that both
 * drift by 0.89 spreads make a score that drifts by about 1.16 of its own
 * spreads. Two tests, each two-sided, look at that score; either asks for
 * a new search:
 * - a window test: the sum of the last VERIFY_WINDOW scores against its
 *   standard error, which counts the error of the reference mean as well
 *   (it is shared by every score in the window);
 * - a CUSUM whose allowance k is half the smallest drift worth a new
 *   search (drift_min) in spreads of the score, and at least VERIFY_KMIN:
 *   fast on large drifts.
 * The reference (mean and spread) starts from the winner's samples in the
 * search and takes each verification sample once it is VERIFY_WINDOW
 * samples old, so that a new level is seen before it can hide in the
 * reference (and the window test's samples are never in it), while the
 * reference keeps sharpening: an error of the reference mean or spread is
 * a bias in every score, and false alarms grow fast with it. Until it
 * holds VERIFY_MIN_REF samples the reference takes every sample at once
 * and nothing is judged, but VERIFY_WARM_REJECTS samples in a row beyond
 * the stall bound on one side are a drift: the reference would never take
 * them, and so would never warm up. */
#include "verify.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

/* - Scores are clipped at VERIFY_CLIP spreads, so that one stalled sample
 *   is no drift. 2, not 1.5: a 20% step at sigma 0.25 is 0.89 spreads, and
 *   clipping at 1.5 keeps 82% of it per unit of noise (two channels: 1.12
 *   spreads) against 85% (1.16) at 2; with the 2% of stalls at a tenth of
 *   the rate, 2 is where the simulator catches the step soonest for a
 *   given false-alarm rate (1.5 and 2.5 to 3 both do worse).
 * - VERIFY_STALL_SHARE: the share of stalled samples the variance of a
 *   clipped score allows for (FACTS.md: about 2% of transfers stall).
 * - Alarms wait for VERIFY_MIN_REF reference samples.
 * - A window test over the last VERIFY_WINDOW samples at VERIFY_WINDOW_Z
 *   standard errors: the requirement is a 20% step caught within 10
 *   samples, and the sum of exactly those 10 samples is the most powerful
 *   statistic for that (a CUSUM tuned for it, or a scan over shorter
 *   windows, catches fewer within 10 for the same false alarms, measured
 *   in the simulator). 2.2: a false alarm about once in 120 samples at
 *   high noise (one needless search a month at the daemon's 6 h
 *   interval), which buys the 20% step at sigma 0.25 caught within 10
 *   samples in about 92% of runs, against 85-89% at 2.5. A missed drift
 *   costs throughput for as long as it stays missed; a false alarm costs
 *   one search.
 * - A CUSUM with allowance at least VERIFY_KMIN and threshold VERIFY_H
 *   catches what the window is slow for: a large drift (a collapse of the
 *   path) in one to three samples. k = 1 is tuned for shifts of two
 *   spreads and more, so it adds few false alarms to the window's.
 * - VERIFY_SIGMA_UNKNOWN: the spread assumed while the reference has none
 *   (a winner whose search pooled no spread): about 5%, the floor of the
 *   search's outlier bound.
 * - VERIFY_WARM_REJECTS: a stall is rare (2%) and lands below: four in a
 *   row come from independent stalls once in 6 million samples (three:
 *   once in 125000, a false alarm in about one search-sim run in 1500),
 *   and a drift of more than the stall bound (a path that fell from
 *   1 Gbit/s to 100 Mbit/s while the daemon was down) is caught at the
 *   fourth sample instead of never. A reference built from stalled
 *   samples (a winner whose samples on one channel all stalled) is left
 *   the same way: every later sample is beyond its bound.
 * - VERIFY_MAX_REF: past this many samples the reference mean moves by
 *   1/VERIFY_MAX_REF of each new one (a long memory, not an unbounded
 *   count: the count is kept in the state file and must not overflow). */
#define VERIFY_CLIP 2.0
#define VERIFY_STALL_SHARE 0.02
#define VERIFY_MIN_REF 20
#define VERIFY_WINDOW_Z 2.2
#define VERIFY_KMIN 1.0
#define VERIFY_H 4.5
#define VERIFY_SIGMA_UNKNOWN 0.05
#define VERIFY_WARM_REJECTS 4

struct verify {
    double drift_min;              /* the smallest drift worth a new search */
    int nch;                       /* channels: one per dim, its ranked rate */
    enum search_rate rank[2];      /* write, read, or both (harmonic) */
    double mean[2];                /* reference: mean of log rates */
    int n[2];                      /* and its samples */
    double ss[2], df[2];           /* pooled squares and degrees of freedom of the spread */
    double reject[2];              /* stall bound (from the search) */
    int warm_run[2];               /* warm-up: samples in a row beyond reject, + above, - below */
    double warm_sum[2];            /* and the sum of their log distances from the mean */
    double last[VERIFY_WINDOW][2]; /* warm-up: the last samples told (a ring) */
    int nlast;
    int run_from[2];               /* warm-up: the sample (of nlast) a channel's run began at */
    double pend[2][VERIFY_WINDOW]; /* recent samples, not yet in the reference */
    int npend;
    struct stats_cusum cusum;
    bool alarm;
    char why[VERIFY_WHY_LEN];
};

int verify_new(const struct search_reference *ref, double drift_min, struct verify **vp)
{
    struct verify *v;

    *vp = NULL;
    if (ref->nch < 1 || ref->nch > 2 || !(drift_min >= 0))
        return -EINVAL;
    /* a reference read back from the state file is checked here too */
    for (int ch = 0; ch < ref->nch; ch++) {
        const struct search_channel *c = &ref->ch[ch];
        if ((c->n > 0 && !isfinite(c->mean)) || c->n < 0 || !(c->ss >= 0 && c->ss < 1e12) ||
            !(c->df >= 0 && c->df < 1e9) || !(c->reject > 0 && c->reject < 1e3) ||
            (c->rate != SEARCH_RATE_WRITE && c->rate != SEARCH_RATE_READ &&
             c->rate != SEARCH_RATE_BOTH))
            return -EINVAL;
    }
    if ((v = calloc(1, sizeof(*v))) == NULL)
        return -ENOMEM;
    v->drift_min = drift_min;
    v->nch = ref->nch;
    for (int ch = 0; ch < v->nch; ch++) {
        const struct search_channel *c = &ref->ch[ch];
        v->rank[ch] = c->rate;
        v->reject[ch] = c->reject;
        v->mean[ch] = c->mean;
        v->n[ch] = c->n < VERIFY_MAX_REF ? c->n : VERIFY_MAX_REF;
        v->ss[ch] = c->ss;
        v->df[ch] = c->df;
    }
    *vp = v;
    return 0;
}

int verify_of_search(const struct search *s, struct verify **vp)
{
    struct search_reference ref;

    *vp = NULL;
    if (search_reference(s, &ref) < 0)
        return -EINVAL;
    return verify_new(&ref, search_params_of(s)->drift_min, vp);
}

void verify_free(struct verify *v)
{
    free(v);
}

const char *verify_why(const struct verify *v)
{
    return v->why;
}

static double verify_sigma(const struct verify *v, int ch)
{
    return v->df[ch] > 0 ? fmax(sqrt(v->ss[ch] / v->df[ch]), SEARCH_SIGMA_FLOOR)
                         : VERIFY_SIGMA_UNKNOWN;
}

/* Add one sample to a channel's reference, unless it is a stall. */
static void verify_absorb(struct verify *v, int ch, double o)
{
    if (isnan(o))
        return;
    if (v->n[ch] == 0) {
        v->mean[ch] = o;
        v->n[ch] = 1;
        return;
    }
    double delta = o - v->mean[ch];
    if (fabs(delta) > v->reject[ch])
        return;
    if (v->n[ch] < VERIFY_MAX_REF)
        v->n[ch]++;
    v->mean[ch] += delta / v->n[ch];
    v->ss[ch] += delta * (o - v->mean[ch]);
    v->df[ch]++;
}

/* Scores are clipped at this many spreads: never below twice the smallest
 * drift that matters, so that a drift is not clipped away at low noise. */
static double verify_clip(const struct verify *v, int ch)
{
    return fmax(VERIFY_CLIP, 2 * log1p(v->drift_min) / verify_sigma(v, ch));
}

/* Variance of a score clipped at c: of a standard normal clipped at +-c,
 * and VERIFY_STALL_SHARE of the samples stalled (at -c). */
static double clipped_var(double c)
{
    double tail = stats_norm_cdf(-c), dens = exp(-c * c / 2) / sqrt(2 * M_PI);
    double normal = 1 - 2 * tail - 2 * c * dens + 2 * c * c * tail;
    double p = VERIFY_STALL_SHARE;
    return (1 - p) * normal + p * (1 - p) * c * c;
}

/* The clipped score of log rate o on channel ch, NAN if not measured.
 * Centred: the reference leaves stalls out, so with VERIFY_STALL_SHARE of
 * them at -c a steady rate's scores average -share * c, a lean that made
 * false alarms of a drop about twice as common as of a rise. */
static double verify_score(const struct verify *v, int ch, double o)
{
    if (isnan(o))
        return NAN;
    double c = verify_clip(v, ch), u = (o - v->mean[ch]) / verify_sigma(v, ch);
    return fmax(-c, fmin(c, u)) + VERIFY_STALL_SHARE * c;
}

/* The window test's statistic: the sum of the scores of the last
 * VERIFY_WINDOW samples over its standard error. An error e of a reference
 * mean shifts each of the window's unclipped scores by e; the clipped ones
 * move by P(|u| < c) of it. */
static double verify_window_z(const struct verify *v, double *shift)
{
    double sum = 0, var = 0;

    *shift = 0;

    for (int ch = 0; ch < v->nch; ch++) {
        double c = verify_clip(v, ch), slope = 1 - 2 * stats_norm_cdf(-c), csum = 0;
        int cnt = 0;
        for (int j = 0; j < VERIFY_WINDOW; j++) {
            double z = verify_score(v, ch, v->pend[ch][j]);
            if (!isnan(z)) {
                csum += z;
                cnt++;
            }
        }
        sum += csum;
        var += cnt * clipped_var(c) + (double)cnt * cnt * slope * slope / v->n[ch];
        if (cnt)
            *shift += csum / cnt * verify_sigma(v, ch) / v->nch;
    }
    return var > 0 ? sum / sqrt(var) : 0;
}

/* The alarm's line: the drift of each rate over the last n samples. */
static void verify_say(struct verify *v, int n, const char *test)
{
    char buf[VERIFY_WHY_LEN / 2] = "";
    size_t len = 0;

    if (n > v->npend)
        n = v->npend;
    if (n > VERIFY_WINDOW)
        n = VERIFY_WINDOW;
    for (int ch = 0; ch < v->nch; ch++) {
        double sum = 0;
        int cnt = 0;
        for (int j = 0; j < n; j++) {
            double o = v->pend[ch][(v->npend - 1 - j) % VERIFY_WINDOW];
            if (!isnan(o)) {
                sum += o;
                cnt++;
            }
        }
        if (cnt && len < sizeof(buf))
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s %+.1f%%", len ? ", " : "",
                                    search_rate_name(v->rank[ch]),
                                    100 * expm1(sum / cnt - v->mean[ch]));
    }
    snprintf(v->why, sizeof(v->why), "drift %s over the last %d samples (%s): new search", buf, n,
             test);
}

/* A warm-up sample: into the reference (unless replayed: it is in it
 * already), unless beyond the stall bound, where it extends or starts a
 * run on its side. True when the run is VERIFY_WARM_REJECTS long. */
static bool warm_up(struct verify *v, int ch, double o, bool replay)
{
    double delta = o - v->mean[ch];
    int side = delta > 0 ? 1 : -1;

    if (isnan(o))
        return false;
    if (v->n[ch] == 0 || fabs(delta) <= v->reject[ch]) {
        v->warm_run[ch] = 0;
        v->warm_sum[ch] = 0;
        if (!replay)
            verify_absorb(v, ch, o);
        return false;
    }
    if (v->warm_run[ch] * side <= 0) {
        v->warm_run[ch] = 0;
        v->warm_sum[ch] = 0;
        v->run_from[ch] = v->nlast - 1;
    }
    v->warm_run[ch] += side;
    v->warm_sum[ch] += delta;
    return abs(v->warm_run[ch]) >= VERIFY_WARM_REJECTS;
}

/* The warm-up's line: each channel's run, as an alarm or as a run that
 * has not reached VERIFY_WARM_REJECTS yet (said too: the journal's
 * "verified" would read as all well). */
static void warm_say(struct verify *v, bool alarm)
{
    char buf[VERIFY_WHY_LEN / 2] = "";
    size_t len = 0;
    int longest = 0;

    for (int ch = 0; ch < v->nch; ch++) {
        if (v->warm_run[ch] == 0 || len >= sizeof(buf))
            continue;
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s %+.1f%%", len ? ", " : "",
                                search_rate_name(v->rank[ch]),
                                100 * expm1(v->warm_sum[ch] / abs(v->warm_run[ch])));
        if (abs(v->warm_run[ch]) > longest)
            longest = abs(v->warm_run[ch]);
    }
    if (alarm)
        snprintf(v->why, sizeof(v->why),
                 "drift %s: %d samples in a row beyond the stall bound while the reference was "
                 "still being built: new search",
                 buf, VERIFY_WARM_REJECTS);
    else if (longest > 0)
        snprintf(v->why, sizeof(v->why),
                 "%s beyond the stall bound, %d sample%s in a row (a new search at %d) while "
                 "the reference is still being built",
                 buf, longest, longest == 1 ? "" : "s", VERIFY_WARM_REJECTS);
}

int verify_reference(const struct verify *v, struct search_reference *ref)
{
    memset(ref, 0, sizeof(*ref));
    if (v->alarm)
        return -EINVAL;
    ref->nch = v->nch;
    for (int ch = 0; ch < v->nch; ch++)
        ref->ch[ch] = (struct search_channel){.rate = v->rank[ch],
                                              .mean = v->mean[ch],
                                              .n = v->n[ch],
                                              .ss = v->ss[ch],
                                              .df = v->df[ch],
                                              .reject = v->reject[ch]};
    return 0;
}

static bool verify_warm(const struct verify *v)
{
    bool warm = true;

    for (int ch = 0; ch < v->nch; ch++)
        warm = warm && v->n[ch] >= VERIFY_MIN_REF;
    return warm;
}

int verify_recent(const struct verify *v, double y[][2], int *n)
{
    *n = 0;
    if (v->alarm)
        return -EINVAL;
    if (verify_warm(v)) {
        /* the window: every sample since the reference warmed, at most
         * VERIFY_WINDOW, none of them in it yet */
        int k = v->npend < VERIFY_WINDOW ? v->npend : VERIFY_WINDOW;
        for (int j = 0; j < k; j++)
            for (int ch = 0; ch < 2; ch++)
                y[j][ch] = ch < v->nch ? v->pend[ch][(v->npend - k + j) % VERIFY_WINDOW] : NAN;
        *n = k;
        return 0;
    }
    /* the warm-up's runs: the samples since the older run began (a
     * sample not measured on a channel leaves its run as it was, and may
     * sit inside it) */
    int k = 0;
    for (int ch = 0; ch < v->nch; ch++)
        if (v->warm_run[ch] != 0 && v->nlast - v->run_from[ch] > k)
            k = v->nlast - v->run_from[ch];
    if (k > v->nlast)
        k = v->nlast;
    if (k > VERIFY_WINDOW)
        k = VERIFY_WINDOW;
    for (int j = 0; j < k; j++)
        for (int ch = 0; ch < 2; ch++)
            y[j][ch] = v->last[(v->nlast - k + j) % VERIFY_WINDOW][ch];
    *n = k;
    return 0;
}

static int tell_rates(struct verify *v, const double *y, bool replay);

int verify_tell(struct verify *v, const struct search_sample *x)
{
    double y[2] = {NAN, NAN};

    if (isinf(x->write) || isinf(x->read))
        return -EINVAL;
    for (int ch = 0; ch < v->nch; ch++)
        y[ch] = search_sample_rate(x, v->rank[ch]);
    return tell_rates(v, y, false);
}

int verify_replay(struct verify *v, const double y[2])
{
    for (int ch = 0; ch < v->nch; ch++)
        if (isinf(y[ch]))
            return -EINVAL;
    return tell_rates(v, y, true);
}

/* One sample's ranked log rates, told or replayed. */
static int tell_rates(struct verify *v, const double *y, bool replay)
{
    double z = 0, var = 0, drift = 0;
    char test[64];

    v->why[0] = '\0';
    if (v->alarm)
        return VERIFY_RESEARCH;
    if (!verify_warm(v)) {
        bool moved = false;
        for (int ch = 0; ch < 2; ch++)
            v->last[v->nlast % VERIFY_WINDOW][ch] = ch < v->nch ? y[ch] : NAN;
        v->nlast++;
        for (int ch = 0; ch < v->nch; ch++)
            moved = warm_up(v, ch, y[ch], replay) || moved;
        warm_say(v, moved);
        if (!moved)
            return VERIFY_OK;
        v->alarm = true;
        return VERIFY_RESEARCH;
    }
    for (int ch = 0; ch < v->nch; ch++) {
        double u = verify_score(v, ch, y[ch]), cv = clipped_var(verify_clip(v, ch));
        if (!isnan(u)) {
            z += u;
            var += cv;
        }
        drift += log1p(v->drift_min) / verify_sigma(v, ch) / sqrt(cv);
        /* the sample leaving the window joins the reference */
        int slot = v->npend % VERIFY_WINDOW;
        if (v->npend >= VERIFY_WINDOW)
            verify_absorb(v, ch, v->pend[ch][slot]);
        v->pend[ch][slot] = y[ch];
    }
    v->npend++;
    if (var == 0)
        return VERIFY_OK;

    /* drift_min in spreads of the summed score, halved */
    double k = fmax(VERIFY_KMIN, drift / sqrt(v->nch) / 2);
    stats_cusum_add(&v->cusum, z / sqrt(var), k);
    double shift = 0, wz = v->npend >= VERIFY_WINDOW ? verify_window_z(v, &shift) : 0;
    int n;
    if (v->cusum.up > VERIFY_H || v->cusum.down > VERIFY_H) {
        bool up = v->cusum.up > VERIFY_H;
        n = up ? v->cusum.up_n : v->cusum.down_n;
        snprintf(test, sizeof(test), "CUSUM %.1f > %.1f", up ? v->cusum.up : v->cusum.down,
                 VERIFY_H);
    } else if (fabs(wz) > VERIFY_WINDOW_Z && fabs(shift) >= log1p(v->drift_min) / 2) {
        n = VERIFY_WINDOW;
        snprintf(test, sizeof(test), "window z %.1f, beyond %.1f", wz, VERIFY_WINDOW_Z);
    } else {
        return VERIFY_OK;
    }
    v->alarm = true;
    verify_say(v, n, test);
    return VERIFY_RESEARCH;
}
