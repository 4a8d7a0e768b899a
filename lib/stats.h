/* stats: the few statistics the search decides with. Pure functions, no
 * state, no I/O. The search works on logarithms of rates: throughput noise
 * is multiplicative (a busy disk or a retransmission costs a share of the
 * rate, not a fixed amount), so in log space the spread is the same for
 * every configuration and a ratio of rates is a difference of means. */
#ifndef SMBTUNE_STATS_H
#define SMBTUNE_STATS_H

#include <stdbool.h>

/* Largest series the functions below accept (they sort a private copy). */
#define STATS_MAX_N 1024

/* Median of x[0..n-1]; x is not modified. NAN when n < 1. The median, not
 * the mean, locates a configuration: one stalled transfer among five moves
 * the mean by a fifth of the stall and the median not at all. */
double stats_median(const double *x, int n);

/* Robust spread from absolute deviations |x - median| taken within each
 * configuration and pooled by the caller (leaving out the median sample
 * itself, a zero, of each configuration with an odd count): their low
 * median, scaled so that it estimates the standard deviation of normal
 * noise. Deviations within a configuration, so that configurations with
 * different rates can be pooled; a median, so that the 2% of stalled
 * transfers do not inflate it; the low median, so that with two
 * deviations, one of them a stall, the good one is taken. With few samples
 * per configuration it runs low (the median sits among the samples): it
 * only sets the bound for outliers, never the spread of a test. Reorders
 * dev. NAN when n < 1. */
double stats_mad_scale(double *dev, int n);

/* One configuration's samples after outlier rejection. */
struct stats_summary {
    int n;         /* samples given */
    int kept;      /* samples within `reject` of the median */
    double median; /* of all n samples */
    double mean;   /* of the kept samples */
    double ss;     /* sum of squared deviations of the kept samples from mean */
};

/* Summarize x[0..n-1], keeping the samples within `reject` of the median
 * (all of them when reject <= 0 or n < 3: with fewer than three samples
 * nothing tells which one is odd). The kept samples give a mean and a sum
 * of squares for a t test: efficient on well-behaved noise, and with the
 * stalls removed first it is not dragged down by them. Returns 0, or
 * -EINVAL when n < 1 or n > STATS_MAX_N. */
int stats_summarize(const double *x, int n, double reject, struct stats_summary *out);

/* Standard normal distribution function and its inverse (GSL's).
 * stats_norm_quantile returns -INFINITY or INFINITY at 0 and 1, NAN
 * outside [0, 1]. */
double stats_norm_cdf(double z);
double stats_norm_quantile(double p);

/* Student's t with df degrees of freedom (df > 0, not necessarily an
 * integer): P(T <= t), and its inverse. The t distribution, not the normal,
 * because early in a search the spread is estimated from a handful of
 * samples and a z test would call chance differences significant. GSL's
 * functions, with the domain checked here: NAN for a bad argument. */
double stats_t_cdf(double t, double df);
double stats_t_quantile(double p, double df);

/* Two-sided CUSUM on standardized scores: up accumulates z - k, down
 * accumulates -z - k, each floored at 0. It detects a lasting shift of
 * about 2k standard deviations after (h + 1.17) / (shift - k) samples on
 * average; k keeps the ordinary noise from accumulating. */
struct stats_cusum {
    double up, down;  /* the two sums */
    int up_n, down_n; /* samples since each sum was last 0 */
};
void stats_cusum_add(struct stats_cusum *c, double z, double k);

#endif
