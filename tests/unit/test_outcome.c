/* outcome: what a finished search comes to (keep, advise, commit, with a
 * restart of smbd when autotuning won over a listener with explicit
 * sizes), the budget's end, a commit written or failed, and what the
 * state file keeps. A real search (lib/search.h) converges on a simple
 * model of throughput against buffer size; no smbd, no network. */
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
#include "outcome.h"
#include "sockopts.h"

#define LEGACY "TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=8192"
#define AUTO ((struct search_config){SEARCH_AUTO, SEARCH_AUTO})
#define C(r, s) ((struct search_config){(r), (s)})

/* The rate each buffer ranks grows with its size up to the knee and stays
 * there (on the server's side SO_RCVBUF ranks the write rate and SO_SNDBUF
 * the read rate; for client trials the other way round); AUTO gets a share
 * of the top rate, for each buffer its own (auto_rcv, auto_snd). noise:
 * the spread of a sample (uniform, deterministic). */
struct model {
    double top, auto_rcv, auto_snd, noise;
    long knee;
    unsigned long long prng;
};

static struct model knee_model(void)
{
    return (struct model){
        .top = 100, .auto_rcv = 0.8, .auto_snd = 0.8, .noise = 0.01, .knee = 262144};
}

static double rate(struct model *m, long size, double auto_share)
{
    double r = size == SEARCH_AUTO ? m->top * auto_share
                                   : m->top * fmin(1.0, (double)size / (double)m->knee);

    m->prng = m->prng * 6364136223846793005ULL + 1442695040888963407ULL;
    return r * (1 + m->noise * ((double)(m->prng >> 11) / (double)(1ULL << 53) - 0.5));
}

struct run {
    struct facts f;
    struct tuner_opts o;
    struct search_config inc0;
    struct search *s;
    struct tally t;
    bool auto_blocked;
    struct clients_watch_summary real; /* smbd's real connections: none read */
    struct outcome out;
    bool probe_loopback; /* a probe found its connection on this machine */
};

/* This kind of machine, no smbd running, trials on a real path (client
 * trials against another host: they rank sizes; shadow trials are on
 * loopback whatever the url), tune mode. */
static void run_init(struct run *r, struct search_config inc0)
{
    memset(r, 0, sizeof(*r));
    r->f = (struct facts){.caps_known = true,
                          .kcap = {4194304, 4194304},
                          .mins_known = true,
                          .kmin = {2304, 4608},
                          .kernel = "6.18.0",
                          .samba = "4.17.12"};
    r->o.trials = TUNER_CLIENT;
    r->o.probe.url = "smb://fileserver.example/share";
    r->o.mode = TUNER_TUNE;
    search_params_default(&r->o.search);
    r->o.search.min_size = 8192;
    r->o.search.max_rcvbuf = r->o.search.max_sndbuf = 1048576;
    r->inc0 = inc0;
    tally_begin(&r->t, 0);
}

/* The search with the bounds the facts give, asked and told until it
 * converges. */
static void converge(struct run *r, struct model *m)
{
    struct search_params p;
    struct search_config c;
    int n = 0;

    facts_search_bounds(&r->f, &r->o, r->inc0, &p, &r->auto_blocked);
    assert_int_equal(search_new(&p, r->inc0, &r->s), 0);
    while (search_ask(r->s, &c) == SEARCH_MEASURE) {
        double rcv = rate(m, c.rcvbuf, m->auto_rcv), snd = rate(m, c.sndbuf, m->auto_snd);
        bool server = p.mapping == SEARCH_RANK_SERVER;
        /* write rate, read rate */
        struct search_sample x = {server ? rcv : snd, server ? snd : rcv, false, false};

        assert_true(search_tell(r->s, c, &x) >= 0);
        tally_add(&r->t, c, &x, 1000000, false);
        assert_true(++n < 5000);
    }
    assert_true(search_converged(r->s));
}

static int decide(struct run *r, const char *value0)
{
    return outcome_decide(&r->out, r->s, &r->t, &r->f, &r->o, value0, r->inc0, r->auto_blocked,
                          &r->real, r->probe_loopback);
}

static void run_free(struct run *r)
{
    outcome_free(&r->out);
    search_free(r->s);
}

static struct search_config config_of(const char *value)
{
    struct sockopts so;
    struct sockopts_size z[2];

    assert_int_equal(sockopts_parse(value, &so), 0);
    z[0] = sockopts_get(&so, SOCKOPTS_RCVBUF);
    z[1] = sockopts_get(&so, SOCKOPTS_SNDBUF);
    sockopts_free(&so);
    return C(z[0].present ? z[0].value : SEARCH_AUTO, z[1].present ? z[1].value : SEARCH_AUTO);
}

/* ---- outcome_decide ---- */

/* From the legacy line the knee wins: a commit of the winner, every other
 * token kept; no restart for explicit sizes, even over a listener that
 * has them. */
static void test_commit(void **state)
{
    struct model m = knee_model();
    struct run r;

    run_init(&r, C(8192, 8192));
    r.f.smbd_running = r.f.listener_rcv = r.f.listener_snd = true;
    converge(&r, &m);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, search_incumbent(r.s)));
    assert_true(r.out.w.rcvbuf >= m.knee && r.out.w.sndbuf >= m.knee);
    assert_true(search_config_eq(config_of(r.out.after), r.out.w));
    assert_non_null(strstr(r.out.after, "TCP_NODELAY"));
    assert_false(r.out.restart);
    assert_string_equal(r.out.what, ""); /* said once it is written */
    run_free(&r);
}

/* Advise mode: the same winner, told, not written. */
static void test_advise(void **state)
{
    struct model m = knee_model();
    char want[1280], *log;
    struct run r;

    run_init(&r, C(8192, 8192));
    r.o.mode = TUNER_ADVISE;
    converge(&r, &m);
    logcap_begin();
    assert_int_equal(decide(&r, LEGACY), 0);
    log = logcap_end();
    assert_int_equal(r.out.kind, OUTCOME_ADVISE);
    assert_true(r.out.w.rcvbuf >= m.knee && r.out.w.sndbuf >= m.knee);
    assert_true(search_config_eq(config_of(r.out.after), r.out.w));
    assert_false(r.out.restart);
    snprintf(want, sizeof(want), "advice: socket options = %s (advise mode: smb.conf not changed)",
             r.out.after);
    assert_string_equal(r.out.what, want);
    assert_non_null(strstr(log, want));
    free(log);
    run_free(&r);
}

/* At the knee already: no neighbour does better, the value stays as it
 * is written (spelled with its other tokens, in their order). */
static void test_keep(void **state)
{
    static const char value0[] = "SO_SNDBUF=262144 TCP_NODELAY SO_RCVBUF=262144";
    struct model m = knee_model();
    char *log;
    struct run r;

    run_init(&r, C(262144, 262144));
    converge(&r, &m);
    assert_false(report_buffers_do_not_matter(r.s, &r.t));
    logcap_begin();
    assert_int_equal(decide(&r, value0), 0);
    log = logcap_end();
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_true(search_config_eq(r.out.w, r.inc0));
    assert_string_equal(r.out.after, value0);
    assert_string_equal(r.out.what, "kept socket options = SO_SNDBUF=262144 TCP_NODELAY "
                                    "SO_RCVBUF=262144: no neighbour did better");
    assert_non_null(strstr(log, r.out.what));
    free(log);
    run_free(&r);
}

/* Every size the same: the buffers do not limit this share (the search
 * ends at autotuning, where it started), with the search's rates in the
 * words. The value is kept as written: a commas-separated one too, which
 * the editor would write with spaces. */
static void test_keep_flat(void **state)
{
    static const char value0[] = "TCP_NODELAY,SO_KEEPALIVE";
    struct model m = knee_model();
    struct run r;

    m.knee = 1;
    m.auto_rcv = m.auto_snd = 1;
    m.noise = 0;
    run_init(&r, AUTO);
    assert_true(search_config_eq(facts_config_of_value(&r.f, &r.o.search, value0), r.inc0));
    converge(&r, &m);
    assert_true(report_buffers_do_not_matter(r.s, &r.t));
    assert_int_equal(decide(&r, value0), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_string_equal(r.out.after, value0);
    assert_string_equal(r.out.what, "buffers do not limit this share: every size tried gave the "
                                    "same rates (write 100.0, read 100.0 MB/s); kept socket "
                                    "options = TCP_NODELAY,SO_KEEPALIVE");
    run_free(&r);
}

/* Autotuning wins over a listener with explicit sizes, restart_smbd =
 * yes: a commit that restarts smbd, without a size in the value. */
static void test_commit_auto_restarts(void **state)
{
    struct model m = knee_model();
    struct run r;

    m.auto_rcv = m.auto_snd = 1.3;
    run_init(&r, C(8192, 8192));
    r.o.restart_smbd = true;
    r.f.smbd_running = r.f.listener_rcv = r.f.listener_snd = true;
    converge(&r, &m);
    assert_false(r.auto_blocked);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, AUTO));
    assert_string_equal(r.out.after, "TCP_NODELAY");
    assert_true(r.out.restart);
    outcome_free(&r.out);
    /* no smbd running: it starts with autotuning by itself */
    r.f.smbd_running = false;
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_false(r.out.restart);
    run_free(&r);
}

/* Autotuning wins for one buffer only: a restart only when that buffer of
 * the listener is explicit (sock_diag says so, or smb.conf had a size). */
static void check_restart_for(enum sockopts_buf which)
{
    static const char *const value0[] = {"TCP_NODELAY SO_SNDBUF=8192",
                                         "TCP_NODELAY SO_RCVBUF=8192"};
    static const char *const sized[] = {"TCP_NODELAY SO_RCVBUF=65536 SO_SNDBUF=8192",
                                        "TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=65536"};
    bool rcv = which == SOCKOPTS_RCVBUF;
    struct model m = knee_model();
    struct search_config w;
    struct run r;

    *(rcv ? &m.auto_rcv : &m.auto_snd) = 1.3;
    run_init(&r, rcv ? C(SEARCH_AUTO, 8192) : C(8192, SEARCH_AUTO));
    r.o.restart_smbd = true;
    r.f.smbd_running = true;
    *(rcv ? &r.f.listener_snd : &r.f.listener_rcv) = true; /* the other one */
    converge(&r, &m);
    w = search_incumbent(r.s);
    assert_int_equal(rcv ? w.rcvbuf : w.sndbuf, SEARCH_AUTO);
    assert_true((rcv ? w.sndbuf : w.rcvbuf) >= m.knee);
    assert_int_equal(decide(&r, value0[which]), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(config_of(r.out.after), w));
    assert_false(r.out.restart); /* that buffer was autotuned all along */
    outcome_free(&r.out);
    *(rcv ? &r.f.listener_rcv : &r.f.listener_snd) = true;
    assert_int_equal(decide(&r, value0[which]), 0);
    assert_true(r.out.restart);
    outcome_free(&r.out);
    /* smb.conf's size counts as the listener's */
    *(rcv ? &r.f.listener_rcv : &r.f.listener_snd) = false;
    *(rcv ? &r.inc0.rcvbuf : &r.inc0.sndbuf) = 65536;
    assert_int_equal(decide(&r, sized[which]), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(r.out.restart);
    run_free(&r);
}

static void test_commit_auto_restart_per_buffer(void **state)
{
    check_restart_for(SOCKOPTS_RCVBUF);
    check_restart_for(SOCKOPTS_SNDBUF);
}

/* AUTO could not be offered (the listener, no restart): what the auto
 * checks measured is told against the winner; only then. */
static void test_auto_checks_told(void **state)
{
    struct search_sample x = {150, 150, false, false};
    struct model m = knee_model();
    char *log;
    struct run r;

    m.auto_rcv = m.auto_snd = 1.5;
    run_init(&r, C(8192, 8192));
    r.f.smbd_running = r.f.listener_rcv = true;
    converge(&r, &m);
    assert_true(r.auto_blocked);
    assert_true(search_incumbent(r.s).rcvbuf != SEARCH_AUTO);
    for (int i = 0; i < 3; i++)
        tally_add(&r.t, AUTO, &x, 1000000, true);
    logcap_begin();
    assert_int_equal(decide(&r, LEGACY), 0);
    outcome_free(&r.out);
    r.auto_blocked = false;
    assert_int_equal(decide(&r, LEGACY), 0);
    log = logcap_end();
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_false(r.out.restart);
    /* once, for the first decision */
    assert_non_null(strstr(log, "autotuning (no explicit size) measured write +50%"));
    assert_null(strstr(strstr(log, "autotuning (no explicit size)") + 1, "autotuning (no"));
    free(log);
    run_free(&r);
}

/* The kernel's cap won: only the admin can allow more, and is told. */
static void test_cap_notices(void **state)
{
    struct model m = knee_model();
    char *log;
    struct run r;

    m.auto_rcv = m.auto_snd = 0.2; /* below the caps' rates */
    run_init(&r, C(8192, 8192));
    r.f.kcap[SOCKOPTS_RCVBUF] = 131072;
    r.f.kcap[SOCKOPTS_SNDBUF] = 65536;
    converge(&r, &m);
    logcap_begin();
    assert_int_equal(decide(&r, LEGACY), 0);
    log = logcap_end();
    assert_true(search_config_eq(r.out.w, C(131072, 65536)));
    assert_non_null(strstr(log, "SO_RCVBUF=131072 is the kernel's cap: raising net.core.rmem_max "
                                "may allow a faster setting"));
    assert_non_null(strstr(log, "SO_SNDBUF=65536 is the kernel's cap: raising net.core.wmem_max "
                                "may allow a faster setting"));
    /* kernel-cap events, each naming its buffer and sysctl */
    assert_non_null(strstr(logcap_events(),
                           JOURNAL_ID_KERNEL_CAP " 5 SMBTUNED_RCVBUF=131072 "
                                                 "SMBTUNED_SYSCTL=net.core.rmem_max\n"));
    assert_non_null(strstr(logcap_events(),
                           JOURNAL_ID_KERNEL_CAP " 5 SMBTUNED_SNDBUF=65536 "
                                                 "SMBTUNED_SYSCTL=net.core.wmem_max\n"));
    free(log);
    run_free(&r);

    /* the configured maximum won: nothing to tell */
    run_init(&r, C(8192, 8192));
    r.o.search.max_rcvbuf = r.o.search.max_sndbuf = 131072;
    converge(&r, &m);
    logcap_begin();
    assert_int_equal(decide(&r, LEGACY), 0);
    log = logcap_end();
    assert_true(search_config_eq(r.out.w, C(131072, 131072)));
    assert_null(strstr(log, "cap"));
    free(log);
    run_free(&r);
}

/* ---- loopback trials and real connections (issue 13) ---- */

/* Loopback trials: the own share, no url. */
static void loopback(struct run *r)
{
    r->o.trials = TUNER_SHADOW;
    r->o.probe.url = NULL;
    r->o.own_share = true;
}

/* A summary of real connections: n held back by the receive buffer with
 * the largest bandwidth-delay product bdp, sk_rcvbuf at most buf. */
static void held_by_rcvbuf(struct run *r, int n, double bdp, long buf)
{
    memset(&r->real, 0, sizeof(r->real));
    r->real.valid = true;
    r->real.s.connections = n + 1;
    r->real.s.by[CLIENTS_RCVBUF] = n;
    r->real.s.by[CLIENTS_NETWORK] = 1;
    r->real.s.limited_by_buffers = n;
    r->real.bdp[SOCKOPTS_RCVBUF] = r->real.bdp_max = bdp;
    r->real.buf_max[SOCKOPTS_RCVBUF] = buf;
}

/* From TCP_NODELAY the trials prefer explicit sizes (as loopback's noise
 * once made 4 MiB do); with no real connection held back by a buffer
 * autotuning stays, and the words say which figure decided it. The same
 * search on a real path commits the winner. */
static void test_loopback_keeps_auto(void **state)
{
    struct model m = knee_model();
    char *log;
    struct run r;

    run_init(&r, AUTO);
    loopback(&r);
    converge(&r, &m);
    assert_true(search_incumbent(r.s).rcvbuf != SEARCH_AUTO);
    assert_true(search_incumbent(r.s).sndbuf != SEARCH_AUTO);
    logcap_begin();
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    log = logcap_end();
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_true(search_config_eq(r.out.w, AUTO));
    assert_string_equal(r.out.after, "TCP_NODELAY");
    assert_non_null(strstr(r.out.why, "SO_RCVBUF autotuning: loopback trials cannot rank sizes "
                                      "above the small-buffer cliff"));
    assert_non_null(strstr(r.out.why, "SO_SNDBUF autotuning"));
    assert_non_null(strstr(r.out.why, "could not be read"));
    assert_non_null(strstr(r.out.what, "kept socket options = TCP_NODELAY: SO_RCVBUF autotuning"));
    assert_non_null(strstr(log, r.out.what));
    free(log);
    outcome_free(&r.out);
    /* connections read, none held back: said so */
    held_by_rcvbuf(&r, 0, 0, 0);
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_non_null(strstr(r.out.why, "no real connection is held back"));
    outcome_free(&r.out);
    /* shadow trials with a url are loopback too, whatever its host: the
     * shadow serves it on 127.0.0.1; client trials on another host's
     * path are not */
    r.o.own_share = false;
    r.o.probe.url = "smb://127.0.0.9/share";
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    outcome_free(&r.out);
    r.o.probe.url = "smb://fileserver.example/share";
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    outcome_free(&r.out);
    r.o.trials = TUNER_CLIENT;
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, search_incumbent(r.s)));
    assert_string_equal(r.out.why, "");
    outcome_free(&r.out);
    /* client trials whose probe found the url's host to be this machine
     * (fileserver.example is this machine's own name): loopback trials */
    r.probe_loopback = true;
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_true(search_config_eq(r.out.w, AUTO));
    assert_non_null(strstr(r.out.why, "SO_RCVBUF autotuning: loopback trials cannot rank sizes "
                                      "above the small-buffer cliff"));
    outcome_free(&r.out);
    /* live trials are weighed as they were */
    r.o.trials = TUNER_LIVE;
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_string_equal(r.out.why, "");
    run_free(&r);
}

/* From the legacy line, no smbd running (AUTO takes effect): autotuning
 * is committed, and the words written say why. */
static void test_loopback_legacy_commits_auto(void **state)
{
    struct model m = knee_model();
    struct run r;

    run_init(&r, C(8192, 8192));
    loopback(&r);
    converge(&r, &m);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, AUTO));
    assert_string_equal(r.out.after, "TCP_NODELAY");
    assert_false(r.out.restart);
    outcome_written(&r.out, r.out.after);
    assert_non_null(strstr(r.out.what, "committed socket options = TCP_NODELAY: SO_RCVBUF "
                                       "autotuning: loopback trials"));
    run_free(&r);
}

/* Real connections held back by the receive buffer: an explicit
 * SO_RCVBUF that covers twice their largest bandwidth-delay product,
 * rounded up to the lattice (300000 -> 600000 -> 1048576, the cap of
 * this search); the send buffer, which holds none back, autotunes. */
static void test_loopback_covers_real_bdp(void **state)
{
    struct model m = knee_model();
    struct run r;

    run_init(&r, C(8192, 8192));
    loopback(&r);
    converge(&r, &m);
    assert_true(search_incumbent(r.s).rcvbuf < 1048576);
    held_by_rcvbuf(&r, 2, 300000, 16384);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, C(1048576, SEARCH_AUTO)));
    assert_string_equal(r.out.after, "TCP_NODELAY SO_RCVBUF=1048576");
    assert_non_null(strstr(r.out.why, "SO_RCVBUF=1048576: real connections held back by the "
                                      "server's receive buffer (2 of 3) had a bandwidth-delay "
                                      "product of up to 300000 bytes"));
    assert_null(strstr(r.out.why, "tcp_rmem")); /* it was no autotuning that held them */
    outcome_free(&r.out);
    /* a small product: the trials' winner covers it and stays */
    held_by_rcvbuf(&r, 1, 1000, 16384);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.w.rcvbuf, search_incumbent(r.s).rcvbuf);
    run_free(&r);
}

/* The loopback search keeps the size in force (at the knee), but real
 * connections are held back by the receive buffer: SO_RCVBUF rises to
 * cover them, SO_SNDBUF stays as written. Without them it is kept, as on
 * a real path. */
static void test_loopback_kept_raised_for_real_clients(void **state)
{
    static const char value0[] = "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144";
    struct model m = knee_model();
    struct run r;

    run_init(&r, C(262144, 262144));
    loopback(&r);
    converge(&r, &m);
    assert_true(search_config_eq(search_incumbent(r.s), r.inc0));
    assert_int_equal(decide(&r, value0), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_string_equal(r.out.why, "");
    assert_string_equal(r.out.after, value0);
    outcome_free(&r.out);
    held_by_rcvbuf(&r, 1, 300000, 524288);
    assert_int_equal(decide(&r, value0), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, C(1048576, 262144)));
    assert_non_null(strstr(r.out.why, "SO_RCVBUF=1048576: real connections held back"));
    assert_null(strstr(r.out.why, "SO_SNDBUF"));
    run_free(&r);
}

/* From AUTO, an explicit size only on evidence from a real path: real
 * connections held back under autotuning, capped by tcp_rmem's maximum,
 * which the words name. */
static void test_loopback_from_auto_on_real_evidence(void **state)
{
    struct model m = knee_model();
    struct run r;

    run_init(&r, AUTO);
    loopback(&r);
    r.f.tcp_max_known = true;
    r.f.tcp_max[SOCKOPTS_RCVBUF] = 131072;
    r.f.tcp_max[SOCKOPTS_SNDBUF] = 4194304;
    converge(&r, &m);
    held_by_rcvbuf(&r, 1, 100000, 131072);
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(r.out.w.rcvbuf >= 262144); /* twice 100000, up the lattice */
    assert_int_equal(r.out.w.sndbuf, SEARCH_AUTO);
    assert_non_null(strstr(r.out.why, "under autotuning they were capped by net.ipv4.tcp_rmem's "
                                      "maximum (131072)"));
    outcome_free(&r.out);
    /* held back at a ceiling of 6 MiB: no explicit size up to this
     * search's cap (1 MiB, 2 MiB as the kernel keeps it) gives more */
    r.f.tcp_max[SOCKOPTS_RCVBUF] = 6291456;
    held_by_rcvbuf(&r, 1, 100000, 6291456);
    assert_int_equal(decide(&r, "TCP_NODELAY"), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_true(search_config_eq(r.out.w, AUTO));
    assert_non_null(strstr(r.out.why, "have 6291456 bytes under autotuning, more than "
                                      "SO_RCVBUF=1048576 (the largest allowed) would give them"));
    run_free(&r);
}

/* AUTO cannot take effect (the listener holds explicit sizes, no
 * restart): the trials' explicit winner stays, as before, said so. */
static void test_loopback_auto_blocked_says_so(void **state)
{
    struct model m = knee_model();
    struct run r;

    run_init(&r, C(8192, 8192));
    loopback(&r);
    r.f.smbd_running = r.f.listener_rcv = r.f.listener_snd = true;
    converge(&r, &m);
    assert_true(r.auto_blocked);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, search_incumbent(r.s)));
    assert_non_null(strstr(r.out.why, "on loopback trials alone"));
    assert_non_null(strstr(r.out.why, "autotuning cannot take effect before smbd restarts"));
    assert_non_null(strstr(r.out.why, "restart_smbd = no)"));
    outcome_free(&r.out);
    /* restart_smbd = yes whose restart failed (the fallback): the same
     * explicit winner, and the words do not ask for the setting in force */
    r.o.restart_off = true;
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_true(search_config_eq(r.out.w, search_incumbent(r.s)));
    assert_null(strstr(r.out.why, "restart_smbd = no"));
    assert_non_null(strstr(r.out.why, "restart_smbd = yes, but smbd's restart failed: restarts "
                                      "are off until `systemctl reload smbtuned`)"));
    outcome_free(&r.out);
    r.o.restart_off = false;
    /* restart_smbd = yes: autotuning, with a restart */
    r.o.restart_smbd = true;
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_true(search_config_eq(r.out.w, AUTO));
    assert_true(r.out.restart);
    run_free(&r);
}

/* ---- outcome_stopped, outcome_written, outcome_failed ---- */

static void test_budget(void **state)
{
    struct outcome out;

    memset(&out, 0x5a, sizeof(out));
    assert_int_equal(outcome_stopped(&out, LEGACY, C(8192, 8192), "budget spent"), 0);
    assert_int_equal(out.kind, OUTCOME_STOPPED);
    assert_true(search_config_eq(out.w, C(8192, 8192)));
    assert_string_equal(out.after, LEGACY);
    assert_false(out.restart);
    assert_string_equal(out.what, "budget spent: nothing changed");
    outcome_free(&out);
    assert_null(out.after);
    outcome_free(&out); /* twice is harmless */
}

static void test_written_and_failed(void **state)
{
    struct model m = knee_model();
    struct search_config w;
    struct run r;

    run_init(&r, C(8192, 8192));
    converge(&r, &m);
    assert_int_equal(decide(&r, LEGACY), 0);
    w = r.out.w;
    outcome_written(&r.out, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144");
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    assert_string_equal(r.out.what, "committed socket options = TCP_NODELAY SO_RCVBUF=262144 "
                                    "SO_SNDBUF=262144");
    outcome_failed(&r.out, "testparm refused it");
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_string_equal(r.out.what, "not written: testparm refused it");
    assert_true(search_config_eq(r.out.w, w)); /* still rates the winner */
    run_free(&r);
}

/* ---- outcome_record ---- */

/* st holds c as in force, with c's rates; its count of cycles is as it
 * was, `cycles` (the tuner counts cycles where each ends, not here). */
static void assert_recorded(const struct state *st, const struct run *r, struct search_config c,
                            long cycles)
{
    double w, rr;

    assert_true(st->have_incumbent);
    assert_int_equal(st->rcvbuf, c.rcvbuf);
    assert_int_equal(st->sndbuf, c.sndbuf);
    report_rates(r->s, &r->t, c, &w, &rr);
    assert_true(w > 0 && rr > 0);
    assert_true(st->write_mbps == w);
    assert_true(st->read_mbps == rr);
    assert_int_equal(st->cycles, cycles);
}

/* A commit: the winner is in force, with its rates; verification watches
 * it. */
static void test_record_commit(void **state)
{
    struct model m = knee_model();
    struct state st = {.cycles = 7, .rcvbuf = 8192, .sndbuf = 8192};
    struct run r;

    run_init(&r, C(8192, 8192));
    converge(&r, &m);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_true(outcome_record(&r.out, r.s, &r.t, r.inc0, &st));
    assert_recorded(&st, &r, r.out.w, 7);
    assert_true(st.write_mbps > 0.95 * m.top);
    run_free(&r);
}

/* Kept: the value in force is the winner. */
static void test_record_keep(void **state)
{
    struct model m = knee_model();
    struct state st = {0};
    struct run r;

    run_init(&r, C(262144, 262144));
    converge(&r, &m);
    assert_int_equal(decide(&r, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144"), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_true(outcome_record(&r.out, r.s, &r.t, r.inc0, &st));
    assert_recorded(&st, &r, C(262144, 262144), 0);
    run_free(&r);
}

/* Advised, or a commit that failed: the old value stays in force, so st
 * keeps it with its own rates, not the winner's. Advice is verified (the
 * next cycles sample it on trials, not searching again for it); a failed
 * commit leaves nothing to verify. */
static void test_record_not_in_force(void **state)
{
    struct model m = knee_model();
    struct state st = {0};
    struct run r;

    run_init(&r, C(8192, 8192));
    r.o.mode = TUNER_ADVISE;
    converge(&r, &m);
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_ADVISE);
    assert_true(outcome_record(&r.out, r.s, &r.t, r.inc0, &st));
    assert_recorded(&st, &r, C(8192, 8192), 0);
    assert_true(st.write_mbps < 0.1 * m.top);
    outcome_free(&r.out);

    r.o.mode = TUNER_TUNE;
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_COMMIT);
    outcome_failed(&r.out, "smb.conf changed under us");
    assert_false(outcome_record(&r.out, r.s, &r.t, r.inc0, &st));
    assert_recorded(&st, &r, C(8192, 8192), 0);
    run_free(&r);
}

/* A search that ends with rates it could not measure (every write timed
 * out, so no read was made) leaves a state file that reads back: "nan"
 * would make it damaged, and a damaged state holds the tuner off. */
static void test_record_unmeasured_reads_back(void **state)
{
    struct search_sample x = {0.5, -1, true, false};
    struct state st = {0}, back = {0};
    struct err e;
    struct run r;
    char *text;

    run_init(&r, C(8192, 8192));
    r.o.search.max_total = 4;
    facts_search_bounds(&r.f, &r.o, r.inc0, &r.o.search, &r.auto_blocked);
    assert_int_equal(search_new(&r.o.search, r.inc0, &r.s), 0);
    for (int i = 0; i < 4; i++) {
        assert_true(search_tell(r.s, r.inc0, &x) >= 0);
        tally_add(&r.t, r.inc0, &x, 1000, false);
    }
    assert_true(search_converged(r.s));
    assert_int_equal(decide(&r, LEGACY), 0);
    assert_int_equal(r.out.kind, OUTCOME_KEEP);
    assert_true(outcome_record(&r.out, r.s, &r.t, r.inc0, &st));
    assert_true(isfinite(st.write_mbps) && st.write_mbps >= 0);
    assert_true(isfinite(st.read_mbps) && st.read_mbps >= 0);
    text = state_format(&st);
    assert_non_null(text);
    if (state_parse(text, strlen(text), "state", &back, &e) != 0)
        fail_msg("%s", e.msg);
    assert_true(back.have_incumbent);
    assert_int_equal(back.rcvbuf, 8192);
    free(text);
    state_free(&back);
    state_free(&st);
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit),
        cmocka_unit_test(test_advise),
        cmocka_unit_test(test_keep),
        cmocka_unit_test(test_keep_flat),
        cmocka_unit_test(test_commit_auto_restarts),
        cmocka_unit_test(test_commit_auto_restart_per_buffer),
        cmocka_unit_test(test_auto_checks_told),
        cmocka_unit_test(test_loopback_keeps_auto),
        cmocka_unit_test(test_loopback_legacy_commits_auto),
        cmocka_unit_test(test_loopback_covers_real_bdp),
        cmocka_unit_test(test_loopback_kept_raised_for_real_clients),
        cmocka_unit_test(test_loopback_from_auto_on_real_evidence),
        cmocka_unit_test(test_loopback_auto_blocked_says_so),
        cmocka_unit_test(test_cap_notices),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_written_and_failed),
        cmocka_unit_test(test_record_commit),
        cmocka_unit_test(test_record_keep),
        cmocka_unit_test(test_record_not_in_force),
        cmocka_unit_test(test_record_unmeasured_reads_back),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
