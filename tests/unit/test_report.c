/* report: a cycle's tally, the rates of a configuration (the search's
 * estimate; AUTO outside the search from the auto checks), whether the
 * buffers matter at all, the notices, and the --once report as a table and
 * as JSON (parsed back with jansson, every field and its type). A real
 * search (lib/search.h) is told hand-made samples; nothing is measured. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "journal.h"
#include "logcap.h"
#include "report.h"
#include "state.h"

#define AUTO ((struct search_config){SEARCH_AUTO, SEARCH_AUTO})
#define C(r, s) ((struct search_config){(r), (s)})

/* Untied, server mapping (writes rank SO_RCVBUF), 8 KiB to 1 MiB. */
static struct search *new_search(bool auto_observable, struct search_config inc0)
{
    struct search_params p;
    struct search *s;

    search_params_default(&p);
    p.min_size = 8192;
    p.max_rcvbuf = p.max_sndbuf = 1048576;
    p.auto_observable = auto_observable;
    assert_int_equal(search_new(&p, inc0, &s), 0);
    return s;
}

/* n samples of c at w and r MB/s, told to the search and to the tally. */
static void tell(struct search *s, struct tally *t, struct search_config c, double w, double r,
                 int n)
{
    struct search_sample x = {w, r, false, false};

    for (int i = 0; i < n; i++) {
        assert_true(search_tell(s, c, &x) >= 0);
        tally_add(t, c, &x, 1000000, false);
    }
}

static void auto_check(struct tally *t, double w, double r)
{
    struct search_sample x = {w, r, false, false};

    tally_add(t, AUTO, &x, 1000000, true);
}

static void assert_near(double got, double want)
{
    if (!(fabs(got - want) <= 1e-9 * fabs(want)))
        fail_msg("%.12g, expected %.12g", got, want);
}

/* ---- tally_add ---- */

static void test_tally_counts(void **state)
{
    struct search_sample x = {10, 20, false, false};
    struct tally t;

    memset(&t, 0x5a, sizeof(t));
    tally_begin(&t, 42.5);
    assert_true(t.started == 42.5);
    assert_int_equal(t.samples, 0);
    assert_int_equal(t.bytes, 0);
    assert_int_equal(t.ntried, 0);
    assert_int_equal(t.nauto[0] + t.nauto[1], 0);

    tally_add(&t, C(8192, 8192), &x, 3000000000LL, false);
    tally_add(&t, C(8192, 8192), &x, 3000000000LL, false);
    tally_add(&t, C(16384, 8192), &x, 1, false);
    tally_add(&t, C(8192, 16384), &x, 1, false);
    assert_int_equal(t.samples, 4);
    assert_true(t.bytes == 6000000002LL);
    /* each configuration once, in the order tried */
    assert_int_equal(t.ntried, 3);
    assert_true(search_config_eq(t.tried[0], C(8192, 8192)));
    assert_true(search_config_eq(t.tried[1], C(16384, 8192)));
    assert_true(search_config_eq(t.tried[2], C(8192, 16384)));
    assert_int_equal(t.nauto[0] + t.nauto[1], 0);
}

/* An auto check counts as a sample, is no configuration tried, and keeps
 * the log of each measured rate (a rate of 0 as a tiny one). */
static void test_tally_auto_checks(void **state)
{
    struct search_sample x = {40, -1, false, false}, zero = {0, 5, false, false};
    struct tally t;

    tally_begin(&t, 0);
    tally_add(&t, AUTO, &x, 100, true);
    assert_int_equal(t.samples, 1);
    assert_int_equal(t.bytes, 100);
    assert_int_equal(t.ntried, 0);
    assert_int_equal(t.nauto[0], 1);
    assert_int_equal(t.nauto[1], 0); /* the read was not measured */
    assert_near(t.auto_log[0][0], log(40));
    tally_add(&t, AUTO, &zero, 100, true);
    assert_int_equal(t.nauto[0], 2);
    assert_int_equal(t.nauto[1], 1);
    assert_true(isfinite(t.auto_log[0][1]) && t.auto_log[0][1] < log(1e-6));
    assert_near(t.auto_log[1][0], log(5));
    /* as a search sample, AUTO is a configuration tried */
    tally_add(&t, AUTO, &x, 100, false);
    assert_int_equal(t.ntried, 1);
    assert_int_equal(t.nauto[0], 2);
}

/* Past their arrays' ends the samples still count, and nothing is written
 * past them (ASan watches). */
static void test_tally_bounds(void **state)
{
    struct search_sample x = {10, 20, false, false};
    struct tally *t = malloc(sizeof(*t));

    assert_non_null(t);
    tally_begin(t, 0);
    for (int i = 0; i < REPORT_MAX_TRIED + 10; i++)
        tally_add(t, C(8192 + i, 8192), &x, 1, false);
    assert_int_equal(t->ntried, REPORT_MAX_TRIED);
    assert_int_equal(t->tried[REPORT_MAX_TRIED - 1].rcvbuf, 8192 + REPORT_MAX_TRIED - 1);
    for (int i = 0; i < REPORT_MAX_AUTO + 5; i++)
        tally_add(t, AUTO, &x, 1, true);
    assert_int_equal(t->nauto[0], REPORT_MAX_AUTO);
    assert_int_equal(t->nauto[1], REPORT_MAX_AUTO);
    assert_int_equal(t->samples, REPORT_MAX_TRIED + 10 + REPORT_MAX_AUTO + 5);
    free(t);
}

/* ---- report_rates ---- */

/* The search's estimate: a geometric mean (99.499, not the arithmetic
 * 100), each rate from the level of the buffer it ranks. */
static void test_rates_from_search(void **state)
{
    struct search *s = new_search(true, C(65536, 65536));
    struct search_estimate est;
    struct tally t;
    double w, r;

    tally_begin(&t, 0);
    tell(s, &t, C(65536, 65536), 90, 20, 1);
    tell(s, &t, C(65536, 65536), 110, 20, 1);
    report_rates(s, &t, C(65536, 65536), &w, &r);
    assert_near(w, sqrt(90.0 * 110.0));
    assert_near(r, 20);
    assert_int_equal(search_estimate(s, C(65536, 65536), &est), 0);
    assert_true(w == est.write && r == est.read);
    /* no samples of that SO_SNDBUF yet: no read rate, so none at all */
    report_rates(s, &t, C(65536, 131072), &w, &r);
    assert_true(isnan(w) && isnan(r));
    tell(s, &t, C(131072, 131072), 30, 40, 2);
    /* writes rank SO_RCVBUF, reads SO_SNDBUF: a configuration never tried
     * is rated from its two levels */
    report_rates(s, &t, C(65536, 131072), &w, &r);
    assert_near(w, sqrt(90.0 * 110.0));
    assert_near(r, 40);
    /* off the lattice: not a configuration of this search */
    report_rates(s, &t, C(12345, 65536), &w, &r);
    assert_true(isnan(w) && isnan(r));
    /* no search at all */
    report_rates(NULL, &t, C(65536, 65536), &w, &r);
    assert_true(isnan(w) && isnan(r));
    search_free(s);
}

/* AUTO outside the search: the auto checks' geometric mean, per rate. */
static void test_rates_auto_outside_search(void **state)
{
    struct search *s = new_search(false, C(65536, 65536));
    struct tally t;
    double w, r;

    tally_begin(&t, 0);
    report_rates(s, &t, AUTO, &w, &r);
    assert_true(isnan(w) && isnan(r)); /* none taken */
    auto_check(&t, 10, 5);
    auto_check(&t, 40, 20);
    auto_check(&t, -1, 80); /* the write unmeasured */
    report_rates(s, &t, AUTO, &w, &r);
    assert_near(w, 20);
    assert_near(r, 20);
    report_rates(NULL, &t, AUTO, &w, &r);
    assert_near(w, 20);
    assert_near(r, 20);
    /* only both buffers AUTO is autotuning */
    report_rates(s, &t, C(SEARCH_AUTO, 65536), &w, &r);
    assert_true(isnan(w) && isnan(r));
    report_rates(s, &t, C(65536, SEARCH_AUTO), &w, &r);
    assert_true(isnan(w) && isnan(r));
    search_free(s);
}

/* AUTO in the search: its estimate once it has samples, the auto checks
 * before. */
static void test_rates_auto_in_search(void **state)
{
    struct search *s = new_search(true, AUTO);
    struct tally t;
    double w, r;

    tally_begin(&t, 0);
    auto_check(&t, 10, 10);
    report_rates(s, &t, AUTO, &w, &r);
    assert_near(w, 10);
    assert_near(r, 10);
    tell(s, &t, AUTO, 70, 30, 2);
    report_rates(s, &t, AUTO, &w, &r);
    assert_near(w, 70);
    assert_near(r, 30);
    search_free(s);
}

/* ---- report_buffers_do_not_matter ---- */

static bool flat_after(double w2, double r2, int n2)
{
    struct search *s = new_search(true, C(8192, 8192));
    struct tally t;
    bool flat;

    tally_begin(&t, 0);
    tell(s, &t, C(8192, 8192), 100, 50, 2);
    tell(s, &t, C(16384, 16384), 100, 50, 2);
    tell(s, &t, C(32768, 32768), w2, r2, n2);
    flat = report_buffers_do_not_matter(s, &t);
    search_free(s);
    return flat;
}

/* Three configurations or more, two samples each, all within the
 * search's smallest gain (3%) in both rates. */
static void test_buffers_do_not_matter(void **state)
{
    assert_true(flat_after(100, 50, 2));
    assert_true(flat_after(102, 49, 2));
    assert_false(flat_after(105, 50, 2)); /* the write differs */
    assert_false(flat_after(95, 50, 2));
    assert_false(flat_after(100, 52, 2)); /* the read differs */
    assert_false(flat_after(100, 48, 2));
    assert_false(flat_after(100, 50, 1)); /* one sample counts for nothing: two left */
}

static void test_buffers_matter_with_two(void **state)
{
    struct search *s = new_search(true, C(8192, 8192));
    struct tally t;

    tally_begin(&t, 0);
    assert_false(report_buffers_do_not_matter(s, &t));
    tell(s, &t, C(8192, 8192), 100, 50, 3);
    tell(s, &t, C(16384, 16384), 100, 50, 3);
    assert_false(report_buffers_do_not_matter(s, &t));
    tell(s, &t, C(65536, 65536), 100, 50, 2);
    assert_true(report_buffers_do_not_matter(s, &t));
    search_free(s);
}

/* ---- report_auto_after_restart ---- */

static char *auto_notice(double aw, double ar, int nauto)
{
    struct search *s = new_search(false, C(262144, 262144));
    struct tally t;

    tally_begin(&t, 0);
    tell(s, &t, C(262144, 262144), 100, 50, 3);
    for (int i = 0; i < nauto; i++)
        auto_check(&t, aw, ar);
    logcap_begin();
    report_auto_after_restart(s, &t, C(262144, 262144));
    search_free(s);
    return logcap_end();
}

static void test_auto_after_restart(void **state)
{
    char *log;

    /* within the smallest gain: the sizes serve as well */
    log = auto_notice(101, 50.5, 3);
    assert_non_null(strstr(log, "autotuning (no explicit size) measured write +1%, read +1% "
                                "against the sizes chosen: they serve as well"));
    /* a restart-advice event: the sizes chosen, what autotuning measured */
    assert_string_equal(logcap_events(), JOURNAL_ID_RESTART " 5 SMBTUNED_RCVBUF=262144 "
                                                            "SMBTUNED_SNDBUF=262144 "
                                                            "SMBTUNED_WRITE_MBPS=101.00 "
                                                            "SMBTUNED_READ_MBPS=50.50\n");
    free(log);
    log = auto_notice(150, 40, 3);
    assert_non_null(strstr(log, "measured write +50%, read -20% against the sizes chosen, but "
                                "smbd's listener keeps explicit sizes until smbd restarts"));
    free(log);
    log = auto_notice(100, 75, 3);
    assert_non_null(strstr(log, "read +50%"));
    assert_non_null(strstr(log, "remove the sizes and restart smbd"));
    free(log);
    /* worse in a direction, better in none: the sizes serve better, and
     * no restart is advised */
    log = auto_notice(35, 40, 3);
    assert_non_null(strstr(log, "measured write -65%, read -20% against the sizes chosen: the "
                                "sizes chosen serve better"));
    assert_null(strstr(log, "serve as well"));
    assert_null(strstr(log, "restart"));
    free(log);
    /* +28% on three samples that spread 25% (as loopback's did): within
     * their noise, so no advice to restart smbd either way */
    {
        struct search *s = new_search(false, C(262144, 262144));
        struct tally t;

        tally_begin(&t, 0);
        tell(s, &t, C(262144, 262144), 100, 50, 3);
        auto_check(&t, 100, 50);
        auto_check(&t, 164, 66);
        auto_check(&t, 119, 76);
        logcap_begin();
        report_auto_after_restart(s, &t, C(262144, 262144));
        search_free(s);
        log = logcap_end();
        assert_non_null(strstr(log, "against the sizes chosen, within the noise of its 3 samples: "
                                    "nothing to advise"));
        assert_null(strstr(log, "restart"));
        assert_string_equal(logcap_events(), "");
        free(log);
    }
    /* one sample: only a loss to half counts */
    log = auto_notice(40, 50, 1);
    assert_non_null(strstr(log, "the sizes chosen serve better"));
    free(log);
    log = auto_notice(130, 50, 1);
    assert_non_null(strstr(log, "within the noise of its 1 sample: nothing to advise"));
    free(log);
    /* not measured: nothing to say */
    log = auto_notice(150, 75, 0);
    assert_string_equal(log, "");
    free(log);
}

/* ---- report_fingerprint_change ---- */

static void test_fingerprint_change(void **state)
{
    struct state st = {.write_mbps = 100, .read_mbps = 50};
    char *log;

    logcap_begin();
    report_fingerprint_change("Samba 4.17 -> 4.18", &st, 110, 25, true);
    st.write_mbps = st.read_mbps = 0; /* no rates kept */
    report_fingerprint_change("kernel a -> b", &st, 110, 25, true);
    log = logcap_end();
    assert_non_null(strstr(log, "Samba 4.17 -> 4.18: write +10%, read -50% at the same settings"));
    /* upgrade events: the rates after, and before (0: none kept) */
    assert_string_equal(logcap_events(),
                        JOURNAL_ID_UPGRADE " 5 SMBTUNED_WRITE_MBPS=110.00 SMBTUNED_READ_MBPS=25.00 "
                                           "SMBTUNED_WRITE_MBPS_BEFORE=100.00 "
                                           "SMBTUNED_READ_MBPS_BEFORE=50.00\n" JOURNAL_ID_UPGRADE
                                           " 5 SMBTUNED_WRITE_MBPS=110.00 SMBTUNED_READ_MBPS=25.00 "
                                           "SMBTUNED_WRITE_MBPS_BEFORE=0.00 "
                                           "SMBTUNED_READ_MBPS_BEFORE=0.00\n");
    assert_non_null(strstr(log, "kernel a -> b: write +0%, read +0% at the same settings"));
    free(log);
}

/* Rates an older probe computed another way: not compared, no "before". */
static void test_fingerprint_change_of_other_rates(void **state)
{
    struct state st = {.write_mbps = 100, .read_mbps = 50};
    char *log;

    logcap_begin();
    report_fingerprint_change("Samba 4.17 -> 4.18", &st, 110, 25, false);
    log = logcap_end();
    assert_non_null(strstr(log, "Samba 4.17 -> 4.18: write 110.00 MB/s, read 25.00 MB/s at the "
                                "same settings; not compared with the rates before"));
    assert_null(strstr(log, "%"));
    assert_string_equal(logcap_events(), JOURNAL_ID_UPGRADE
                        " 5 SMBTUNED_WRITE_MBPS=110.00 SMBTUNED_READ_MBPS=25.00\n");
    free(log);
}

/* ---- report_event, report_error ---- */

/* Every field in its order; what is not there is left out, a rate only
 * with the other one; the message as given. */
static void test_event_fields(void **state)
{
    struct search_config c = {SEARCH_AUTO, 262144};
    const char *more[] = {"SMBTUNED_RESULT=done", NULL};
    char *log;

    logcap_begin();
    report_event(JOURNAL_ID_CYCLE, LOG_INFO,
                 &(struct event_fields){.smb_conf = "/etc/samba/smb.conf",
                                        .c = &c,
                                        .samples = 7,
                                        .write_mbps = 11.6,
                                        .read_mbps = 11.5,
                                        .more = more},
                 "cycle %s", "done");
    report_event(JOURNAL_ID_TRIAL, LOG_INFO,
                 &(struct event_fields){.smb_conf = "/s", .write_mbps = 3, .read_mbps = NAN},
                 "half a rate");
    report_event(JOURNAL_ID_MOVE, LOG_INFO, &(struct event_fields){0}, "nothing");
    /* a probe's 0 is a rate: a stalled trial */
    report_event(JOURNAL_ID_TRIAL, LOG_INFO,
                 &(struct event_fields){.write_mbps = 0, .read_mbps = 1.5, .measured = true},
                 "stalled");
    log = logcap_end();
    assert_string_equal(logcap_events(), JOURNAL_ID_CYCLE
                        " 6 SMBTUNED_SMB_CONF=/etc/samba/smb.conf "
                        "SMBTUNED_RCVBUF=auto "
                        "SMBTUNED_SNDBUF=262144 "
                        "SMBTUNED_SAMPLES=7 "
                        "SMBTUNED_WRITE_MBPS=11.60 "
                        "SMBTUNED_READ_MBPS=11.50 "
                        "SMBTUNED_RESULT=done\n" JOURNAL_ID_TRIAL
                        " 6 SMBTUNED_SMB_CONF=/s\n" JOURNAL_ID_MOVE " 6\n" JOURNAL_ID_TRIAL
                        " 6 SMBTUNED_WRITE_MBPS=0.00 SMBTUNED_READ_MBPS=1.50\n");
    assert_non_null(strstr(log, "cycle done\n"));
    assert_non_null(strstr(log, "half a rate\n"));
    free(log);
}

/* A failure is an error entry that names what failed. */
static void test_error_event(void **state)
{
    char *log;

    logcap_begin();
    report_error("probe", "/etc/samba/smb.conf", "probe of %s failed: %s", "smb://h/s", "EIO");
    log = logcap_end();
    assert_string_equal(logcap_events(),
                        JOURNAL_ID_ERROR " 3 SMBTUNED_SMB_CONF=/etc/samba/smb.conf "
                                         "SMBTUNED_ERROR=probe\n");
    assert_non_null(strstr(log, "probe of smb://h/s failed: EIO"));
    free(log);
}

/* ---- report_progress ---- */

static char *printed(void (*print)(FILE *, const void *), const void *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    print(f, arg);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void progress_lines(FILE *f, const void *arg)
{
    report_progress(f, 3, "SO_RCVBUF 8192 SO_SNDBUF 8192", 12.3456, 1, false);
    report_progress(f, 104, "SO_RCVBUF auto SO_SNDBUF auto", 0.5, 1234.5678, true);
}

static void test_progress(void **state)
{
    char *out = printed(progress_lines, NULL);

    assert_string_equal(out, "sample   3  SO_RCVBUF 8192 SO_SNDBUF 8192            write    12.35 "
                             "MB/s  read     1.00 MB/s\n"
                             "sample 104  SO_RCVBUF auto SO_SNDBUF auto            write     0.50 "
                             "MB/s  read  1234.57 MB/s  (deadline: lower bound)\n");
    free(out);
}

/* ---- report_print ---- */

struct printing {
    bool json;
    const struct search *s;
    struct tally *t;
    const struct report_in *in;
};

static void print_report(FILE *f, const void *arg)
{
    const struct printing *p = arg;

    report_print(f, p->json, p->s, p->t, p->in);
}

/* A cycle from 8 KiB to 256 KiB / auto: rates with more digits than the
 * report keeps. */
struct cycle {
    struct search *s;
    struct tally t;
    struct report_in in;
};

static void cycle_init(struct cycle *c)
{
    c->s = new_search(true, C(8192, 8192));
    tally_begin(&c->t, 1000.0);
    tell(c->s, &c->t, C(8192, 8192), 10.00049, 2.5, 3);
    tell(c->s, &c->t, C(262144, SEARCH_AUTO), 123.4567891, 45.6786, 3);
    c->t.bytes = 5000000000LL; /* past 32 bits */
    c->in = (struct report_in){.before = "TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=8192",
                               .after = "TCP_NODELAY SO_RCVBUF=262144",
                               .inc0 = C(8192, 8192),
                               .rated = C(262144, SEARCH_AUTO),
                               .committed = true,
                               .advise = false,
                               .what = "committed socket options = TCP_NODELAY SO_RCVBUF=262144",
                               .now = 1012.34};
}

/* out as one JSON object on one line (freed). */
static json_t *one_object(char *out)
{
    json_error_t err;
    json_t *o;

    /* one object on one line */
    assert_non_null(strchr(out, '\n'));
    assert_string_equal(strchr(out, '\n'), "\n");
    o = json_loads(out, 0, &err); /* jansson refuses text that is not UTF-8 */
    if (o == NULL)
        fail_msg("not JSON (%s): %s", err.text, out);
    assert_true(json_is_object(o));
    free(out);
    return o;
}

static json_t *print_json(const struct search *s, struct tally *t, const struct report_in *in)
{
    struct printing p = {true, s, t, in};

    return one_object(printed(print_report, &p));
}

static json_t *member(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    if (v == NULL)
        fail_msg("no \"%s\"", key);
    return v;
}

static void assert_rate(const json_t *o, const char *key, double want)
{
    json_t *v = member(o, key);

    if (isnan(want)) {
        assert_true(json_is_null(v));
        return;
    }
    assert_true(json_is_real(v));
    assert_near(json_real_value(v), want);
}

static void assert_size(const json_t *o, const char *key, long long want, bool present)
{
    json_t *v = member(o, key);

    if (!present) {
        assert_true(json_is_null(v));
        return;
    }
    assert_true(json_is_integer(v));
    assert_true(json_integer_value(v) == want);
}

static void assert_side(const json_t *side, const char *value, long long rcv, bool has_rcv,
                        long long snd, bool has_snd, double w, double r)
{
    assert_true(json_is_object(side));
    assert_int_equal(json_object_size(side), 5);
    assert_true(json_is_string(member(side, "value")));
    assert_string_equal(json_string_value(member(side, "value")), value);
    assert_size(side, "rcvbuf", rcv, has_rcv);
    assert_size(side, "sndbuf", snd, has_snd);
    assert_rate(side, "write_mbps", w);
    assert_rate(side, "read_mbps", r);
}

static void test_print_json(void **state)
{
    struct cycle c;
    json_t *o;

    cycle_init(&c);
    o = print_json(c.s, &c.t, &c.in);
    assert_int_equal(json_object_size(o), 8);
    /* rates to the 1 kB/s: 10.00049 -> 10.0, 45.6786 -> 45.679 */
    assert_side(member(o, "before"), c.in.before, 8192, true, 8192, true, 10.0, 2.5);
    assert_side(member(o, "after"), c.in.after, 262144, true, 0, false, 123.457, 45.679);
    assert_true(json_is_true(member(o, "committed")));
    assert_string_equal(json_string_value(member(o, "mode")), "tune");
    assert_true(json_is_integer(member(o, "samples")));
    assert_int_equal(json_integer_value(member(o, "samples")), 6);
    assert_true(json_is_integer(member(o, "bytes")));
    assert_true(json_integer_value(member(o, "bytes")) == 5000000000LL);
    assert_true(json_is_real(member(o, "seconds")));
    assert_near(json_real_value(member(o, "seconds")), 12.3); /* to the tenth */
    assert_true(json_is_string(member(o, "result")));
    assert_string_equal(json_string_value(member(o, "result")), c.in.what);
    assert_true(c.t.reported);
    json_decref(o);
    search_free(c.s);
}

/* Advise mode, nothing measured (no search): every rate null, the sizes
 * as smbd passes them (a negative one too). */
static void test_print_json_unmeasured(void **state)
{
    struct report_in in = {.before = "SO_SNDBUF=-1",
                           .after = "SO_SNDBUF=-1 SO_RCVBUF=0",
                           .inc0 = C(SEARCH_AUTO, 4194304),
                           .rated = C(1, 4194304),
                           .advise = true,
                           .what = "budget spent: nothing changed",
                           .now = 5};
    struct tally t;
    json_t *o;

    tally_begin(&t, 5);
    o = print_json(NULL, &t, &in);
    assert_side(member(o, "before"), in.before, 0, false, -1, true, NAN, NAN);
    assert_side(member(o, "after"), in.after, 0, true, -1, true, NAN, NAN);
    assert_true(json_is_false(member(o, "committed")));
    assert_string_equal(json_string_value(member(o, "mode")), "advise");
    assert_int_equal(json_integer_value(member(o, "samples")), 0);
    assert_int_equal(json_integer_value(member(o, "bytes")), 0);
    assert_near(json_real_value(member(o, "seconds")) + 1, 1);
    json_decref(o);
}

/* Bytes that are not UTF-8 (from smb.conf, in the value and so in the
 * result) come out as U+FFFD: the line stays valid JSON. */
static void test_print_json_invalid_utf8(void **state)
{
    struct report_in in = {.before = "TCP_NODELAY \xff SO_RCVBUF=8192",
                           .after = "TCP_NODELAY \xc3( SO_RCVBUF=65536",
                           .inc0 = C(8192, SEARCH_AUTO),
                           .rated = C(65536, SEARCH_AUTO),
                           .what = "advice: socket options = TCP_NODELAY \xc3( SO_RCVBUF=65536 "
                                   "\xe2\x82",
                           .now = 1};
    struct tally t;
    json_t *o;

    tally_begin(&t, 0);
    o = print_json(NULL, &t, &in);
    assert_side(member(o, "before"), "TCP_NODELAY \xef\xbf\xbd SO_RCVBUF=8192", 8192, true, 0,
                false, NAN, NAN);
    assert_side(member(o, "after"), "TCP_NODELAY \xef\xbf\xbd( SO_RCVBUF=65536", 65536, true, 0,
                false, NAN, NAN);
    assert_string_equal(json_string_value(member(o, "result")),
                        "advice: socket options = TCP_NODELAY \xef\xbf\xbd( SO_RCVBUF=65536 "
                        "\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(o);
}

/* The table: before and after (or best, when nothing was written), sizes
 * as smbd passes them, rates to the 10 kB/s, the outcome and the totals. */
static void test_print_table(void **state)
{
    struct printing p = {false};
    struct cycle c;
    char *out;

    cycle_init(&c);
    p.s = c.s;
    p.t = &c.t;
    p.in = &c.in;
    out = printed(print_report, &p);
    assert_string_equal(out, "\n"
                             "socket options\n"
                             "  before  TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=8192\n"
                             "  after   TCP_NODELAY SO_RCVBUF=262144\n"
                             "\n"
                             "                   before        after\n"
                             "SO_RCVBUF            8192       262144\n"
                             "SO_SNDBUF            8192         auto\n"
                             "write MB/s          10.00       123.46\n"
                             "read MB/s            2.50        45.68\n"
                             "\n"
                             "committed socket options = TCP_NODELAY SO_RCVBUF=262144\n"
                             "6 samples, 5000.0 MB moved, 12 s\n");
    free(out);
    c.in.committed = false;
    out = printed(print_report, &p);
    assert_non_null(strstr(out, "\n  best    TCP_NODELAY SO_RCVBUF=262144\n"));
    assert_non_null(strstr(out, "\n                   before         best\n"));
    assert_null(strstr(out, "after"));
    free(out);
    search_free(c.s);
}

/* ---- report_print_failure ---- */

struct failing {
    struct tally *t;
    const char *result, *error, *mode;
    double now;
};

static void print_failure(FILE *f, const void *arg)
{
    const struct failing *p = arg;

    report_print_failure(f, p->t, p->result, p->error, p->mode, p->now);
}

/* A cycle that failed after some samples: one object, its keys in order,
 * what the probes did as the report gives it; the tally is reported, and
 * a second call prints nothing. */
static void test_print_failure(void **state)
{
    static const char *const keys[] = {"result", "error", "mode", "samples", "bytes", "seconds"};
    struct tally t;
    struct failing p = {&t, "failed", "probe of smb://h/s failed: connect_refused", "tune",
                        1012.34};
    struct search_sample x = {10, 20, false, false};
    const char *key;
    json_t *o, *v;
    size_t i = 0;
    char *out;

    tally_begin(&t, 1000.0);
    tally_add(&t, C(8192, 8192), &x, 3000000000LL, false);
    tally_add(&t, C(8192, 8192), &x, 3000000000LL, false);
    o = one_object(printed(print_failure, &p));
    assert_int_equal(json_object_size(o), 6);
    json_object_foreach(o, key, v)
    {
        assert_true(i < 6);
        assert_string_equal(key, keys[i++]);
    }
    assert_string_equal(json_string_value(member(o, "result")), "failed");
    assert_string_equal(json_string_value(member(o, "error")),
                        "probe of smb://h/s failed: connect_refused");
    assert_string_equal(json_string_value(member(o, "mode")), "tune");
    assert_true(json_is_integer(member(o, "samples")));
    assert_int_equal(json_integer_value(member(o, "samples")), 2);
    assert_true(json_integer_value(member(o, "bytes")) == 6000000000LL); /* past 32 bits */
    assert_true(json_is_real(member(o, "seconds")));
    assert_near(json_real_value(member(o, "seconds")), 12.3); /* to the tenth */
    json_decref(o);
    assert_true(t.reported);
    out = printed(print_failure, &p);
    assert_string_equal(out, "");
    free(out);
}

/* After the report, nothing more: one object per run. */
static void test_print_failure_after_report(void **state)
{
    struct cycle c;
    struct failing p = {&c.t, "failed", "commit: the lock is held", "tune", 1012.34};
    json_t *o;
    char *out;

    cycle_init(&c);
    assert_false(c.t.reported);
    o = print_json(c.s, &c.t, &c.in);
    json_decref(o);
    out = printed(print_failure, &p);
    assert_string_equal(out, "");
    free(out);
    search_free(c.s);
}

/* A run refused before its cycle (no tally): nothing was done, the mode
 * may not be known; an error with bytes that are not UTF-8 (a path) comes
 * out as U+FFFD. */
static void test_print_failure_before_the_cycle(void **state)
{
    struct failing p = {NULL, "error", "/etc/smbtuned/\xff.conf:3: unknown option", NULL, 99};
    json_t *o;

    o = one_object(printed(print_failure, &p));
    assert_string_equal(json_string_value(member(o, "result")), "error");
    assert_string_equal(json_string_value(member(o, "error")),
                        "/etc/smbtuned/\xef\xbf\xbd.conf:3: unknown option");
    assert_true(json_is_null(member(o, "mode")));
    assert_int_equal(json_integer_value(member(o, "samples")), 0);
    assert_int_equal(json_integer_value(member(o, "bytes")), 0);
    assert_near(json_real_value(member(o, "seconds")) + 1, 1);
    json_decref(o);
}

/* The first failure of a cycle is kept, not what follows from it; a new
 * cycle forgets it. */
static void test_first_error(void **state)
{
    struct tally t;
    char *log;

    tally_begin(&t, 0);
    assert_string_equal(report_first_error(), "");
    logcap_begin();
    report_error("shadow", NULL, "shadow smbd: %s", "no port");
    report_error("probe", NULL, "probe of %s failed: %s", "smb://h/s", "EIO");
    log = logcap_end();
    free(log);
    assert_string_equal(report_first_error(), "shadow smbd: no port");
    tally_begin(&t, 0);
    assert_string_equal(report_first_error(), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tally_counts),
        cmocka_unit_test(test_tally_auto_checks),
        cmocka_unit_test(test_tally_bounds),
        cmocka_unit_test(test_rates_from_search),
        cmocka_unit_test(test_rates_auto_outside_search),
        cmocka_unit_test(test_rates_auto_in_search),
        cmocka_unit_test(test_buffers_do_not_matter),
        cmocka_unit_test(test_buffers_matter_with_two),
        cmocka_unit_test(test_auto_after_restart),
        cmocka_unit_test(test_fingerprint_change),
        cmocka_unit_test(test_fingerprint_change_of_other_rates),
        cmocka_unit_test(test_event_fields),
        cmocka_unit_test(test_error_event),
        cmocka_unit_test(test_progress),
        cmocka_unit_test(test_print_json),
        cmocka_unit_test(test_print_json_unmeasured),
        cmocka_unit_test(test_print_json_invalid_utf8),
        cmocka_unit_test(test_print_table),
        cmocka_unit_test(test_print_failure),
        cmocka_unit_test(test_print_failure_after_report),
        cmocka_unit_test(test_print_failure_before_the_cycle),
        cmocka_unit_test(test_first_error),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
