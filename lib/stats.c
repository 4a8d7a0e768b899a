/* stats: see stats.h. */
#include "stats.h"

#include <errno.h>
#include <math.h>
#include <string.h>

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

double stats_norm_cdf(double z)
{
    return 0.5 * erfc(-z / M_SQRT2);
}

/* c[0] + c[1] x + ... + c[7] x^7 */
static double poly8(const double *c, double x)
{
    double v = c[7];
    for (int i = 6; i >= 0; i--)
        v = v * x + c[i];
    return v;
}

/* Wichura, Algorithm AS 241, Applied Statistics 37 (1988), PPND16. */
double stats_norm_quantile(double p)
{
    static const double a[] = {3.3871328727963666080e+0, 1.3314166789178437745e+2,
                               1.9715909503065514427e+3, 1.3731693765509461125e+4,
                               4.5921953931549871457e+4, 6.7265770927008700853e+4,
                               3.3430575583588128105e+4, 2.5090809287301226727e+3};
    static const double b[] = {1.0,
                               4.2313330701600911252e+1,
                               6.8718700749205790830e+2,
                               5.3941960214247511077e+3,
                               2.1213794301586595867e+4,
                               3.9307895800092710610e+4,
                               2.8729085735721942674e+4,
                               5.2264952788528545610e+3};
    static const double c[] = {1.42343711074968357734e+0, 4.63033784615654529590e+0,
                               5.76949722146069140550e+0, 3.64784832476320460504e+0,
                               1.27045825245236838258e+0, 2.41780725177450611770e-1,
                               2.27238449892691845833e-2, 7.74545014278341407640e-4};
    static const double d[] = {1.0,
                               2.05319162663775882187e+0,
                               1.67638483018380384940e+0,
                               6.89767334985100004550e-1,
                               1.48103976427480074590e-1,
                               1.51986665636164571966e-2,
                               5.47593808499534494600e-4,
                               1.05075007164441684324e-9};
    static const double e[] = {6.65790464350110377720e+0, 5.46378491116411436990e+0,
                               1.78482653991729133580e+0, 2.96560571828504891230e-1,
                               2.65321895265761230930e-2, 1.24266094738807843860e-3,
                               2.71155556874348757815e-5, 2.01033439929228813265e-7};
    static const double f[] = {1.0,
                               5.99832206555887937690e-1,
                               1.36929880922735805310e-1,
                               1.48753612908506148525e-2,
                               7.86869131145613259100e-4,
                               1.84631831751005468180e-5,
                               1.42151175831644588870e-7,
                               2.04426310338993978564e-15};

    if (isnan(p) || p < 0 || p > 1)
        return NAN;
    if (p == 0)
        return -INFINITY;
    if (p == 1)
        return INFINITY;

    double q = p - 0.5, r, v;
    if (fabs(q) <= 0.425) {
        r = 0.180625 - q * q;
        return q * poly8(a, r) / poly8(b, r);
    }
    r = sqrt(-log(q < 0 ? p : 1 - p));
    if (r <= 5)
        v = poly8(c, r - 1.6) / poly8(d, r - 1.6);
    else
        v = poly8(e, r - 5) / poly8(f, r - 5);
    return q < 0 ? -v : v;
}

#define LENTZ_TINY 1e-300

/* One term aa of a continued fraction by the modified Lentz method: updates
 * c and d, returns the factor the value is multiplied by. */
static double lentz_step(double aa, double *c, double *d)
{
    *d = 1 + aa * *d;
    if (fabs(*d) < LENTZ_TINY)
        *d = LENTZ_TINY;
    *c = 1 + aa / *c;
    if (fabs(*c) < LENTZ_TINY)
        *c = LENTZ_TINY;
    *d = 1 / *d;
    return *d * *c;
}

/* Continued fraction for the incomplete beta function (modified Lentz). */
static double betacf(double a, double b, double x)
{
    const double eps = 1e-15;
    double qab = a + b, qap = a + 1, qam = a - 1;
    double c = 1, d = 1 - qab * x / qap;

    if (fabs(d) < LENTZ_TINY)
        d = LENTZ_TINY;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 300; m++) {
        int m2 = 2 * m;
        h *= lentz_step(m * (b - m) * x / ((qam + m2) * (a + m2)), &c, &d);
        double del = lentz_step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)), &c, &d);
        h *= del;
        if (fabs(del - 1) < eps)
            break;
    }
    return h;
}

double stats_betai(double a, double b, double x)
{
    if (isnan(x) || a <= 0 || b <= 0 || x < 0 || x > 1)
        return NAN;
    if (x == 0 || x == 1)
        return x;
    double bt = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    /* The fraction converges fast only below the mean; use the symmetry
     * I_x(a, b) = 1 - I_{1-x}(b, a) above it. */
    if (x < (a + 1) / (a + b + 2))
        return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, 1 - x) / b;
}

/* P(T > t) for t >= 0. */
static double t_upper(double t, double df)
{
    return 0.5 * stats_betai(df / 2, 0.5, df / (df + t * t));
}

double stats_t_cdf(double t, double df)
{
    if (isnan(t) || isnan(df) || df <= 0)
        return NAN;
    if (isinf(t))
        return t > 0 ? 1 : 0;
    return t >= 0 ? 1 - t_upper(t, df) : t_upper(-t, df);
}

static double t_pdf(double t, double df)
{
    return exp(lgamma((df + 1) / 2) - lgamma(df / 2) - 0.5 * log(df * M_PI) -
               (df + 1) / 2 * log1p(t * t / df));
}

double stats_t_quantile(double p, double df)
{
    if (isnan(p) || isnan(df) || df <= 0 || p < 0 || p > 1)
        return NAN;
    if (p == 0)
        return -INFINITY;
    if (p == 1)
        return INFINITY;
    if (p < 0.5)
        return -stats_t_quantile(1 - p, df);
    if (p == 0.5)
        return 0;

    /* Solve P(T > t) = q for t > 0: Newton's method from the Cornish-Fisher
     * expansion, kept inside a bracket that bisection narrows when Newton
     * strays (small df has heavy tails). */
    double q = 1 - p;
    double z = stats_norm_quantile(p), z2 = z * z;
    double t = z + z * (z2 + 1) / (4 * df) + z * ((5 * z2 + 16) * z2 + 3) / (96 * df * df);
    double lo = 0, hi = t > 1 ? t : 1;
    while (t_upper(hi, df) > q && hi < 1e300)
        hi *= 2;
    if (!(t > lo && t < hi))
        t = (lo + hi) / 2;
    for (int i = 0; i < 200; i++) {
        double f = t_upper(t, df) - q; /* decreasing in t */
        if (f > 0)
            lo = t;
        else
            hi = t;
        double next = t + f / t_pdf(t, df);
        if (!(next > lo && next < hi))
            next = (lo + hi) / 2;
        if (fabs(next - t) <= 1e-14 * fabs(t))
            return next;
        t = next;
    }
    return t;
}

void stats_cusum_add(struct stats_cusum *c, double z, double k)
{
    c->up = fmax(0, c->up + z - k);
    c->up_n = c->up > 0 ? c->up_n + 1 : 0;
    c->down = fmax(0, c->down - z - k);
    c->down_n = c->down > 0 ? c->down_n + 1 : 0;
}
