/* stats: known values. Reference values come from closed forms (t with 1
 * and 2 degrees of freedom, the beta function at small integers, arcsine)
 * or from published tables. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "stats.h"

#define assert_near(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void test_median(void **state)
{
    double odd[] = {5, 1, 4, 2, 3};
    double even[] = {10, 1, 4, 2};
    double one[] = {7};

    assert_near(stats_median(odd, 5), 3, 0);
    assert_near(stats_median(even, 4), 3, 0);
    assert_near(stats_median(one, 1), 7, 0);
    assert_true(isnan(stats_median(odd, 0)));
    /* the input is left alone */
    assert_near(odd[0], 5, 0);
    assert_near(even[0], 10, 0);
}

static void test_mad_scale(void **state)
{
    double dev[] = {5, 1, 4, 2, 3};
    double two[] = {2.3, 0.1}; /* one stall, one good sample: the good one counts */

    assert_near(stats_mad_scale(dev, 5), 3 / 0.6744897501960817, 1e-12);
    assert_near(stats_mad_scale(two, 2), 0.1 / 0.6744897501960817, 1e-12);
    assert_true(isnan(stats_mad_scale(dev, 0)));
}

static void test_summarize(void **state)
{
    struct stats_summary s;
    double x[] = {1, 2, 3, 100, 4};

    /* the stall at 100 is more than 10 from the median 3: dropped */
    assert_int_equal(stats_summarize(x, 5, 10, &s), 0);
    assert_int_equal(s.n, 5);
    assert_int_equal(s.kept, 4);
    assert_near(s.median, 3, 0);
    assert_near(s.mean, 2.5, 1e-12);
    assert_near(s.ss, 5, 1e-12);

    /* no bound: everything counts */
    assert_int_equal(stats_summarize(x, 5, 0, &s), 0);
    assert_int_equal(s.kept, 5);
    assert_near(s.mean, 22, 1e-12);

    /* two samples: nothing tells which one is odd */
    assert_int_equal(stats_summarize(x + 2, 2, 1, &s), 0);
    assert_int_equal(s.kept, 2);

    /* an even count whose middle is empty keeps the two around it */
    double gap[] = {0, 0, 10, 10};
    assert_int_equal(stats_summarize(gap, 4, 1, &s), 0);
    assert_int_equal(s.kept, 4);
    assert_near(s.mean, 5, 1e-12);

    assert_int_equal(stats_summarize(x, 0, 1, &s), -EINVAL);
    assert_int_equal(stats_summarize(x, STATS_MAX_N + 1, 1, &s), -EINVAL);
}

static void test_normal(void **state)
{
    assert_near(stats_norm_quantile(0.975), 1.959963984540054, 1e-14);
    assert_near(stats_norm_quantile(0.5), 0, 0);
    assert_near(stats_norm_quantile(0.025), -1.959963984540054, 1e-14);
    assert_near(stats_norm_quantile(1e-10), -6.361340902404056, 1e-12);
    assert_near(stats_norm_quantile(0.999), 3.090232306167813, 1e-12);
    assert_true(isinf(stats_norm_quantile(0)) && stats_norm_quantile(0) < 0);
    assert_true(isinf(stats_norm_quantile(1)) && stats_norm_quantile(1) > 0);
    assert_true(isnan(stats_norm_quantile(1.5)));
    assert_near(stats_norm_cdf(1.959963984540054), 0.975, 1e-14);
    assert_near(stats_norm_cdf(0), 0.5, 0);
}

static void test_t(void **state)
{
    /* df 1 is Cauchy: F(t) = 1/2 + atan(t)/pi */
    assert_near(stats_t_cdf(1, 1), 0.75, 1e-13);
    assert_near(stats_t_cdf(30, 1), 0.5 + atan(30) / M_PI, 1e-13);
    /* df 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)) */
    assert_near(stats_t_cdf(2, 2), 0.5 + 2 / (2 * sqrt(6)), 1e-13);
    assert_near(stats_t_cdf(-2, 2), 0.5 - 2 / (2 * sqrt(6)), 1e-13);
    /* tables: two-sided p of t = 2 with 10 df is 0.0734 */
    assert_near(2 * (1 - stats_t_cdf(2, 10)), 0.07338803477074, 1e-10);
    assert_near(stats_t_cdf(0, 7.5), 0.5, 1e-15);

    assert_near(stats_t_quantile(0.975, 10), 2.228138851986274, 1e-10);
    assert_near(stats_t_quantile(0.995, 1), tan(M_PI * 0.495), 1e-8);
    /* df 2: t = (2p - 1) / sqrt(2 p (1 - p)) */
    assert_near(stats_t_quantile(0.99, 2), 0.98 / sqrt(2 * 0.99 * 0.01), 1e-10);
    assert_near(stats_t_quantile(0.999, 30), 3.3851849, 1e-6); /* tables: 3.385 */
    assert_near(stats_t_quantile(0.025, 10), -2.228138851986274, 1e-10);
    assert_near(stats_t_quantile(0.5, 3), 0, 0);
    /* a fractional df round-trips */
    for (double p = 0.01; p < 1; p += 0.07)
        assert_near(stats_t_cdf(stats_t_quantile(p, 4.5), 4.5), p, 1e-12);
    /* large df tends to the normal */
    assert_near(stats_t_quantile(0.975, 1e6), 1.959963984540054, 1e-5);
    assert_true(isnan(stats_t_cdf(1, 0)));
    assert_true(isnan(stats_t_quantile(2, 5)));
}

static void test_cusum(void **state)
{
    struct stats_cusum c = {0};

    stats_cusum_add(&c, 0.2, 0.5); /* noise within the allowance: nothing */
    assert_near(c.up, 0, 0);
    assert_near(c.down, 0, 0);
    stats_cusum_add(&c, -1.5, 0.5);
    stats_cusum_add(&c, -1.5, 0.5);
    assert_near(c.down, 2, 1e-15);
    assert_int_equal(c.down_n, 2);
    assert_int_equal(c.up_n, 0);
    stats_cusum_add(&c, 3, 0.5); /* the other way: down resets, up starts */
    assert_near(c.down, 0, 0);
    assert_int_equal(c.down_n, 0);
    assert_near(c.up, 2.5, 1e-15);
    assert_int_equal(c.up_n, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median),    cmocka_unit_test(test_mad_scale),
        cmocka_unit_test(test_summarize), cmocka_unit_test(test_normal),
        cmocka_unit_test(test_t),         cmocka_unit_test(test_cusum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
