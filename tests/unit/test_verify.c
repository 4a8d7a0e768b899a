/* verify: drift verification of a winner, on hand-made references and on
 * the reference of a real (noiseless) search. How often it catches the
 * simulator's drift, and how rarely it alarms without one, is asserted by
 * the simulation suite (tests/unit/test_search.c, the drift objective). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "search.h"
#include "verify.h"

/* A winner at write 100, read 50, known from n samples per channel with
 * spread sigma (log rates), untied (two channels) or tied (one). */
static struct search_reference reference(int n, double sigma, bool tied)
{
    struct search_reference ref = {.nch = tied ? 1 : 2};
    for (int ch = 0; ch < ref.nch; ch++) {
        struct search_channel *c = &ref.ch[ch];
        c->rate = tied ? SEARCH_RATE_BOTH : ch == 0 ? SEARCH_RATE_WRITE : SEARCH_RATE_READ;
        c->mean = tied ? log(2 / (1.0 / 100 + 1.0 / 50)) : log(ch == 0 ? 100 : 50);
        c->n = n;
        c->df = 2 * n;
        c->ss = sigma * sigma * c->df;
        c->reject = 4 * fmax(sigma, 0.05);
    }
    return ref;
}

static struct verify *watch(const struct search_reference *ref)
{
    struct verify *v;
    assert_int_equal(verify_new(ref, 0.10, &v), 0);
    assert_non_null(v);
    return v;
}

/* Tell samples at factor f of the winner's rates until an alarm or n
 * samples; returns how many were told. */
static int tell_at(struct verify *v, double f, int n)
{
    struct search_sample x = {100 * f, 50 * f, false, false};
    for (int i = 1; i <= n; i++)
        if (verify_tell(v, &x) == VERIFY_RESEARCH)
            return i;
    return n + 1;
}

static void test_bad_input(void **state)
{
    struct search_reference ref = reference(30, 0.1, false), none = {0};
    struct verify *v = (struct verify *)1;

    assert_int_equal(verify_new(&none, 0.10, &v), -EINVAL);
    assert_null(v);
    assert_int_equal(verify_new(&ref, -0.01, &v), -EINVAL);
    assert_null(v);
    v = watch(&ref);
    struct search_sample inf = {INFINITY, 50, false, false};
    assert_int_equal(verify_tell(v, &inf), -EINVAL);
    verify_free(v);
    verify_free(NULL);
}

/* A steady winner raises no alarm; a drop by a third is caught at once,
 * its line says by how much each rate drifted, and the verdict stays. */
static void test_drop(void **state)
{
    struct search_reference ref = reference(30, 0.05, false);
    struct verify *v = watch(&ref);

    assert_int_equal(tell_at(v, 1, 40), 41);
    assert_string_equal(verify_why(v), "");
    assert_true(tell_at(v, 2.0 / 3, 10) <= 2);
    assert_non_null(strstr(verify_why(v), "drift write -33.3%, read -33.3%"));
    assert_non_null(strstr(verify_why(v), ": new search"));
    assert_int_equal(tell_at(v, 1, 1), 1); /* sticky */
    assert_string_equal(verify_why(v), "");
    verify_free(v);
}

/* Both tests are two-sided: a path that got faster is a drift too (a
 * larger size may now pay). Tied, the one channel is the harmonic mean. */
static void test_rise_tied(void **state)
{
    struct search_reference ref = reference(30, 0.05, true);
    struct verify *v = watch(&ref);

    assert_true(tell_at(v, 1.5, 10) <= 10);
    assert_non_null(strstr(verify_why(v), "drift write+read +50.0%"));
    verify_free(v);
}

/* Scores are clipped: one stalled sample, at a tenth of the rate, is no
 * drift, even against a reference of little spread. */
static void test_one_stall(void **state)
{
    struct search_reference ref = reference(30, 0.05, false);
    struct verify *v = watch(&ref);

    assert_int_equal(tell_at(v, 1, 5), 6);
    assert_int_equal(tell_at(v, 0.1, 1), 2);
    assert_int_equal(tell_at(v, 1, 40), 41);
    verify_free(v);
}

/* A drift below drift_min is not worth a new search, however sure it is
 * (a spread of 0.5%); one above it is. */
static void test_drift_min(void **state)
{
    struct search_reference ref = reference(30, 0.005, false);
    struct verify *v = watch(&ref);

    assert_int_equal(tell_at(v, 0.97, 40), 41);
    verify_free(v);
    v = watch(&ref);
    assert_true(tell_at(v, 0.88, 10) <= 10);
    verify_free(v);
}

/* Nothing is judged until the reference holds 20 samples: before, every
 * sample joins it, and a stall, which never does, cannot count; but three
 * in a row beyond the stall bound on one side are a drift, which the
 * reference would never take (a restart's reference rests on few samples:
 * a path that fell while the daemon was down went unseen for ever). */
static void test_warm_up(void **state)
{
    struct search_reference ref = reference(5, 0.05, false);
    struct verify *v = watch(&ref);

    for (int i = 0; i < 10; i++) {
        assert_int_equal(tell_at(v, 0.1, 3), 4); /* three stalls: no drift */
        assert_int_equal(tell_at(v, 1, 1), 2);   /* and a sample taken in */
    }
    assert_int_equal(tell_at(v, 1, 5), 6); /* now 20 */
    assert_true(tell_at(v, 2.0 / 3, 10) <= 2);
    verify_free(v);

    /* a fall, and a rise, beyond the stall bound: the fourth sample; the
     * samples before it say so */
    v = watch(&ref);
    assert_int_equal(tell_at(v, 0.1, 2), 3);
    assert_non_null(strstr(verify_why(v), "write -90.0%, read -90.0% beyond the stall bound, 2 "
                                          "samples in a row (a new search at 4)"));
    assert_int_equal(tell_at(v, 0.1, 30), 2);
    assert_non_null(strstr(verify_why(v), "write -90.0%, read -90.0%: 4 samples in a row"));
    verify_free(v);
    v = watch(&ref);
    assert_int_equal(tell_at(v, 3, 30), 4);
    verify_free(v);
    /* a run broken by a sample at the old rate, or on the other side,
     * starts again */
    v = watch(&ref);
    assert_int_equal(tell_at(v, 0.1, 3), 4);
    assert_int_equal(tell_at(v, 1, 1), 2);
    assert_int_equal(tell_at(v, 0.1, 3), 4);
    assert_int_equal(tell_at(v, 3, 3), 4);
    assert_int_equal(tell_at(v, 3, 1), 1);
    verify_free(v);
}

/* The reference goes on from where it stands (a restart reads it back
 * from the state file): the samples taken in count, and a count past
 * VERIFY_MAX_REF stops there; a forged one is refused. */
static void test_reference_carried(void **state)
{
    struct search_reference ref = reference(5, 0.05, false), now, bad;
    struct verify *v = watch(&ref), *w;

    assert_int_equal(tell_at(v, 1.01, 15), 16);
    assert_int_equal(verify_reference(v, &now), 0);
    assert_int_equal(now.nch, 2);
    assert_int_equal(now.ch[0].n, 20);
    assert_true(now.ch[0].mean > log(100) && now.ch[0].mean < log(101));
    /* warm already: a drift is judged at once */
    w = watch(&now);
    assert_true(tell_at(w, 2.0 / 3, 10) <= 2);
    verify_free(w);
    assert_int_equal(tell_at(v, 2.0 / 3, 10) <= 2, 1);
    assert_int_equal(verify_reference(v, &now), -EINVAL); /* after the alarm */
    verify_free(v);

    ref.ch[0].n = ref.ch[1].n = 2147483647;
    v = watch(&ref);
    assert_int_equal(verify_reference(v, &now), 0);
    assert_int_equal(now.ch[0].n, VERIFY_MAX_REF);
    assert_int_equal(tell_at(v, 1, 30), 31); /* no overflow (UBSan) */
    verify_free(v);
    for (int k = 0; k < 5; k++) {
        bad = reference(5, 0.05, false);
        if (k == 0)
            bad.ch[1].reject = 0;
        else if (k == 1)
            bad.ch[0].ss = -1;
        else if (k == 2)
            bad.ch[0].mean = NAN;
        else if (k == 3)
            bad.ch[1].rate = (enum search_rate)7;
        else
            bad.ch[0].n = -1;
        w = (struct verify *)1;
        assert_int_equal(verify_new(&bad, 0.10, &w), -EINVAL);
        assert_null(w);
    }
}

static void flat(struct search_config c, struct search_sample *x)
{
    x->write = 100;
    x->read = 50;
    x->write_timeout = x->read_timeout = false;
}

/* The reference of a real search: none before convergence, then the
 * winner's, with the search's drift_min. */
static void test_of_search(void **state)
{
    struct search_params p;
    struct search_config c;
    struct search *s;
    struct verify *v = (struct verify *)1;

    search_params_default(&p);
    p.max_total = 10;
    assert_int_equal(search_new(&p, (struct search_config){8192, 8192}, &s), 0);
    assert_int_equal(verify_of_search(s, &v), -EINVAL); /* not converged */
    assert_null(v);
    while (search_ask(s, &c) == SEARCH_MEASURE) {
        struct search_sample x;
        flat(c, &x);
        assert_true(search_tell(s, c, &x) >= 0);
    }
    assert_int_equal(verify_of_search(s, &v), 0);
    assert_int_equal(tell_at(v, 1, 40), 41);
    struct search_sample low = {67, 33, false, false};
    int i, r = VERIFY_OK;
    for (i = 0; i < 10 && r == VERIFY_OK; i++)
        r = verify_tell(v, &low);
    assert_int_equal(r, VERIFY_RESEARCH);
    assert_true(i <= 2);
    assert_non_null(strstr(verify_why(v), "drift write -33.0%, read -34.0%"));
    verify_free(v);
    search_free(s);
}

/* A watch rebuilt from its reference and its recent samples (a restart)
 * judges as the one it was made from: warm, with half a window, and
 * warming up, two samples into a run beyond the stall bound. */
static struct verify *rebuilt(const struct verify *v)
{
    struct search_reference ref;
    double y[VERIFY_WINDOW][2];
    struct verify *w;
    int n;

    assert_int_equal(verify_reference(v, &ref), 0);
    assert_int_equal(verify_recent(v, y, &n), 0);
    w = watch(&ref);
    for (int j = 0; j < n; j++)
        assert_int_equal(verify_replay(w, y[j]), VERIFY_OK);
    return w;
}

static void test_rebuilt_after_a_restart(void **state)
{
    struct search_reference ref = reference(30, 0.15, false);
    struct verify *v = watch(&ref), *w;
    double y[VERIFY_WINDOW][2];
    int n;

    /* warm: five samples 14% low, in the window (the window test, not the
     * CUSUM, sees so small a drift: at the tenth); five more alarm both */
    assert_int_equal(tell_at(v, 0.86, 5), 6);
    assert_int_equal(verify_recent(v, y, &n), 0);
    assert_int_equal(n, 5);
    w = rebuilt(v);
    assert_int_equal(tell_at(w, 0.86, 10), 5);
    assert_int_equal(tell_at(v, 0.86, 10), 5);
    verify_free(w);
    verify_free(v);
    /* without the replay, the rebuilt watch is later: the window restarts */
    v = watch(&ref);
    assert_int_equal(tell_at(v, 0.86, 5), 6);
    {
        struct search_reference r2;
        assert_int_equal(verify_reference(v, &r2), 0);
        w = watch(&r2);
    }
    assert_true(tell_at(w, 0.86, 10) > tell_at(v, 0.86, 10));
    verify_free(w);
    verify_free(v);

    /* warming up: three samples at a tenth, then a restart: the fourth
     * alarms */
    ref = reference(5, 0.05, false);
    v = watch(&ref);
    assert_int_equal(tell_at(v, 1, 4), 5);
    assert_int_equal(tell_at(v, 0.1, 3), 4);
    assert_int_equal(verify_recent(v, y, &n), 0);
    assert_int_equal(n, 3);
    w = rebuilt(v);
    assert_int_equal(tell_at(w, 0.1, 1), 1);
    verify_free(w);
    verify_free(v);

    /* a read not measured inside the read's run: the run is carried
     * whole (two at a tenth, one unmeasured, then a restart: two more) */
    v = watch(&ref);
    assert_int_equal(tell_at(v, 1, 4), 5);
    assert_int_equal(tell_at(v, 0.1, 2), 3);
    {
        struct search_sample x = {100, -1, false, false};
        assert_int_equal(verify_tell(v, &x), VERIFY_OK);
    }
    w = rebuilt(v);
    assert_int_equal(tell_at(w, 0.1, 5), 2);
    verify_free(w);
    verify_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_input),         cmocka_unit_test(test_drop),
        cmocka_unit_test(test_rise_tied),         cmocka_unit_test(test_one_stall),
        cmocka_unit_test(test_drift_min),         cmocka_unit_test(test_warm_up),
        cmocka_unit_test(test_reference_carried), cmocka_unit_test(test_rebuilt_after_a_restart),
        cmocka_unit_test(test_of_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
