/* stats: see stats.h. */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>

/* The k-th smallest of a[0..n-1] (0-based), in place (Wirth's selection):
 * linear time, which matters because the search asks for medians after
 * every sample. */
static double select_k(double *a, int n, int k)
{
    int lo = 0, hi = n - 1;

    while (lo < hi) {
        double pivot = a[k];
        int i = lo, j = hi;
        do {
            while (a[i] < pivot)
                i++;
            while (pivot < a[j])
                j--;
            if (i <= j) {
                double t = a[i];
                a[i] = a[j];
                a[j] = t;
                i++;
                j--;
            }
        } while (i <= j);
        if (j < k)
            lo = i;
        if (k < i)
            hi = j;
    }
    return a[k];
}

/* The two middle order statistics of x[0..n-1] (equal when n is odd). */
static void middle(const double *x, int n, double *lo, double *hi)
{
    double a[STATS_MAX_N];

    memcpy(a, x, sizeof(*x) * (size_t)n);
    *hi = select_k(a, n, n / 2);
    *lo = *hi;
    if (n % 2)
        return;
    /* select_k left the n/2 smallest in a[0..n/2-1]: the other middle
     * value is their maximum. */
    *lo = a[0];
    for (int i = 1; i < n / 2; i++)
        if (a[i] > *lo)
            *lo = a[i];
}

double stats_median(const double *x, int n)
{
    double lo, hi;

    if (n < 1 || n > STATS_MAX_N)
        return NAN;
    middle(x, n, &lo, &hi);
    return (lo + hi) / 2;
}

double stats_mad_scale(double *dev, int n)
{
    if (n < 1)
        return NAN;
    /* qnorm(0.75): the median of |z| for z ~ N(0, 1). */
    return select_k(dev, n, (n - 1) / 2) / 0.6744897501960817;
}

int stats_summarize(const double *x, int n, double reject, struct stats_summary *out)
{
    double sum = 0, ss = 0, lo, hi;
    int kept = 0;

    if (n < 1 || n > STATS_MAX_N)
        return -EINVAL;
    middle(x, n, &lo, &hi);
    out->n = n;
    out->median = (lo + hi) / 2;
    if (reject <= 0 || n < 3)
        reject = INFINITY;
    /* The samples around the median are never rejected. */
    reject = fmax(reject, (hi - lo) / 2);
    for (int i = 0; i < n; i++) {
        if (fabs(x[i] - out->median) <= reject) {
            sum += x[i];
            kept++;
        }
    }
    out->kept = kept;
    out->mean = sum / kept;
    for (int i = 0; i < n; i++) {
        if (fabs(x[i] - out->median) <= reject)
            ss += (x[i] - out->mean) * (x[i] - out->mean);
    }
    out->ss = ss;
    return 0;
}

/* The special functions come from GSL. Its default error handler aborts
 * the process; the daemon must never die of a numerical corner case, so it
 * is switched off (a GSL failure then returns NaN, which every caller
 * treats as "no decision"). The handler is GSL's one global setting, and
 * setting it again is harmless, so each entry point does it itself rather
 * than relying on every program that links this library to remember. */
static void gsl_quiet(void)
{
    gsl_set_error_handler_off();
}

double stats_norm_cdf(double z)
{
    gsl_quiet();
    return gsl_cdf_ugaussian_P(z);
}

double stats_norm_quantile(double p)
{
    if (isnan(p) || p < 0 || p > 1)
        return NAN;
    if (p == 0)
        return -INFINITY;
    if (p == 1)
        return INFINITY;
    gsl_quiet();
    return gsl_cdf_ugaussian_Pinv(p);
}

double stats_t_cdf(double t, double df)
{
    if (isnan(t) || isnan(df) || df <= 0)
        return NAN;
    if (isinf(t))
        return t > 0 ? 1 : 0;
    gsl_quiet();
    return gsl_cdf_tdist_P(t, df);
}

double stats_t_quantile(double p, double df)
{
    if (isnan(p) || isnan(df) || df <= 0 || p < 0 || p > 1)
        return NAN;
    if (p == 0)
        return -INFINITY;
    if (p == 1)
        return INFINITY;
    gsl_quiet();
    return gsl_cdf_tdist_Pinv(p, df);
}

void stats_cusum_add(struct stats_cusum *c, double z, double k)
{
    c->up = fmax(0, c->up + z - k);
    c->up_n = c->up > 0 ? c->up_n + 1 : 0;
    c->down = fmax(0, c->down - z - k);
    c->down_n = c->down > 0 ? c->down_n + 1 : 0;
}
