/* facts: the pure half (daemon/facts.c): the search's start from a socket
 * options value as the kernel takes it, the search's bounds from the
 * kernel's caps, the trials and smbd's listener, the tuning window, the
 * fingerprint of what the measurements were made on. facts_gather, which
 * asks the machine, is left to the integration tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "facts.h"
#include "journal.h"
#include "logcap.h"
#include "state.h"

#define CAP 4194304L /* net.core.rmem_max = wmem_max on this kind of machine */

/* This kind of machine (shared/FACTS.md): caps 4194304, minimum buffers
 * 2304 (receive) and 4608 (send); no smbd running. */
static struct facts machine(void)
{
    return (struct facts){.caps_known = true,
                          .kcap = {CAP, CAP},
                          .mins_known = true,
                          .kmin = {2304, 4608},
                          .kernel = "6.18.0",
                          .samba = "4.17.12-Debian"};
}

static struct search_params dflt(void)
{
    struct search_params p;

    search_params_default(&p);
    p.max_rcvbuf = 1048576;
    p.max_sndbuf = 2097152;
    return p;
}

static struct search_config start(const struct facts *f, const char *value)
{
    struct search_params p = dflt();

    return facts_config_of_value(f, &p, value);
}

static void assert_start(const struct facts *f, const char *value, long rcv, long snd)
{
    struct search_config c = start(f, value);

    if (c.rcvbuf != rcv || c.sndbuf != snd)
        fail_msg("'%s': start %ld/%ld, expected %ld/%ld", value, c.rcvbuf, c.sndbuf, rcv, snd);
}

/* ---- facts_config_of_value ---- */

/* No token: autotuning, for each buffer on its own. */
static void test_absent_is_auto(void **state)
{
    struct facts f = machine();

    assert_start(&f, "", SEARCH_AUTO, SEARCH_AUTO);
    assert_start(&f, "TCP_NODELAY", SEARCH_AUTO, SEARCH_AUTO);
    assert_start(&f, "TCP_NODELAY SO_RCVBUF=65536", 65536, SEARCH_AUTO);
    assert_start(&f, "SO_SNDBUF=131072 TCP_NODELAY", SEARCH_AUTO, 131072);
}

/* A size the kernel takes as asked starts from itself, off the lattice
 * too. */
static void test_plain_size(void **state)
{
    struct facts f = machine();

    assert_start(&f, "TCP_NODELAY SO_RCVBUF=65536 SO_SNDBUF=8192", 65536, 8192);
    assert_start(&f, "SO_RCVBUF=100000 SO_SNDBUF=212992", 100000, 212992);
    /* just above the minimum: 1153 gives 2306, 2305 gives 4610 */
    assert_start(&f, "SO_RCVBUF=1153 SO_SNDBUF=2305", 1153, 2305);
}

/* At or below the minimum (half of 2304 receive, 4608 send): the kernel
 * gives its minimum, and so does the smallest request, 1. */
static void test_at_minimum_starts_from_1(void **state)
{
    struct facts f = machine();

    assert_start(&f, "SO_RCVBUF=1152 SO_SNDBUF=2304", 1, 1);
    assert_start(&f, "SO_RCVBUF=2 SO_SNDBUF=1000", 1, 1);
    assert_start(&f, "SO_RCVBUF=1 SO_SNDBUF=1", 1, 1);
    /* the send minimum is larger: 2000 is a minimum there, not here */
    assert_start(&f, "SO_RCVBUF=2000 SO_SNDBUF=2000", 2000, 1);
}

/* 0 is an explicit size (autotuning off, the minimum), not AUTO; so are
 * the texts atoi reads as 0 or 1. */
static void test_zero_is_explicit(void **state)
{
    struct facts f = machine();

    assert_start(&f, "SO_RCVBUF=0", 1, SEARCH_AUTO);
    assert_start(&f, "SO_SNDBUF=0", SEARCH_AUTO, 1);
    assert_start(&f, "SO_RCVBUF=abc SO_SNDBUF=4294967296", 1, 1);
    /* `SO_RCVBUF = 65536`: Samba passes 1 */
    assert_start(&f, "SO_RCVBUF = 65536", 1, SEARCH_AUTO);
}

/* A negative size is a huge unsigned one; at or over the cap the kernel
 * gives the cap. */
static void test_cap_starts_from_cap(void **state)
{
    struct facts f = machine();

    assert_start(&f, "SO_RCVBUF=-1 SO_SNDBUF=-65536", CAP, CAP);
    assert_start(&f, "SO_RCVBUF=4194304 SO_SNDBUF=4194305", CAP, CAP);
    assert_start(&f, "SO_RCVBUF=2147483647 SO_SNDBUF=-2147483648", CAP, CAP);
    assert_start(&f, "SO_RCVBUF=4194303", 4194303, SEARCH_AUTO);
}

/* Each buffer against its own cap and minimum; unreadable caps: the
 * configured maxima stand in, each its own; an unknown minimum: only 0
 * counts as at the minimum. What is not to be read is set to nonsense. */
static void test_caps_and_minimum_per_buffer(void **state)
{
    struct facts f = machine();

    f.kcap[SOCKOPTS_RCVBUF] = 212992;
    f.kcap[SOCKOPTS_SNDBUF] = 425984;
    f.kmin[SOCKOPTS_RCVBUF] = 8192;
    assert_start(&f, "SO_RCVBUF=-1 SO_SNDBUF=-1", 212992, 425984);
    assert_start(&f, "SO_RCVBUF=300000 SO_SNDBUF=300000", 212992, 300000);
    assert_start(&f, "SO_RCVBUF=4096 SO_SNDBUF=4096", 1, 4096);

    f = machine();
    f.caps_known = false;
    f.kcap[SOCKOPTS_RCVBUF] = f.kcap[SOCKOPTS_SNDBUF] = 77;
    assert_start(&f, "SO_RCVBUF=-1 SO_SNDBUF=-1", 1048576, 2097152);
    assert_start(&f, "SO_RCVBUF=5000000 SO_SNDBUF=5000000", 1048576, 2097152);
    assert_start(&f, "SO_RCVBUF=65536 SO_SNDBUF=65536", 65536, 65536);

    f = machine();
    f.mins_known = false;
    f.kmin[SOCKOPTS_RCVBUF] = f.kmin[SOCKOPTS_SNDBUF] = 1 << 20;
    assert_start(&f, "SO_RCVBUF=1000 SO_SNDBUF=2", 1000, 2);
    assert_start(&f, "SO_RCVBUF=0 SO_SNDBUF=1", 1, 1);
}

/* ---- facts_listener_explicit ---- */

static void test_listener_explicit(void **state)
{
    struct facts f = machine();
    struct search_config autos = {SEARCH_AUTO, SEARCH_AUTO}, rcv = {65536, SEARCH_AUTO};

    /* no smbd: whatever it starts with next is what smb.conf says */
    f.listener_rcv = f.listener_snd = true;
    assert_false(facts_listener_explicit(&f, rcv, SOCKOPTS_RCVBUF));
    assert_false(facts_listener_explicit(&f, rcv, SOCKOPTS_SNDBUF));
    f.smbd_running = true;
    f.listener_rcv = f.listener_snd = false;
    assert_false(facts_listener_explicit(&f, autos, SOCKOPTS_RCVBUF));
    assert_false(facts_listener_explicit(&f, autos, SOCKOPTS_SNDBUF));
    /* sock_diag says so, for its buffer only */
    f.listener_rcv = true;
    assert_true(facts_listener_explicit(&f, autos, SOCKOPTS_RCVBUF));
    assert_false(facts_listener_explicit(&f, autos, SOCKOPTS_SNDBUF));
    f.listener_rcv = false;
    f.listener_snd = true;
    assert_false(facts_listener_explicit(&f, autos, SOCKOPTS_RCVBUF));
    assert_true(facts_listener_explicit(&f, autos, SOCKOPTS_SNDBUF));
    /* or smb.conf's size does, for its buffer only */
    f.listener_snd = false;
    assert_true(facts_listener_explicit(&f, rcv, SOCKOPTS_RCVBUF));
    assert_false(facts_listener_explicit(&f, rcv, SOCKOPTS_SNDBUF));
    rcv = (struct search_config){SEARCH_AUTO, 1};
    assert_false(facts_listener_explicit(&f, rcv, SOCKOPTS_RCVBUF));
    assert_true(facts_listener_explicit(&f, rcv, SOCKOPTS_SNDBUF));
}

/* smb.conf leaves a buffer to autotuning while the listener holds a size:
 * said for that buffer, with the kernel's size; nothing otherwise. */
static void test_listener_notice(void **state)
{
    struct facts f = machine();
    struct search_config autos = {SEARCH_AUTO, SEARCH_AUTO}, snd = {SEARCH_AUTO, 8192};
    char *log;

    f.smbd_running = true;
    f.listener_snd = true;
    f.listener_size[SOCKOPTS_SNDBUF] = 16384;
    logcap_begin();
    facts_listener_notice(&f, autos);
    log = logcap_end();
    assert_non_null(strstr(log, "smb.conf names no SO_SNDBUF, but smbd's listener holds an "
                                "explicit one (16384 bytes"));
    assert_null(strstr(log, "SO_RCVBUF"));
    free(log);
    logcap_begin();
    facts_listener_notice(&f, snd); /* the file names it: nothing to say */
    f.smbd_running = false;
    facts_listener_notice(&f, autos); /* no smbd */
    log = logcap_end();
    assert_string_equal(log, "");
    free(log);
}

/* ---- facts_search_bounds ---- */

static struct tuner_opts opts(enum tuner_trials trials, bool restart)
{
    struct tuner_opts o = {.trials = trials, .restart_smbd = restart};

    search_params_default(&o.search);
    o.search.max_rcvbuf = o.search.max_sndbuf = 16777216;
    return o;
}

static struct search_params bounds(const struct facts *f, const struct tuner_opts *o,
                                   struct search_config inc0, bool *blocked)
{
    struct search_params p;

    memset(&p, 0x5a, sizeof(p)); /* every field is set */
    *blocked = true;             /* and so is this */
    facts_search_bounds(f, o, inc0, &p, blocked);
    return p;
}

/* The kernel's caps lower the configured maxima, each its own, and say so
 * in the journal; everything else is the configured parameters. */
static void test_caps_lower_maxima(void **state)
{
    struct facts f = machine();
    struct tuner_opts o = opts(TUNER_SHADOW, false);
    struct search_config inc0 = {8192, 8192};
    struct search_params p, want = o.search;
    bool blocked;
    char *log;

    f.kcap[SOCKOPTS_SNDBUF] = 212992;
    logcap_begin();
    p = bounds(&f, &o, inc0, &blocked);
    log = logcap_end();
    assert_int_equal(p.max_rcvbuf, CAP);
    assert_int_equal(p.max_sndbuf, 212992);
    assert_non_null(strstr(log, "SO_RCVBUF sizes capped at 4194304 by net.core.rmem_max"));
    assert_non_null(strstr(log, "SO_SNDBUF sizes capped at 212992 by net.core.wmem_max"));
    /* as kernel-cap events: each names its buffer's cap and the sysctl */
    assert_string_equal(logcap_events(), JOURNAL_ID_KERNEL_CAP
                        " 6 SMBTUNED_RCVBUF=4194304 "
                        "SMBTUNED_SYSCTL=net.core.rmem_max\n" JOURNAL_ID_KERNEL_CAP
                        " 6 SMBTUNED_SNDBUF=212992 "
                        "SMBTUNED_SYSCTL=net.core.wmem_max\n");
    free(log);
    want.max_rcvbuf = CAP;
    want.max_sndbuf = 212992;
    want.mapping = SEARCH_RANK_SERVER;
    assert_int_equal(p.min_size, want.min_size);
    assert_true(p.auto_observable);
    assert_false(blocked);
    assert_int_equal(p.mapping, want.mapping);
    assert_int_equal(p.tied, want.tied);
    assert_true(p.min_gain == want.min_gain);
    assert_true(p.abort_ratio == want.abort_ratio);
    assert_int_equal(p.min_samples, want.min_samples);
    assert_int_equal(p.max_samples, want.max_samples);
    assert_int_equal(p.max_total, want.max_total);
    assert_true(p.alpha == want.alpha);
    assert_true(p.drift_min == want.drift_min);
}

/* A cap above the configured maximum leaves it; unknown caps leave both,
 * with the reason in the journal. */
static void test_caps_never_raise(void **state)
{
    struct facts f = machine();
    struct tuner_opts o = opts(TUNER_SHADOW, false);
    struct search_config inc0 = {8192, 8192};
    struct search_params p;
    bool blocked;
    char *log;

    o.search.max_rcvbuf = 1048576;
    o.search.max_sndbuf = CAP; /* equal: stays, nothing said */
    logcap_begin();
    p = bounds(&f, &o, inc0, &blocked);
    log = logcap_end();
    assert_int_equal(p.max_rcvbuf, 1048576);
    assert_int_equal(p.max_sndbuf, CAP);
    assert_null(strstr(log, "capped"));
    free(log);

    f.caps_known = false;
    f.kcap[SOCKOPTS_RCVBUF] = f.kcap[SOCKOPTS_SNDBUF] = 65536; /* not to be read */
    snprintf(f.why, sizeof(f.why), "net.core.rmem_max: no such file");
    logcap_begin();
    p = bounds(&f, &o, inc0, &blocked);
    log = logcap_end();
    assert_int_equal(p.max_rcvbuf, 1048576);
    assert_int_equal(p.max_sndbuf, CAP);
    assert_non_null(strstr(log, "net.core.rmem_max: no such file: keeping the configured maximum"));
    free(log);
}

/* The probe's own socket is the one tuned in client trials: its rates
 * rank the buffers swapped. */
static void test_mapping_per_trials(void **state)
{
    struct facts f = machine();
    struct search_config inc0 = {8192, 8192};
    struct tuner_opts o;
    bool blocked;

    o = opts(TUNER_CLIENT, false);
    o.search.mapping = SEARCH_RANK_SERVER;
    assert_int_equal(bounds(&f, &o, inc0, &blocked).mapping, SEARCH_RANK_CLIENT);
    o = opts(TUNER_SHADOW, false);
    o.search.mapping = SEARCH_RANK_CLIENT;
    assert_int_equal(bounds(&f, &o, inc0, &blocked).mapping, SEARCH_RANK_SERVER);
    o = opts(TUNER_LIVE, false);
    o.search.mapping = SEARCH_RANK_CLIENT;
    assert_int_equal(bounds(&f, &o, inc0, &blocked).mapping, SEARCH_RANK_SERVER);
}

struct auto_case {
    enum tuner_trials trials;
    bool restart;
    bool observable, blocked; /* expected */
};

/* While smbd's listener has explicit sizes AUTO is no candidate, unless
 * smbd may be restarted for it (shadow and client trials); live it could
 * not even be measured, so it is never an auto check there. */
static void check_auto_cases(struct facts *f, struct search_config inc0)
{
    static const struct auto_case cases[] = {
        {TUNER_SHADOW, false, false, true}, {TUNER_SHADOW, true, true, false},
        {TUNER_CLIENT, false, false, true}, {TUNER_CLIENT, true, true, false},
        {TUNER_LIVE, false, false, false},  {TUNER_LIVE, true, false, false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tuner_opts o = opts(cases[i].trials, cases[i].restart);
        struct search_params p;
        bool blocked;

        p = bounds(f, &o, inc0, &blocked);
        if (p.auto_observable != cases[i].observable || blocked != cases[i].blocked)
            fail_msg("case %zu: auto_observable %d auto_blocked %d", i, p.auto_observable, blocked);
    }
}

static void test_auto_blocked_by_listener(void **state)
{
    struct facts f = machine();
    struct search_config autos = {SEARCH_AUTO, SEARCH_AUTO};

    f.smbd_running = true;
    f.listener_rcv = true;
    check_auto_cases(&f, autos);
    f.listener_rcv = false;
    f.listener_snd = true;
    check_auto_cases(&f, autos);
    /* smb.conf's explicit size counts as the listener's */
    f.listener_snd = false;
    check_auto_cases(&f, (struct search_config){SEARCH_AUTO, 65536});
}

/* Nothing explicit, or no smbd running: AUTO stays a candidate in every
 * kind of trial, as configured. */
static void test_auto_free(void **state)
{
    static const enum tuner_trials all[] = {TUNER_SHADOW, TUNER_CLIENT, TUNER_LIVE};
    struct facts f = machine();
    struct search_config autos = {SEARCH_AUTO, SEARCH_AUTO}, sized = {8192, 8192};
    bool blocked;

    for (size_t i = 0; i < 3; i++) {
        struct tuner_opts o = opts(all[i], false);

        f.smbd_running = true;
        assert_true(bounds(&f, &o, autos, &blocked).auto_observable);
        assert_false(blocked);
        f.smbd_running = false;
        f.listener_rcv = f.listener_snd = true;
        assert_true(bounds(&f, &o, sized, &blocked).auto_observable);
        assert_false(blocked);
        /* configured off stays off */
        o.search.auto_observable = false;
        assert_false(bounds(&f, &o, sized, &blocked).auto_observable);
        f.listener_rcv = f.listener_snd = false;
    }
}

/* ---- facts_fingerprint ---- */

static void fingerprint(const struct facts *f, struct state *st, const char *conf, char *msg,
                        size_t len)
{
    memset(msg, 'x', len); /* set whatever was there */
    facts_fingerprint(f, st, conf, msg, len);
}

static void assert_fingerprint(const struct state *st, const struct facts *f, const char *conf)
{
    assert_string_equal(st->samba, f->samba);
    assert_string_equal(st->kernel, f->kernel);
    assert_string_equal(st->smb_conf, conf);
}

/* A first cycle has nothing to compare with: no message, and st takes
 * the fingerprint; the same again is no change. */
static void test_fingerprint_first_and_same(void **state)
{
    struct facts f = machine();
    struct state st = {0};
    char msg[512];

    fingerprint(&f, &st, "/etc/samba/smb.conf", msg, sizeof(msg));
    assert_string_equal(msg, "");
    assert_fingerprint(&st, &f, "/etc/samba/smb.conf");
    fingerprint(&f, &st, "/etc/samba/smb.conf", msg, sizeof(msg));
    assert_string_equal(msg, "");
    assert_fingerprint(&st, &f, "/etc/samba/smb.conf");
    state_free(&st);
}

/* Each of the three on its own, then all three, in that order. */
static void test_fingerprint_changes(void **state)
{
    struct facts f = machine();
    struct state st = {0};
    char msg[512];

    fingerprint(&f, &st, "/a/smb.conf", msg, sizeof(msg));
    snprintf(f.samba, sizeof(f.samba), "4.18.0");
    fingerprint(&f, &st, "/a/smb.conf", msg, sizeof(msg));
    assert_string_equal(msg, "Samba 4.17.12-Debian -> 4.18.0");
    assert_fingerprint(&st, &f, "/a/smb.conf");

    snprintf(f.kernel, sizeof(f.kernel), "6.19.1");
    fingerprint(&f, &st, "/a/smb.conf", msg, sizeof(msg));
    assert_string_equal(msg, "kernel 6.18.0 -> 6.19.1");
    assert_fingerprint(&st, &f, "/a/smb.conf");

    fingerprint(&f, &st, "/b/smb.conf", msg, sizeof(msg));
    assert_string_equal(msg, "smb.conf /a/smb.conf -> /b/smb.conf");
    assert_fingerprint(&st, &f, "/b/smb.conf");

    snprintf(f.samba, sizeof(f.samba), "4.19.0");
    snprintf(f.kernel, sizeof(f.kernel), "6.20.0");
    fingerprint(&f, &st, "/a/smb.conf", msg, sizeof(msg));
    assert_string_equal(msg, "Samba 4.18.0 -> 4.19.0, kernel 6.19.1 -> 6.20.0, "
                             "smb.conf /b/smb.conf -> /a/smb.conf");
    assert_fingerprint(&st, &f, "/a/smb.conf");

    /* kernel and smb.conf, without Samba: the separator follows them */
    snprintf(f.kernel, sizeof(f.kernel), "6.21.0");
    fingerprint(&f, &st, "/c/smb.conf", msg, sizeof(msg));
    assert_string_equal(msg, "kernel 6.20.0 -> 6.21.0, smb.conf /a/smb.conf -> /c/smb.conf");
    state_free(&st);
}

/* A short buffer cuts the message, never past its end (ASan watches);
 * st still takes the whole fingerprint. */
static void test_fingerprint_short_buffer(void **state)
{
    struct facts f = machine();
    static const char whole[] = "Samba 4.17.12-Debian -> 4.18.0, kernel 6.18.0 -> 6.19.1, "
                                "smb.conf /a/smb.conf -> /b/smb.conf";
    struct state st = {0};
    char buf[40];

    fingerprint(&f, &st, "/a/smb.conf", buf, sizeof(buf));
    snprintf(f.samba, sizeof(f.samba), "4.18.0");
    snprintf(f.kernel, sizeof(f.kernel), "6.19.1");
    for (size_t len = 1; len <= sizeof(buf); len++) {
        char *msg = malloc(len); /* exactly len: ASan sees one byte past it */

        assert_non_null(msg);
        state_set_str(&st.samba, "4.17.12-Debian");
        state_set_str(&st.kernel, "6.18.0");
        fingerprint(&f, &st, "/b/smb.conf", msg, len);
        assert_true(strlen(msg) < len);
        assert_memory_equal(msg, whole, strlen(msg));
        free(msg);
    }
    assert_fingerprint(&st, &f, "/b/smb.conf");
    state_free(&st);
}

/* Loopback trials: every shadow trial, whatever the url's host (the probe
 * connects to the shadow on 127.0.0.1); never client or live trials, not
 * even with a url on 127.0.0.1. */
static void test_trials_on_loopback(void **state)
{
    static const char *const urls[] = {NULL,
                                       "",
                                       "smb://127.0.0.1/s",
                                       "smb://127.1.2.3/s",
                                       "smb://[::1]/s",
                                       "smb://localhost:4450/s",
                                       "smb://128.0.0.1/s",
                                       "smb://fileserver/s",
                                       "smb://[::2]/s",
                                       "smb://10.127.0.1/s"};
    struct tuner_opts o = {.trials = TUNER_SHADOW};

    /* The url's host as written decides nothing: shadow trials are
     * loopback's whatever it is; client trials are when their probe found
     * its connection on this machine (probe_loopback), and only then, a
     * loopback url included (the probe's word is the connection's). */
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        o.probe.url = urls[i];
        o.trials = TUNER_SHADOW;
        assert_true(facts_trials_on_loopback(&o, false));
        assert_true(facts_trials_on_loopback(&o, true));
        o.trials = TUNER_CLIENT;
        assert_false(facts_trials_on_loopback(&o, false));
        assert_true(facts_trials_on_loopback(&o, true));
        o.trials = TUNER_LIVE;
        assert_false(facts_trials_on_loopback(&o, false));
        assert_false(facts_trials_on_loopback(&o, true));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_is_auto),
        cmocka_unit_test(test_trials_on_loopback),
        cmocka_unit_test(test_plain_size),
        cmocka_unit_test(test_at_minimum_starts_from_1),
        cmocka_unit_test(test_zero_is_explicit),
        cmocka_unit_test(test_cap_starts_from_cap),
        cmocka_unit_test(test_caps_and_minimum_per_buffer),
        cmocka_unit_test(test_listener_explicit),
        cmocka_unit_test(test_listener_notice),
        cmocka_unit_test(test_caps_lower_maxima),
        cmocka_unit_test(test_caps_never_raise),
        cmocka_unit_test(test_mapping_per_trials),
        cmocka_unit_test(test_auto_blocked_by_listener),
        cmocka_unit_test(test_auto_free),
        cmocka_unit_test(test_fingerprint_first_and_same),
        cmocka_unit_test(test_fingerprint_changes),
        cmocka_unit_test(test_fingerprint_short_buffer),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
