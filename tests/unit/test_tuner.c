/* The whole tuner against a simulated world (daemon/world.h), the way
 * chrony simulates its daemon: no smbd, no network. The world answers
 * from a model of throughput against buffer size; smb.conf and the state
 * file are real files in a temporary directory, edited by the real
 * daemon/owned (testparm judges them; smbcontrol is a script of the test
 * that says yes). Cycles, a kill -9 between any two steps (the tuner runs
 * in a child that kills itself at the N-th step), a hand edit, a drift. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "logcap.h"
#include "stuck.h"
#include "tz.h"

#include "child.h"
#include "files.h"
#include "journal.h"
#include "owned.h"
#include "rmtree.h"
#include "smbconf.h"
#include "sockopts.h"
#include "state.h"
#include "tuner.h"
#include "tuner_int.h"
#include "world.h"

#define LEGACY "TCP_NODELAY SO_RCVBUF=8192 SO_SNDBUF=8192"

struct sim {
    sd_event *ev;
    const struct tuner_opts *o;
    /* the model: a rate in MB/s that grows with the buffer up to `knee`
     * bytes and stays there; AUTO gets `auto_share` of the top rate */
    double top, auto_share, drift;
    long knee;
    /* loopback-like (issue 13): a cliff below `knee`, flat above it, and
     * every explicit size beats AUTO by `loop_gain` on writes alone (the
     * 8% that loopback's noise once gave 4 MiB) */
    bool loopback;
    double loop_gain;
    /* what the probe says of its connection (probe_result.loopback): on
     * this machine; live trials measure this machine's smbd, so theirs
     * stays here unless probe_far; socket_unknown: the probe did not
     * find its socket (client_rcvbuf -1) */
    bool probe_here, probe_far, socket_unknown;
    unsigned long long noise; /* PRNG state */
    struct search_config placed;
    /* what happened */
    int steps;   /* world operations so far */
    int kill_at; /* > 0: SIGKILL ourselves at that step */
    int facts_calls, measures, cycles_wanted;
    int idles;      /* idle statuses seen (exit_at_second_idle) */
    int drift_at;   /* > 0: from that cycle on, the knee is drift_knee */
    int facts_fail; /* > 0: the facts of that cycle cannot be had */
    long drift_knee;
    const char *kernel;  /* the facts' kernel release; NULL: "6.1.0-sim" */
    int measure_fail;    /* > 0: that measure (1 the first) fails */
    int measures_at[64]; /* measures when each cycle began */
    /* called at each facts call (the count so far), when set */
    void (*on_facts)(struct sim *s, int call, void *ud);
    void *on_facts_ud;
    /* called as each measurement is taken (the count so far), when set */
    void (*on_measure)(struct sim *s, int call, void *ud);
    void *on_measure_ud;
    struct search_config probed[512];
    int nprobed;
    /* a delivery under way */
    sd_event_source *src;
    world_facts_fn facts_done;
    place_fn place_done;
    measure_fn measure_done;
    world_busy_fn busy_done;
    world_clients_fn clients_done;
    void *ud;
    /* smbd runs (facts) and its real connections get `real` (the clients
     * watch), or the watch fails when real_fail */
    bool smbd_running, real_fail;
    /* the clients' traffic the busy check sees (MB/s); busy_fail 1: the
     * watch answers an error, 2: it cannot start */
    double busy_mbps;
    int busy_fail;
    int busy_calls; /* watches asked for */
    struct clients_watch_summary real;
    int clients_calls;
    int real_from; /* > 0: smbd runs (and has `real`) from that cycle on */
    /* > 0: from that cycle on the clients watch answers real_after */
    int after_from;
    struct clients_watch_summary real_after;
    char url[64], client[256];
};

/* Every operation the tuner asks of the world is a step; a kill at a step
 * is a kill -9 between the step before and this one. */
static void step(struct sim *s)
{
    if (++s->steps == s->kill_at)
        kill(getpid(), SIGKILL);
}

static double noise(struct sim *s)
{
    s->noise = s->noise * 6364136223846793005ULL + 1442695040888963407ULL;
    return 1 + 0.01 * ((double)(s->noise >> 11) / (double)(1ULL << 53) - 0.5);
}

static double rate_of(struct sim *s, long size)
{
    double r = size == SEARCH_AUTO ? s->top * s->auto_share
                                   : s->top * fmin(1.0, (double)size / (double)s->knee);

    return r * s->drift * noise(s);
}

/* The rate SO_RCVBUF ranks: the write rate on the server's side, the
 * read rate for client trials. */
static double rcvbuf_rate_of(struct sim *s, long size)
{
    if (s->loopback && size != SEARCH_AUTO)
        return rate_of(s, size) * (1 + s->loop_gain);
    return rate_of(s, size);
}

/* What the probe would meet: for live trials the value in smb.conf now,
 * else what was placed. */
static struct search_config in_force(struct sim *s)
{
    struct search_config c = s->placed;
    struct smbconf conf;
    struct sockopts so;

    /* (a file the editor refuses, made so by a test's hand edit: the
     * trial placed is what smbd has, as far as the probe can tell) */
    if (s->o->trials != TUNER_LIVE || smbconf_load(&conf, s->o->smb_conf, NULL) < 0)
        return c;
    assert_int_equal(sockopts_parse(conf.value, &so), 0);
    c.rcvbuf = sockopts_get(&so, SOCKOPTS_RCVBUF).present ? sockopts_get(&so, SOCKOPTS_RCVBUF).value
                                                          : SEARCH_AUTO;
    c.sndbuf = sockopts_get(&so, SOCKOPTS_SNDBUF).present ? sockopts_get(&so, SOCKOPTS_SNDBUF).value
                                                          : SEARCH_AUTO;
    sockopts_free(&so);
    smbconf_free(&conf);
    return c;
}

static int deliver(sd_event_source *src, uint64_t usec, void *ud);

static int later(struct sim *s)
{
    assert_null(s->src); /* one operation at a time */
    /* at once: an accuracy of 0 is sd-event's default of 250 ms */
    return sd_event_add_time_relative(s->ev, &s->src, CLOCK_MONOTONIC, 0, 1, deliver, s);
}

static int deliver(sd_event_source *src, uint64_t usec, void *ud)
{
    struct sim *s = ud;

    s->src = sd_event_source_disable_unref(s->src);
    if (s->facts_done) {
        struct facts f = {.caps_known = true,
                          .kcap = {4194304, 4194304},
                          .mins_known = true,
                          .kmin = {2304, 4608},
                          .kernel = "6.1.0-sim",
                          .samba = "4.17.12-sim"};
        world_facts_fn done = s->facts_done;

        if (s->kernel != NULL)
            snprintf(f.kernel, sizeof(f.kernel), "%s", s->kernel);
        if (s->real_from > 0 && s->facts_calls >= s->real_from)
            s->smbd_running = true;
        if (s->smbd_running) {
            f.smbd_running = true;
            f.smbd_pid = 1;
            f.smb_port = f.smb_ports[0] = 445;
            f.smb_ports[1] = 139;
            f.n_smb_ports = 2;
        }

        s->facts_done = NULL;
        if (s->facts_calls == s->facts_fail)
            done(s->ud, -EIO, NULL);
        else
            done(s->ud, 0, &f);
    } else if (s->place_done) {
        place_fn done = s->place_done;

        s->place_done = NULL;
        done(s->ud, 0, s->url, s->o->trials == TUNER_CLIENT ? s->client : NULL);
    } else if (s->measure_done) {
        struct search_config c;
        if (s->on_measure != NULL)
            s->on_measure(s, s->measures, s->on_measure_ud);
        c = in_force(s);
        struct probe_result r = {.outcome = PROBE_OK,
                                 .write_bytes = s->o->probe.size,
                                 .read_bytes = s->o->probe.size,
                                 .client_rcvbuf = s->socket_unknown ? -1 : 131072,
                                 .client_sndbuf = s->socket_unknown ? -1 : 131072,
                                 .loopback = !s->socket_unknown && !s->probe_far &&
                                             (s->probe_here || s->o->trials == TUNER_LIVE)};
        measure_fn done = s->measure_done;

        /* server side (shadow and live trials): writes rank SO_RCVBUF,
         * reads SO_SNDBUF; client trials tune the probe's socket, the
         * other way round (facts_search_bounds' mapping) */
        if (s->o->trials == TUNER_CLIENT) {
            r.read_mbps = rcvbuf_rate_of(s, c.rcvbuf);
            r.write_mbps = rate_of(s, c.sndbuf);
        } else {
            r.write_mbps = rcvbuf_rate_of(s, c.rcvbuf);
            r.read_mbps = rate_of(s, c.sndbuf);
        }
        r.write_s = r.write_bytes / (r.write_mbps * 1e6);
        r.read_s = r.read_bytes / (r.read_mbps * 1e6);
        if (s->nprobed < 512)
            s->probed[s->nprobed++] = c;
        s->measure_done = NULL;
        if (s->measures == s->measure_fail)
            done(s->ud, -EIO, &r, "sim: no answer");
        else
            done(s->ud, 0, &r, "");
    } else if (s->clients_done) {
        world_clients_fn done = s->clients_done;

        s->clients_done = NULL;
        if (s->real_fail)
            done(s->ud, -EPERM, NULL, "sim: sock_diag refused");
        else
            done(s->ud, 0,
                 s->after_from > 0 && s->facts_calls >= s->after_from ? &s->real_after : &s->real,
                 "");
    } else if (s->busy_done) {
        world_busy_fn done = s->busy_done;

        s->busy_done = NULL;
        if (s->busy_fail == 1)
            done(s->ud, -EPERM, 0.0, "sim: sock_diag refused");
        else
            done(s->ud, 0, s->busy_mbps, "");
    }
    return 0;
}

static int sim_facts(void *ctx, world_facts_fn done, void *ud)
{
    struct sim *s = ctx;

    step(s);
    /* One facts call a cycle: the run ends after the cycles wanted. */
    if (s->cycles_wanted > 0 && s->facts_calls == s->cycles_wanted) {
        sd_event_exit(s->ev, 0);
        return -ECANCELED;
    }
    if (s->facts_calls < 64)
        s->measures_at[s->facts_calls] = s->measures;
    s->facts_calls++;
    if (s->on_facts != NULL)
        s->on_facts(s, s->facts_calls, s->on_facts_ud);
    if (s->drift_at > 0 && s->facts_calls == s->drift_at)
        s->knee = s->drift_knee;
    s->facts_done = done;
    s->ud = ud;
    return later(s);
}

static int sim_place(void *ctx, const char *base, struct search_config c, place_fn done, void *ud)
{
    struct sim *s = ctx;

    step(s);
    s->placed = c;
    snprintf(s->url, sizeof(s->url), "smb://127.0.0.1/sim");
    snprintf(s->client, sizeof(s->client), "TCP_NODELAY");
    s->place_done = done;
    s->ud = ud;
    return later(s);
}

/* No shadow in the sim refuses a connection. */
static bool sim_place_denied(void *ctx)
{
    (void)ctx;
    return false;
}

static void sim_place_down(void *ctx)
{
}

static int sim_measure(void *ctx, const struct probe_params *p, measure_fn done, void *ud)
{
    struct sim *s = ctx;

    step(s);
    s->measures++;
    s->measure_done = done;
    s->ud = ud;
    return later(s);
}

static void sim_cancel(void *ctx)
{
    struct sim *s = ctx;

    s->src = sd_event_source_disable_unref(s->src);
    s->facts_done = NULL;
    s->place_done = NULL;
    s->measure_done = NULL;
    s->busy_done = NULL;
    s->clients_done = NULL;
}

static void sim_measure_tidy(void *ctx, bool wait)
{
    /* at the end of every cycle: a kill here is a kill after its commit */
    step(ctx);
}

static int sim_busy(void *ctx, const int *ports, int nports, double seconds, world_busy_fn done,
                    void *ud)
{
    struct sim *s = ctx;

    step(s);
    s->busy_calls++;
    /* the traffic on all of smbd's ports */
    assert_int_equal(nports, 2);
    assert_int_equal(ports[0], 445);
    assert_int_equal(ports[1], 139);
    assert_true(seconds > 0);
    if (s->busy_fail == 2)
        return -EPERM;
    s->busy_done = done;
    s->ud = ud;
    return later(s);
}

static int sim_clients(void *ctx, const int *ports, int nports, double seconds,
                       world_clients_fn done, void *ud)
{
    struct sim *s = ctx;

    step(s);
    /* smbd's ports, all of them */
    assert_int_equal(nports, 2);
    assert_int_equal(ports[0], 445);
    assert_int_equal(ports[1], 139);
    assert_true(seconds > 0);
    s->clients_calls++;
    s->clients_done = done;
    s->ud = ud;
    return later(s);
}

static int sim_sweep(void *ctx, struct err *e)
{
    return 0;
}

static void sim_free(void *ctx)
{
    sim_cancel(ctx);
}

static const struct world_ops sim_ops = {
    .facts = sim_facts,
    .place = sim_place,
    .place_down = sim_place_down,
    .place_denied = sim_place_denied,
    .measure = sim_measure,
    .measure_kill = sim_cancel,
    .measure_tidy = sim_measure_tidy,
    .busy = sim_busy,
    .clients = sim_clients,
    .cancel = sim_cancel,
    .sweep = sim_sweep,
    .free = sim_free,
};

/* ---- the test's files ---- */

struct fix {
    char dir[256], conf[300], state_dir[300], bin[300];
    struct tuner_opts o;
};

/* An executable shell script at path: "#!/bin/sh\n" and then fmt. */
static void write_script(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void write_script(const char *path, const char *fmt, ...)
{
    FILE *w = fopen(path, "w");
    va_list ap;

    assert_non_null(w);
    fputs("#!/bin/sh\n", w);
    va_start(ap, fmt);
    vfprintf(w, fmt, ap);
    va_end(ap);
    assert_int_equal(fclose(w), 0);
    assert_int_equal(chmod(path, 0755), 0);
}

static void write_conf(const struct fix *f, const char *value)
{
    FILE *c = fopen(f->conf, "w");

    assert_non_null(c);
    fprintf(c,
            "[global]\n"
            "   workgroup = SIM\n"
            "   socket options = %s\n"
            "   log level = 0\n"
            "\n"
            "[share]\n"
            "   path = %s\n"
            "   read only = no\n",
            value, f->dir);
    assert_int_equal(fclose(c), 0);
}

static char *conf_value(const struct fix *f)
{
    struct smbconf c;
    char *v;

    assert_int_equal(smbconf_load(&c, f->conf, NULL), 0);
    v = strdup(c.value);
    smbconf_free(&c);
    return v;
}

/* Not inlined: GCC 12 then takes the returned buffer for its local
 * pointer and warns of a dangling one where the caller uses it. */
__attribute__((noinline)) static char *read_all(const char *path)
{
    char *buf;
    size_t len;

    assert_int_equal(files_read(path, &buf, &len, NULL), 0);
    return buf;
}

static int setup(void **state)
{
    struct fix *f = calloc(1, sizeof(*f));
    char path[1024];

    snprintf(f->dir, sizeof(f->dir), "/tmp/smbtuned-test-tuner-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->conf, sizeof(f->conf), "%s/smb.conf", f->dir);
    snprintf(f->state_dir, sizeof(f->state_dir), "%s/state", f->dir);
    snprintf(f->bin, sizeof(f->bin), "%s/bin", f->dir);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
    assert_int_equal(mkdir(f->bin, 0700), 0);
    /* smbd is not running: smbcontrol, which a live trial needs, says yes */
    snprintf(path, sizeof(path), "%s/smbcontrol", f->bin);
    write_script(path, "exit 0\n");
    {
        /* in place of the bin of the test before: a PATH grown by one
         * directory each test would be cut at sizeof(path), and lose
         * testparm */
        const char *was = getenv("PATH") ? getenv("PATH") : "/usr/bin";

        if (strncmp(was, "/tmp/smbtuned-test-tuner-", 25) == 0 && strchr(was, ':') != NULL)
            was = strchr(was, ':') + 1;
        snprintf(path, sizeof(path), "%s:%s", f->bin, was);
    }
    setenv("PATH", path, 1);
    /* No test reaches the machine's systemd: a restart of smbd it asks
     * for (restart_smbd) fails, saying so, on a bus that is not there. */
    snprintf(path, sizeof(path), "unix:path=%s/no-system-bus", f->dir);
    setenv("DBUS_SYSTEM_BUS_ADDRESS", path, 1);
    write_conf(f, LEGACY);

    f->o.smb_conf = f->conf;
    f->o.state_dir = f->state_dir;
    /* Client trials against another host: a real path, whose trials rank
     * sizes (shadow trials are loopback's whatever the url's host: see
     * test_loopback_*). */
    f->o.trials = TUNER_CLIENT;
    f->o.mode = TUNER_TUNE;
    f->o.apply = APPLY_NONE;
    probe_params_default(&f->o.probe);
    f->o.probe.url = "smb://fileserver.example/sim";
    search_params_default(&f->o.search);
    f->o.interval_s = 0.001;
    f->o.window_start = -1;
    f->o.once = true;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fix *f = *state;

    unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
    assert_int_equal(rmtree_path(f->dir, NULL), 0);
    free(f);
    return 0;
}

static void sim_init(struct sim *s, const struct tuner_opts *o)
{
    memset(s, 0, sizeof(*s));
    s->o = o;
    s->top = 100;
    s->knee = 262144;
    s->auto_share = 0.8; /* an explicit size beats autotuning */
    s->drift = 1;
    s->noise = 42;
}

/* One run of the tuner in the sim world until the loop exits: the exit
 * code (--once), or 0 after sim->cycles_wanted cycles. */
static sd_event *new_loop(void);

static int run(const struct tuner_opts *o, struct sim *s)
{
    struct world w = {&sim_ops, s};
    struct tuner *t;
    struct err e;
    int r;

    s->ev = new_loop();
    assert_int_equal(tuner_new_in(s->ev, o, &w, &t, &e), 0);
    assert_int_equal(tuner_recover(t, &e), 0);
    tuner_kick(t);
    r = sd_event_loop(s->ev);
    tuner_free(t);
    s->ev = sd_event_unref(s->ev);
    return r;
}

static sd_event *new_loop(void)
{
    sd_event *ev;
    sigset_t ss;

    /* jobs watch their children with child sources */
    sigemptyset(&ss);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    assert_int_equal(sd_event_new(&ev), 0);
    return ev;
}

/* A daemon's run of o in the sim, its status told to fn (with *tp set
 * before the loop runs, for fn to act on the tuner), until the sim's
 * cycles are done. */
static void run_watched(struct sim *s, const struct tuner_opts *o,
                        void (*fn)(void *ud, const char *status), void *ud, struct tuner **tp)
{
    struct world w = {&sim_ops, s};
    struct err e;

    s->ev = new_loop();
    assert_int_equal(tuner_new_in(s->ev, o, &w, tp, &e), 0);
    tuner_on_status(*tp, fn, ud);
    assert_int_equal(tuner_recover(*tp, &e), 0);
    tuner_kick(*tp);
    assert_int_equal(sd_event_loop(s->ev), 0);
    tuner_free(*tp);
    s->ev = sd_event_unref(s->ev);
}

static void fresh_state(struct fix *f)
{
    assert_int_equal(rmtree_path(f->state_dir, NULL), 0);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
}

/* ---- the journal's events, through journal_set_tap ---- */

#define MAX_SEEN 4096

/* Every entry of a run: its MESSAGE_ID ("" for a plain one), its fields
 * as "\nNAME=value\nNAME=value\n", so that strstr finds
 * "\nNAME=value\n", and its line. */
struct seen {
    int n;
    const char *id[MAX_SEEN];
    char *fields[MAX_SEEN];
    char *line[MAX_SEEN];
};

static void seen_tap(void *ctx, const char *message_id, int prio, const char *const fields[],
                     const char *line)
{
    struct seen *sn = ctx;
    size_t len = 2;
    char *buf;

    (void)prio;
    if (sn->n == MAX_SEEN)
        return;
    for (size_t i = 0; fields != NULL && fields[i] != NULL; i++)
        len += strlen(fields[i]) + 1;
    buf = malloc(len);
    assert_non_null(buf);
    strcpy(buf, "\n");
    for (size_t i = 0; fields != NULL && fields[i] != NULL; i++) {
        strcat(buf, fields[i]);
        strcat(buf, "\n");
    }
    sn->id[sn->n] = message_id ? message_id : "";
    sn->line[sn->n] = strdup(line);
    assert_non_null(sn->line[sn->n]);
    sn->fields[sn->n++] = buf;
}

static void seen_begin(struct seen *sn)
{
    memset(sn, 0, sizeof(*sn));
    journal_set_tap(seen_tap, sn);
}

static void seen_end(struct seen *sn)
{
    journal_set_tap(NULL, NULL);
    for (int i = 0; i < sn->n; i++) {
        free(sn->fields[i]);
        free(sn->line[i]);
    }
}

/* The index of the first event id at or after from with every field of
 * want (NULL-terminated "NAME=value"), or -1. */
static int seen_find(const struct seen *sn, int from, const char *id, const char *const want[])
{
    char needle[512];

    for (int i = from < 0 ? 0 : from; i < sn->n; i++) {
        bool all = strcmp(sn->id[i], id) == 0;

        for (size_t k = 0; all && want != NULL && want[k] != NULL; k++) {
            snprintf(needle, sizeof(needle), "\n%s\n", want[k]);
            all = strstr(sn->fields[i], needle) != NULL;
        }
        if (all)
            return i;
    }
    return -1;
}

/* Whether a line told holds text (NULL: false). */
static bool seen_said(const struct seen *sn, const char *text)
{
    for (int i = 0; text != NULL && i < sn->n; i++)
        if (sn->line[i] != NULL && strstr(sn->line[i], text) != NULL)
            return true;
    return false;
}

static int seen_count(const struct seen *sn, const char *id)
{
    int n = 0;

    for (int i = 0; i < sn->n; i++)
        n += strcmp(sn->id[i], id) == 0;
    return n;
}

static void load_state(const struct fix *f, struct state *st)
{
    memset(st, 0, sizeof(*st));
    assert_int_equal(state_load(f->state_dir, st, NULL), 0);
}

/* ---- the tests ---- */

/* From the legacy line, one cycle commits a size at or past the knee for
 * both buffers, keeps every other token, and the state says what is in
 * force. */
static void test_once_commits_the_knee(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct sockopts so;
    struct state st;
    char *v;

    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    v = conf_value(f);
    assert_int_equal(sockopts_parse(v, &so), 0);
    assert_true(sockopts_get(&so, SOCKOPTS_RCVBUF).present);
    assert_true(sockopts_get(&so, SOCKOPTS_RCVBUF).value >= s.knee);
    assert_true(sockopts_get(&so, SOCKOPTS_SNDBUF).value >= s.knee);
    assert_non_null(strstr(v, "TCP_NODELAY"));
    sockopts_free(&so);
    load_state(f, &st);
    assert_string_equal(st.last_written, v);
    assert_false(st.pending);
    assert_false(st.hold);
    assert_int_equal(st.cycles, 1);
    assert_true(st.write_mbps > 0.9 * s.top);
    state_free(&st);
    free(v);
}

/* One --once cycle tells each step as an event with its fields, in
 * order: the search's start from the line in force, a trial per sample
 * (numbered), a move, the search's end, the commit, the cycle's end. */
static void test_once_tells_its_events(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    char conf[400];
    int start, trial, move, end, commit, cycle;

    sim_init(&s, &f->o);
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    snprintf(conf, sizeof(conf), "SMBTUNED_SMB_CONF=%s", f->conf);
    start = seen_find(
        &sn, 0, JOURNAL_ID_SEARCH_START,
        (const char *const[]){conf, "SMBTUNED_RCVBUF=8192", "SMBTUNED_SNDBUF=8192", NULL});
    assert_true(start >= 0);
    /* the first sample is the line in force, with its rates */
    trial = seen_find(&sn, start, JOURNAL_ID_TRIAL,
                      (const char *const[]){conf, "SMBTUNED_SAMPLES=1", "SMBTUNED_RCVBUF=8192",
                                            "SMBTUNED_SNDBUF=8192", NULL});
    assert_true(trial > start);
    assert_non_null(strstr(sn.fields[trial], "\nSMBTUNED_WRITE_MBPS="));
    assert_non_null(strstr(sn.fields[trial], "\nSMBTUNED_READ_MBPS="));
    /* one trial event per sample measured */
    assert_int_equal(seen_count(&sn, JOURNAL_ID_TRIAL), s.measures);
    move = seen_find(&sn, trial, JOURNAL_ID_MOVE, (const char *const[]){conf, NULL});
    assert_true(move > trial);
    assert_non_null(strstr(sn.fields[move], "\nSMBTUNED_SAMPLES="));
    assert_null(strstr(sn.fields[move], "\nSMBTUNED_RCVBUF=8192\nSMBTUNED_SNDBUF=8192\n"));
    end = seen_find(&sn, move, JOURNAL_ID_SEARCH_END, (const char *const[]){conf, NULL});
    assert_true(end > move);
    assert_non_null(strstr(sn.fields[end], "\nSMBTUNED_WRITE_MBPS="));
    commit = seen_find(&sn, end, JOURNAL_ID_COMMIT, (const char *const[]){conf, NULL});
    assert_true(commit > end);
    /* the commit says what the line is worth: the search end's sizes,
     * samples and rates */
    assert_non_null(strstr(sn.fields[commit], "\nSMBTUNED_WRITE_MBPS="));
    assert_non_null(strstr(sn.fields[end], strstr(sn.fields[commit], "\nSMBTUNED_RCVBUF=")));
    cycle = seen_find(&sn, commit, JOURNAL_ID_CYCLE,
                      (const char *const[]){conf, "SMBTUNED_RESULT=done", NULL});
    assert_true(cycle > commit);
    /* the cycle's end carries what is in force now: the commit's sizes */
    assert_non_null(strstr(sn.fields[cycle], strstr(sn.fields[commit], "\nSMBTUNED_RCVBUF=")));
    /* and the bytes its probes moved, write+read (the simulated probe
     * moves its size each way); the search's end those of its samples */
    char bytes[64];
    snprintf(bytes, sizeof(bytes), "\nSMBTUNED_BYTES=%lld\n",
             2LL * s.measures * (long long)f->o.probe.size);
    assert_non_null(strstr(sn.fields[cycle], bytes));
    const char *eb = strstr(sn.fields[end], "\nSMBTUNED_BYTES=");
    assert_non_null(eb);
    long long search_bytes = atoll(eb + strlen("\nSMBTUNED_BYTES="));
    assert_true(search_bytes > 0 && search_bytes % (2 * f->o.probe.size) == 0);
    assert_true(search_bytes <= 2LL * s.measures * (long long)f->o.probe.size);
    assert_int_equal(seen_find(&sn, 0, JOURNAL_ID_ERROR, NULL), -1);
    seen_end(&sn);
}

/* How many of the search's decisions a line tells: a move ("A -> B:"),
 * a "stays", a "converged at", a "trial ended". */
static int decisions(const char *line)
{
    static const char *const marks[] = {" -> ", " stays ", " converged at ", " trial ended:"};
    int n = 0;

    for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
        for (const char *p = line; (p = strstr(p, marks[k])) != NULL; p++)
            n++;
    return n;
}

/* The search's decisions reach the journal one an entry, a move as a move
 * event: several in one entry were one long line on --once's stderr. */
static void test_once_one_decision_an_entry(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    int told = 0, moves = 0, converged = 0;

    sim_init(&s, &f->o);
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    for (int i = 0; i < sn.n; i++) {
        int k = decisions(sn.line[i]);

        if (strcmp(sn.id[i], JOURNAL_ID_MOVE) == 0) {
            assert_non_null(strstr(sn.line[i], " -> "));
            moves++;
        }
        if (strcmp(sn.id[i], JOURNAL_ID_MOVE) != 0 && strcmp(sn.id[i], "") != 0)
            continue; /* the cycle's and the commit's own words */
        if (k > 1)
            fail_msg("two decisions in one entry: %s", sn.line[i]);
        told += k;
        converged += strstr(sn.line[i], " converged at ") != NULL;
    }
    /* both buffers converge, after at least one move */
    assert_true(moves >= 1);
    assert_int_equal(converged, 2);
    assert_true(told >= 3);
    seen_end(&sn);
}

static void keep_status(void *ud, const char *status)
{
    snprintf(ud, 512, "%s", status);
}

/* A status longer than its buffer (a commit's reasons) is cut at a word,
 * and says so, not mid-word. */
static void test_long_status_cut_at_a_word(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct world w = {&sim_ops, &s};
    struct tuner *t;
    struct err e;
    char got[512], words[1024] = "";

    sim_init(&s, &f->o);
    s.ev = new_loop();
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &t, &e), 0);
    tuner_on_status(t, keep_status, got);
    while (strlen(words) < 600)
        strcat(words, "autotuning cannot take effect before smbd restarts; ");
    tuner_set_status(t, "%s", words);
    size_t n = strlen(got);
    assert_true(n > 200 && n < sizeof(t->status));
    assert_string_equal(got + n - 4, " ...");
    /* what precedes is whole words of the text, up to a space in it */
    assert_memory_equal(got, words, n - 4);
    assert_int_equal(words[n - 4], ' ');
    tuner_free(t);
    s.ev = sd_event_unref(s.ev);
}

/* busy_rate: a cycle runs while the clients are quiet and is deferred
 * while they move more; and where their traffic cannot be watched (the
 * watch fails in its answer, or cannot start) it is deferred too, since
 * nothing then says they are quiet. It used to tune anyway. */
static void test_busy_rate_defers(void **state)
{
    struct fix *f = *state;
    const struct {
        double mbps;
        int fail;
        const char *said;
    } cases[] = {{0.5, 0, NULL},
                 {50, 0, "clients move 50.0 MB/s"},
                 {0, 1, "cannot watch client traffic (sim: sock_diag refused): tuning deferred"},
                 {0, 2, "tuning deferred: busy_rate asks for quiet clients"}};
    struct sim s;
    struct seen sn;

    f->o.once = false;
    f->o.busy_mbps = 10;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool said;

        sim_init(&s, &f->o);
        s.smbd_running = true;
        s.cycles_wanted = 1;
        s.busy_mbps = cases[i].mbps;
        s.busy_fail = cases[i].fail;
        seen_begin(&sn);
        assert_int_equal(run(&f->o, &s), 0);
        said = seen_said(&sn, cases[i].said);
        seen_end(&sn);
        assert_int_equal(s.measures > 0, cases[i].said == NULL);
        assert_int_equal(said, cases[i].said != NULL);
    }
}

static double uptime_s(void)
{
    struct timespec ts;

    assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The clients start work after the third sample: busy, or their traffic
 * can no longer be watched. */
static void clients_start_work(struct sim *s, int call, void *ud)
{
    if (call == 3) {
        s->busy_mbps = 50;
        s->busy_fail = *(int *)ud;
    }
}

/* busy_rate during a search: the clients' traffic is watched again
 * between samples (here before every one: busy_recheck_s 0), and clients
 * that start work, or a watch that fails, stop the search after the
 * sample under way, keeping the line it started from, saying so. With
 * the watches further apart than the search lasts (counted from the
 * cycle's start's watch), the same search runs on to its end. Before,
 * only the cycle's start was watched. */
static void test_busy_rate_stops_a_search(void **state)
{
    struct fix *f = *state;
    const struct {
        double recheck_s;
        int fail;
        const char *said;
    } cases[] = {{0, 0,
                  "clients move 50.0 MB/s (more than 10.0): the search stops after 3 "
                  "samples, keeping " LEGACY "; the next cycle searches again"},
                 {0, 1,
                  "cannot watch client traffic (sim: sock_diag refused): the search stops "
                  "after 3 samples, keeping " LEGACY},
                 {0, 2, "the search stops after 3 samples, keeping " LEGACY},
                 {-1, 0, NULL}};
    struct sim s;
    struct seen sn;
    char *v;

    f->o.once = false;
    f->o.busy_mbps = 10;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fail = cases[i].fail;
        bool said;

        /* -1: a second under CLOCK_MONOTONIC's now, far more than the
         * search lasts: a watch comes only if the cycle's start left no
         * time of its own (busy_at 0) */
        f->o.busy_recheck_s = cases[i].recheck_s >= 0 ? cases[i].recheck_s : uptime_s() - 1;
        sim_init(&s, &f->o);
        s.smbd_running = true;
        s.cycles_wanted = 1;
        s.busy_mbps = 0.5;
        s.on_measure = clients_start_work;
        s.on_measure_ud = &fail;
        seen_begin(&sn);
        assert_int_equal(run(&f->o, &s), 0);
        said = seen_said(&sn, cases[i].said);
        seen_end(&sn);
        v = conf_value(f);
        if (cases[i].said != NULL) {
            if (!said || s.measures != 3 || strcmp(v, LEGACY) != 0)
                fail_msg("case %zu: said %d, %d samples, the line %s", i, said, s.measures, v);
        } else if (s.measures <= 3 || strcmp(v, LEGACY) == 0 || s.busy_calls != 1) {
            fail_msg("case %zu: %d samples, %d watches, the line %s", i, s.measures, s.busy_calls,
                     v);
        }
        free(v);
    }
}

static void watch_fails_first(struct sim *s, int call, void *ud)
{
    s->busy_fail = call == 1;
}

/* A new kernel whose first cycle is deferred (busy_rate, the clients'
 * traffic cannot be watched): the deferred cycle saved the new versions,
 * so no later cycle finds the change again, and the next cycle's first
 * sample still tells it against the rates before. It was lost. */
static void test_upgrade_told_after_a_deferred_cycle(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    int told = 0;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.smbd_running = true;
    s.cycles_wanted = 1;
    assert_int_equal(run(&f->o, &s), 0);
    f->o.busy_mbps = 10;
    sim_init(&s, &f->o);
    s.smbd_running = true;
    s.cycles_wanted = 2;
    s.kernel = "6.2.0-sim";
    s.on_facts = watch_fails_first;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    for (int i = 0; i < sn.n; i++)
        told += sn.line[i] && strstr(sn.line[i], "kernel 6.1.0-sim -> 6.2.0-sim: write ") &&
                strstr(sn.line[i], "at the same settings");
    seen_end(&sn);
    assert_int_equal(told, 1);
    assert_true(s.measures > 0);
}

/* A cycle on another kernel than the state's tells the upgrade with the
 * versions before and after. */
static void test_upgrade_tells_before_after(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;

    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    sim_init(&s, &f->o);
    s.kernel = "6.2.0-sim";
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(seen_find(&sn, 0, JOURNAL_ID_UPGRADE,
                          (const char *const[]){"SMBTUNED_KERNEL_BEFORE=6.1.0-sim",
                                                "SMBTUNED_KERNEL_AFTER=6.2.0-sim",
                                                "SMBTUNED_SAMBA_BEFORE=4.17.12-sim",
                                                "SMBTUNED_SAMBA_AFTER=4.17.12-sim", NULL}) >= 0);
    seen_end(&sn);
}

/* A probe that fails ends the cycle: an error entry that names the probe,
 * then the cycle's end, failed. */
static void test_failed_probe_tells_an_error(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    int err;

    sim_init(&s, &f->o);
    s.measure_fail = 3;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 1);
    err = seen_find(&sn, 0, JOURNAL_ID_ERROR, (const char *const[]){"SMBTUNED_ERROR=probe", NULL});
    assert_true(err >= 0);
    assert_true(seen_find(&sn, err, JOURNAL_ID_CYCLE,
                          (const char *const[]){"SMBTUNED_RESULT=failed", "SMBTUNED_SAMPLES=2",
                                                NULL}) > err);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_COMMIT), 0);
    seen_end(&sn);
}

/* Where autotuning is best it commits no explicit size. */
static void test_once_commits_auto_when_best(void **state)
{
    struct fix *f = *state;
    struct sim s;
    char *v;

    sim_init(&s, &f->o);
    s.auto_share = 1.3;
    assert_int_equal(run(&f->o, &s), 0);
    v = conf_value(f);
    assert_null(strstr(v, "SO_RCVBUF"));
    assert_null(strstr(v, "SO_SNDBUF"));
    assert_string_equal(v, "TCP_NODELAY");
    free(v);
}

/* Trial events of AUTO (the check after a search that could not offer
 * it, smbd's listener holding the legacy line's sizes). */
static int auto_trials(const struct seen *sn)
{
    const char *const want[] = {"SMBTUNED_RCVBUF=auto", "SMBTUNED_SNDBUF=auto", NULL};
    int n = 0;

    for (int i = seen_find(sn, 0, JOURNAL_ID_TRIAL, want); i >= 0;
         i = seen_find(sn, i + 1, JOURNAL_ID_TRIAL, want))
        n++;
    return n;
}

/* With smbd running from the legacy line, AUTO is no candidate and is
 * measured after the search for the report: three samples when it is
 * near the sizes chosen, one when that sample is below abort_ratio of
 * them (issue 12: no trial below half the incumbent's rate for more than
 * one sample). */
static int auto_samples_at(struct fix *f, double auto_share)
{
    struct sim s;
    struct seen sn;
    int n;

    assert_int_equal(rmtree_path(f->state_dir, NULL), 0);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
    write_conf(f, LEGACY);
    sim_init(&s, &f->o);
    s.smbd_running = true;
    s.auto_share = auto_share;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    n = auto_trials(&sn);
    seen_end(&sn);
    return n;
}

static void test_auto_check_ends_far_below(void **state)
{
    struct fix *f = *state;

    assert_int_equal(auto_samples_at(f, 0.8), 3);
    assert_int_equal(auto_samples_at(f, 0.3), 1);
}

/* Loopback trials (issue 13): every explicit size beats AUTO by 8% on
 * writes, as loopback's noise once made 4 MiB do. */
static void sim_loopback(struct sim *s, const struct tuner_opts *o)
{
    sim_init(s, o);
    s->loopback = true;
    s->loop_gain = 0.08;
    s->knee = 65536; /* the small-buffer cliff */
    s->auto_share = 1.0;
}

/* The default install: no url, loopback trials on the own share, from
 * the line value. */
static void own_share_from(struct fix *f, const char *value, struct sim *s)
{
    write_conf(f, value);
    f->o.trials = TUNER_SHADOW;
    f->o.probe.url = NULL;
    f->o.own_share = true;
    sim_loopback(s, &f->o);
}

/* The same world again, from no state: the line it leaves (malloc'ed). */
static char *rerun_loopback_world(struct fix *f, struct sim *s)
{
    assert_int_equal(rmtree_path(f->state_dir, NULL), 0);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
    sim_loopback(s, &f->o);
    assert_int_equal(run(&f->o, s), 0);
    return conf_value(f);
}

/* From TCP_NODELAY, loopback trials alone take the server off
 * autotuning for no client: no explicit size is written, with the own
 * share (no url) or with a url that names this machine by its name (the
 * shadow serves it on 127.0.0.1 all the same). The same world on a real
 * path, client trials against another host, does commit one (the rule is
 * loopback's). */
static void test_loopback_keeps_autotuning(void **state)
{
    struct fix *f = *state;
    struct sim s;
    char *v;

    own_share_from(f, "TCP_NODELAY", &s);
    assert_int_equal(run(&f->o, &s), 0);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY");
    free(v);
    f->o.probe.url = "smb://fileserver.example/sim";
    f->o.own_share = false;
    v = rerun_loopback_world(f, &s);
    assert_string_equal(v, "TCP_NODELAY");
    free(v);
    /* the trials did prefer an explicit SO_RCVBUF: on a real path it is
     * committed */
    f->o.trials = TUNER_CLIENT;
    v = rerun_loopback_world(f, &s);
    assert_non_null(strstr(v, "SO_RCVBUF="));
    free(v);
}

/* Client trials to a url that names this machine by a name or address
 * other than loopback (smb://fileserver.example/sim on fileserver): the
 * probe finds its connection on this machine, and the trials are weighed
 * as loopback trials: no explicit size is written, the journal says why
 * the client trials count as loopback's, and the state file that their
 * rates are loopback's (--status). On a peer's path they are not. */
static void test_client_trials_here_keep_autotuning(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct state st;
    char *v, *log;

    write_conf(f, "TCP_NODELAY");
    f->o.trials = TUNER_CLIENT;
    sim_loopback(&s, &f->o);
    s.probe_here = true;
    logcap_begin();
    assert_int_equal(run(&f->o, &s), 0);
    log = logcap_end();
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY");
    free(v);
    assert_non_null(strstr(log, "client trials to smb://fileserver.example/sim run on this "
                                "machine's loopback"));
    assert_non_null(strstr(log, "loopback trials cannot rank sizes"));
    free(log);
    load_state(f, &st);
    assert_true(st.have_incumbent);
    assert_true(st.rates_loopback);
    state_free(&st);
    /* the same world across a path to a peer */
    s.probe_here = false;
    v = rerun_loopback_world(f, &s);
    assert_non_null(strstr(v, "SO_RCVBUF="));
    free(v);
    load_state(f, &st);
    assert_true(st.have_incumbent);
    assert_false(st.rates_loopback);
    state_free(&st);
}

/* From the legacy 8192 line, loopback trials (a url on 127.0.0.1) commit
 * autotuning, not the explicit sizes above the cliff they cannot rank. */
static void test_loopback_legacy_commits_auto(void **state)
{
    struct fix *f = *state;
    struct sim s;
    char *v;

    f->o.trials = TUNER_SHADOW;
    f->o.probe.url = "smb://127.0.0.1/sim";
    sim_loopback(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY");
    free(v);
}

/* Real connections held back by the server's receive buffer under
 * autotuning (sim's clients watch): loopback trials from TCP_NODELAY then
 * commit an explicit SO_RCVBUF that covers twice their largest
 * bandwidth-delay product (300000 -> 1048576 on the lattice), and the
 * send buffer, which holds none back, stays autotuned. The cycle's
 * summary is one entry with its fields, without addresses, and the state
 * keeps it for --status. */
static void test_real_clients_steer_loopback(void **state)
{
    static const char *const want[] = {"SMBTUNED_CLIENTS=3",
                                       "SMBTUNED_CLIENTS_SNDBUF_LIMITED=0",
                                       "SMBTUNED_CLIENTS_RCVBUF_LIMITED=2",
                                       "SMBTUNED_CLIENTS_CLIENT_WINDOW=0",
                                       "SMBTUNED_CLIENTS_NETWORK=1",
                                       "SMBTUNED_CLIENTS_IDLE=0",
                                       "SMBTUNED_RTT_MEDIAN_MS=40.0",
                                       "SMBTUNED_RTT_MAX_MS=41.5",
                                       "SMBTUNED_BDP_MAX=300000",
                                       NULL};
    struct fix *f = *state;
    struct state st;
    struct seen sn;
    struct sim s;
    char *v;
    int i;

    own_share_from(f, "TCP_NODELAY", &s);
    s.smbd_running = true;
    s.real.valid = true;
    s.real.s.connections = 3;
    s.real.s.by[CLIENTS_RCVBUF] = 2;
    s.real.s.by[CLIENTS_NETWORK] = 1;
    s.real.s.limited_by_buffers = 2;
    s.real.s.rtt_median_ms = 40;
    s.real.s.rtt_max_ms = 41.5;
    s.real.bdp_max = s.real.bdp[SOCKOPTS_RCVBUF] = 300000;
    s.real.buf_max[SOCKOPTS_RCVBUF] = 524288;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_int_equal(s.clients_calls, 1);
    i = seen_find(&sn, 0, JOURNAL_ID_CLIENTS, want);
    assert_true(i >= 0);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_CLIENTS), 1);
    /* before the search starts: the cycle's figures, then its trials */
    assert_true(i < seen_find(&sn, 0, JOURNAL_ID_SEARCH_START, NULL));
    seen_end(&sn);
    v = conf_value(f);
    /* four times the 300000-byte product, up the lattice (HELD_STEP) */
    assert_string_equal(v, "TCP_NODELAY SO_RCVBUF=2097152");
    free(v);
    load_state(f, &st);
    assert_true(st.clients_at > 0);
    assert_int_equal(st.clients, 3);
    assert_int_equal(st.clients_rcvbuf_limited, 2);
    assert_int_equal(st.clients_network, 1);
    assert_int_equal(st.bdp_max, 300000);
    assert_true(st.rtt_max_ms > 41.4 && st.rtt_max_ms < 41.6);
    state_free(&st);
}

/* Steering: once the knee is in force and verified, real connections
 * held back by the server's receive buffer (below the kernel's cap) start
 * a new search though nothing drifted; a search that keeps the value
 * ends it: later cycles verify again, one sample each. */
/* From cycle `from` on, smbd has one real connection held back by its
 * receive buffer, with a bandwidth-delay product of 200000 bytes. */
static void held_back_client(struct sim *s, int from)
{
    s->real_from = from;
    s->real.valid = true;
    s->real.s.connections = 1;
    s->real.s.by[CLIENTS_RCVBUF] = 1;
    s->real.s.limited_by_buffers = 1;
    s->real.bdp[SOCKOPTS_RCVBUF] = s->real.bdp_max = 200000;
}

static void test_real_clients_steer_a_new_search(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    int i;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 6;
    held_back_client(&s, 3);
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_STEER), 1);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), 2);
    i = seen_find(&sn, 0, JOURNAL_ID_STEER, (const char *const[]){"SMBTUNED_RCVBUF=262144", NULL});
    assert_true(i >= 0);
    assert_true(seen_find(&sn, i, JOURNAL_ID_SEARCH_START, NULL) > i);
    seen_end(&sn);
    /* cycle 2 verified (one sample), cycle 3 searched, 4 and 5 verified */
    assert_int_equal(s.measures_at[2] - s.measures_at[1], 1);
    assert_true(s.measures_at[3] - s.measures_at[2] > 1);
    assert_int_equal(s.measures_at[4] - s.measures_at[3], 1);
    assert_int_equal(s.measures_at[5] - s.measures_at[4], 1);
}

/* Real clients held back at the line already when a search begins: that
 * search has them in its outcome. In advise mode the line stays and so do
 * they; a second search (steer) for them would give the same advice. Ones
 * that come later still steer (test_real_clients_steer_a_new_search), and
 * so do clients that need more than twice the product the search saw. */
struct grow_ctx {
    struct sim *s;
    struct tuner *t;
    int idle;
    double bdp; /* > 0: the held-back client's product from the third cycle */
};

static void grow_when_idle(void *ud, const char *status)
{
    struct grow_ctx *g = ud;

    if (strncmp(status, "idle", 4) == 0 && ++g->idle == 2 && g->bdp > 0)
        g->s->real.bdp[SOCKOPTS_RCVBUF] = g->s->real.bdp_max = g->bdp;
}

static void steers_in_advise(struct fix *f, double later_bdp, int steers, int searches)
{
    struct sim s;
    struct seen sn;
    struct grow_ctx g = {.s = &s, .bdp = later_bdp};

    f->o.once = false;
    f->o.mode = TUNER_ADVISE;
    sim_init(&s, &f->o);
    s.cycles_wanted = 5;
    held_back_client(&s, 1);
    seen_begin(&sn);
    run_watched(&s, &f->o, grow_when_idle, &g, &g.t);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_STEER), steers);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), searches);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_VERIFY), 5 - searches);
    seen_end(&sn);
    f->o.mode = TUNER_TUNE;
}

static void test_clients_seen_by_the_search_do_not_steer_again(void **state)
{
    struct fix *f = *state;

    steers_in_advise(f, 0, 0, 1);
    /* a product that moved by half: the same clients */
    fresh_state(f);
    steers_in_advise(f, 300000, 0, 1);
    /* clients that need four times the product: a search for them */
    fresh_state(f);
    steers_in_advise(f, 800000, 1, 2);
}

/* After a commit, the connections opened since are compared with those
 * of the commit's cycle: before it three of four busy ones were held back
 * by the server's buffers, after it none of three new ones (the old one,
 * idle now, is no new one): the next cycle's entry says real clients got
 * better. The commit's own cycle has no comparison. */
static void test_real_clients_before_after(void **state)
{
    static const enum clients_limit before[] = {CLIENTS_RCVBUF, CLIENTS_SNDBUF, CLIENTS_RCVBUF,
                                                CLIENTS_NETWORK};
    static const enum clients_limit after[] = {CLIENTS_IDLE, CLIENTS_NETWORK, CLIENTS_NETWORK,
                                               CLIENTS_NETWORK};
    static const uint64_t cb[] = {11, 12, 13, 14}, ca[] = {11, 21, 22, 23};
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    int first, second;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 2;
    s.smbd_running = true;
    s.after_from = 2;
    s.real.valid = s.real_after.valid = true;
    for (int i = 0; i < 4; i++) {
        s.real.conns[s.real.nconns++] = (struct clients_watch_conn){cb[i], before[i], 1.5};
        s.real_after.conns[s.real_after.nconns++] =
            (struct clients_watch_conn){ca[i], after[i], 11};
    }
    s.real.s.connections = s.real_after.s.connections = 4;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    first = seen_find(&sn, 0, JOURNAL_ID_CLIENTS, NULL);
    assert_true(first >= 0);
    assert_null(strstr(sn.fields[first], "SMBTUNED_CLIENTS_SINCE_COMMIT="));
    assert_true(seen_find(&sn, first, JOURNAL_ID_COMMIT, NULL) > first);
    second = seen_find(&sn, first + 1, JOURNAL_ID_CLIENTS,
                       (const char *const[]){"SMBTUNED_CLIENTS_SINCE_COMMIT=better",
                                             "SMBTUNED_CLIENTS_NEW=3",
                                             "SMBTUNED_CLIENTS_NEW_HELD=0", NULL});
    assert_true(second > first);
    seen_end(&sn);
}

/* The watch fails (sock_diag refused): said, and the cycle goes on as
 * with no real connection (loopback alone: autotuning stays). */
static void test_real_clients_watch_fails(void **state)
{
    struct fix *f = *state;
    struct sim s;
    char *v;

    own_share_from(f, "TCP_NODELAY", &s);
    s.smbd_running = true;
    s.real_fail = true;
    assert_int_equal(run(&f->o, &s), 0);
    assert_int_equal(s.clients_calls, 1);
    assert_true(s.measures > 0);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY");
    free(v);
}

/* Advise mode measures and writes nothing. */
static void test_advise_writes_nothing(void **state)
{
    struct fix *f = *state;
    char *before = read_all(f->conf), *after;
    struct sim s;

    f->o.mode = TUNER_ADVISE;
    f->o.trials = TUNER_LIVE;
    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(s.measures > 3);
    after = read_all(f->conf);
    assert_string_equal(before, after); /* live trials taken back, byte for byte */
    free(before);
    free(after);
}

/* Live trials write this machine's smb.conf: a probe whose connection
 * left this machine (another host's smbd) refuses them at its first
 * sample, the line in force, before any is written; so does one whose
 * socket was not found, unless the url is loopback as written. */
static void test_live_trials_refused_when_the_probe_left(void **state)
{
    struct fix *f = *state;
    char *before = read_all(f->conf), *after, *log;
    struct sim s;

    f->o.trials = TUNER_LIVE;
    for (int k = 0; k < 3; k++) {
        sim_init(&s, &f->o);
        s.probe_far = k == 0;
        s.socket_unknown = k > 0;
        f->o.probe.url = k < 2 ? "smb://fileserver.example/sim" : "smb://127.0.0.1/sim";
        logcap_begin();
        assert_int_equal(run(&f->o, &s), k < 2 ? 1 : 0);
        log = logcap_end();
        after = read_all(f->conf);
        if (k < 2) {
            assert_int_equal(s.measures, 1);
            assert_non_null(strstr(log, k == 0 ? "live trials refused: the probe's connection to "
                                                 "smb://fileserver.example/sim left this machine"
                                               : "live trials refused: the probe's connection to "
                                                 "smb://fileserver.example/sim could not be "
                                                 "looked at, and the url names no loopback "
                                                 "address"));
            assert_string_equal(before, after);
        } else {
            /* no proof either way, and the url says this machine */
            assert_null(strstr(log, "live trials refused"));
            assert_true(s.measures > 3);
        }
        free(after);
        free(log);
    }
    free(before);
}

/* A live cycle writes each trial over the one before and then commits:
 * backup/ keeps the admin's bytes from before the first trial, not a
 * trial's. */
static void test_live_cycle_keeps_the_admin_bytes_in_backup(void **state)
{
    struct fix *f = *state;
    char *before = read_all(f->conf), *after, *kept, path[1024], *name;
    const char *tried[64];
    int ntried = 0;
    struct seen sn;
    struct sim s;

    f->o.trials = TUNER_LIVE;
    sim_init(&s, &f->o);
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    /* the configurations sampled, each written as a live trial but the
     * legacy line: two trials at least, one over the other */
    for (int i = 0; i < sn.n; i++) {
        const char *t = strstr(sn.line[i], "tried "), *colon = t ? strchr(t, ':') : NULL;
        bool seen_before = false;

        for (int k = 0; colon && k < ntried; k++)
            seen_before |= strncmp(tried[k], t, (size_t)(colon - t + 1)) == 0;
        if (colon && !seen_before && ntried < 64)
            tried[ntried++] = t;
    }
    if (ntried < 3)
        fail_msg("%d configurations sampled: no trial written over another", ntried);
    seen_end(&sn);
    after = read_all(f->conf);
    assert_string_not_equal(before, after); /* committed */
    name = smbconf_backup_name(f->conf);
    assert_non_null(name);
    snprintf(path, sizeof(path), "%s/backup/%s", f->state_dir, name);
    free(name);
    kept = read_all(path);
    assert_string_equal(kept, before);
    free(before);
    free(after);
    free(kept);
}

/* Kill points to try: all of them, or under valgrind (which sets
 * SMBTUNED_SIM_SEEDS: the simulation suites run fewer seeds there) about
 * that many, spread over the cycle. */
static int kill_stride(int total)
{
    const char *e = getenv("SMBTUNED_SIM_SEEDS");
    int n = e ? atoi(e) : 0;

    return n > 0 && n < total ? (total + n - 1) / n : 1;
}

/* From the start (the legacy line, an empty state), one run in a child
 * that kills itself at step `at`: its wait status (exit 3: the step was
 * never reached). */
static int run_killed_at(struct fix *f, struct sim *s, int at)
{
    pid_t pid;
    int ws;

    write_conf(f, LEGACY);
    assert_int_equal(rmtree_path(f->state_dir, NULL), 0);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        sim_init(s, &f->o);
        s->kill_at = at;
        run(&f->o, s);
        _exit(3);
    }
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    return ws;
}

/* A start's settling of what a run left pending (tuner_recover), nothing
 * more. */
static void recover(struct fix *f)
{
    struct sim s;
    struct world w = {&sim_ops, &s};
    struct tuner *t;
    struct err e;

    sim_init(&s, &f->o);
    s.ev = new_loop();
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &t, &e), 0);
    assert_int_equal(tuner_recover(t, &e), 0);
    tuner_free(t);
    s.ev = sd_event_unref(s.ev);
}

/* A kill -9 between any two steps of a live cycle: the next start
 * settles it. smb.conf then holds the old bytes or the committed value,
 * never a trial, and nothing is left pending. */
static void test_kill_between_any_two_steps(void **state)
{
    struct fix *f = *state;
    char *orig = read_all(f->conf);
    int total, stride, kills = 0, tried = 0, committed = 0;
    struct sim s;

    f->o.trials = TUNER_LIVE;
    /* a small search: a few sizes, both buffers together */
    f->o.search.tied = true;
    f->o.search.min_size = 65536;
    f->o.search.max_rcvbuf = f->o.search.max_sndbuf = 1048576;
    /* how many steps a whole cycle takes */
    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    total = s.steps;
    assert_true(total > 10);
    stride = kill_stride(total);
    for (int at = 1; at <= total; at += at + stride > total && at < total ? total - at : stride) {
        struct state st;
        char *v, *bytes;
        int ws;

        ws = run_killed_at(f, &s, at);
        tried++;
        kills += WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
        recover(f); /* the next start */
        load_state(f, &st);
        assert_false(st.pending);
        assert_false(st.hold); /* our own half-done step is no admin's edit */
        v = conf_value(f);
        bytes = read_all(f->conf);
        if (strcmp(v, LEGACY) == 0) {
            assert_string_equal(bytes, orig); /* every byte as it was */
        } else {
            /* the commit: recorded as ours; no trial */
            assert_non_null(st.last_written);
            assert_string_equal(st.last_written, v);
            committed++;
        }
        state_free(&st);
        free(v);
        free(bytes);
    }
    assert_int_equal(kills, tried); /* every step tried was reached and killed */
    assert_true(committed >= 1);    /* a kill after the commit keeps it */
    free(orig);
}

/* In the tuner's child: one byte to the parent at each tick of the loop. */
static int tick(sd_event_source *src, uint64_t usec, void *ud)
{
    int fd = *(int *)ud;

    (void)usec;
    if (write(fd, "t", 1) != 1)
        _exit(4);
    if (sd_event_source_set_time_relative(src, 100000) < 0 ||
        sd_event_source_set_enabled(src, SD_EVENT_ONESHOT) < 0)
        _exit(4);
    return 0;
}

/* smb.conf includes a file on a mount that never answers (a hung NFS or
 * FUSE mount): the cycle's read of the line in force waits in a job, the
 * loop goes on (its ticks reach the parent), and once the mount goes the
 * cycle fails, said. The read was made in the loop's own process, which
 * then stopped until the mount answered. The tuner runs in a child, the
 * mount's server (which answers nothing) in the parent. */
static void test_read_waits_on_a_hung_include_in_a_job(void **state)
{
    struct fix *f = *state;
    struct stuck mnt;
    int p[2], ticks = 0, ws = 0;
    pid_t pid;
    FILE *c;

    stuck_mount_or_skip(&mnt);
    c = fopen(f->conf, "a");
    assert_non_null(c);
    fprintf(c, "   include = %s/local.conf\n", mnt.dir);
    assert_int_equal(fclose(c), 0);
    assert_int_equal(pipe(p), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sim s;
        struct world w = {&sim_ops, &s};
        sd_event_source *src = NULL;
        struct tuner *t;
        struct err e;
        int r;

        close(p[0]);
        close(mnt.fd); /* the mount's server is the parent's alone */
        sim_init(&s, &f->o);
        s.ev = new_loop();
        if (tuner_new_in(s.ev, &f->o, &w, &t, &e) < 0 || tuner_recover(t, &e) < 0 ||
            sd_event_add_time_relative(s.ev, &src, CLOCK_MONOTONIC, 100000, 1, tick, &p[1]) < 0)
            _exit(5);
        tuner_kick(t);
        r = sd_event_loop(s.ev);
        _exit(r == 1 && s.measures == 0 ? 0 : 6);
    }
    close(p[1]);
    /* a few ticks while the read waits on the mount */
    for (int i = 0; i < 50 && ticks < 3; i++) {
        struct pollfd pf = {p[0], POLLIN, 0};
        char b;

        stuck_take(&mnt);
        if (poll(&pf, 1, 100) == 1 && read(p[0], &b, 1) == 1)
            ticks++;
    }
    stuck_release(&mnt);
    for (int i = 0; i < 300 && waitpid(pid, &ws, WNOHANG) == 0; i++)
        usleep(100000);
    if (waitpid(pid, &ws, WNOHANG) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &ws, 0);
    }
    close(p[0]);
    assert_int_equal(ticks, 3);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0); /* the cycle failed, nothing measured */
}

/* An admin edits our line after a commit: the next cycle holds off,
 * writes nothing, and says so. */
static void test_hand_edit_holds(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    struct state st;
    char *before, *after;

    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    write_conf(f, "TCP_NODELAY SO_RCVBUF=65536");
    before = read_all(f->conf);
    sim_init(&s, &f->o);
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 1);
    /* the cycle's end is a hold, in its own words, with no sizes claimed
     * in force (the admin's line is) */
    int end =
        seen_find(&sn, 0, JOURNAL_ID_CYCLE, (const char *const[]){"SMBTUNED_RESULT=held", NULL});
    assert_true(end >= 0);
    assert_non_null(strstr(sn.line[end], "cycle held after 0 samples: holding off: "));
    assert_non_null(strstr(sn.line[end], "socket options edited by hand"));
    assert_null(strstr(sn.fields[end], "SMBTUNED_RCVBUF="));
    seen_end(&sn);
    after = read_all(f->conf);
    assert_string_equal(before, after);
    assert_int_equal(s.measures, 0);
    load_state(f, &st);
    assert_true(st.hold);
    assert_non_null(strstr(st.hold_reason, "edited by hand"));
    state_free(&st);
    free(before);
    free(after);
}

#define HAND "TCP_NODELAY SO_RCVBUF=131072 SO_SNDBUF=131072"

/* A line of the admin's (`line`), added right below ours while a live
 * trial (anything but the legacy line) is measured. */
struct below {
    const struct fix *f;
    const char *line;
};

static void add_below_a_trial(struct sim *s, int call, void *ud)
{
    const struct below *b = ud;
    char *bytes = read_all(b->f->conf), *nl;
    FILE *c;

    (void)call;
    nl = strchr(strstr(bytes, "socket options = "), '\n');
    assert_non_null(nl);
    if (strstr(bytes, "socket options = " LEGACY "\n") == NULL) {
        c = fopen(b->f->conf, "w");
        assert_non_null(c);
        fprintf(c, "%.*s\n   %s%s", (int)(nl - bytes), bytes, b->line, nl);
        assert_int_equal(fclose(c), 0);
        s->on_measure = NULL;
    }
    free(bytes);
}

/* A live trial's cycle with `line` added below the trial's: the trial's
 * line goes back to what it replaced, the admin's stays after it, and the
 * daemon holds off, nothing left pending; the hold's reason holds `why`. */
static void trial_meets_a_line_below(struct fix *f, const char *line, const char *why)
{
    struct below b = {f, line};
    struct sim s;
    struct state st;
    char *after, want[256];

    f->o.trials = TUNER_LIVE;
    sim_init(&s, &f->o);
    s.on_measure = add_below_a_trial;
    s.on_measure_ud = &b;
    run(&f->o, &s);
    assert_null(s.on_measure); /* the edit was made */
    after = read_all(f->conf);
    snprintf(want, sizeof(want), "   socket options = %s\n   %s\n", LEGACY, line);
    if (strstr(after, want) == NULL)
        fail_msg("the trial's line was not taken back:\n%s", after);
    load_state(f, &st);
    assert_true(st.hold);
    assert_false(st.pending);
    assert_non_null(st.hold_reason);
    if (strstr(st.hold_reason, why) == NULL)
        fail_msg("hold reason: %s", st.hold_reason);
    state_free(&st);
    free(after);
}

/* An admin adds a socket options line of their own below a live trial's
 * (theirs is in force): README says the trial's value must not come back
 * into force the day theirs goes. The daemon once held at once and
 * dropped the trial's record, leaving the trial in the file. */
static void test_line_added_below_a_live_trial(void **state)
{
    trial_meets_a_line_below(*state, "socket options = " HAND, "is in force");
}

/* ... or a line the editor refuses (a relative include: which line is in
 * force is unknown): the trial's line is put back all the same. The
 * take-back once failed on the refusal at every cycle and at the stop,
 * and the trial stayed in smbd for every client. */
static void test_refused_line_added_below_a_live_trial(void **state)
{
    trial_meets_a_line_below(*state, "include = local.conf", "a relative path in an include");
}

/* The live trial's line rewritten by hand with its value kept (commas
 * for spaces): the compare passes, the bytes are not ours. */
static void reword_a_trial(struct sim *s, int call, void *ud)
{
    const struct fix *f = ud;
    char *bytes = read_all(f->conf), *line = strstr(bytes, "socket options = "), *nl;
    FILE *c;

    (void)call;
    assert_non_null(line);
    nl = strchr(line, '\n');
    assert_non_null(nl);
    /* a trial with sizes: words to join */
    if (strstr(bytes, "socket options = " LEGACY "\n") == NULL &&
        memmem(line, (size_t)(nl - line), "SO_RCVBUF=", 10) != NULL) {
        for (char *p = line + strlen("socket options = "); p < nl; p++)
            if (*p == ' ')
                *p = ',';
        c = fopen(f->conf, "w");
        assert_non_null(c);
        fputs(bytes, c);
        assert_int_equal(fclose(c), 0);
        s->on_measure = NULL;
    }
    free(bytes);
}

/* ... is an edit by hand, as any other: the daemon leaves the admin's
 * words in place and holds off, nothing left pending (a comparison by
 * value would have written over them). */
static void test_live_trial_reworded_by_hand(void **state)
{
    struct fix *f = *state;
    struct state st;
    struct sim s;
    char *after;

    f->o.trials = TUNER_LIVE;
    sim_init(&s, &f->o);
    s.on_measure = reword_a_trial;
    s.on_measure_ud = f;
    run(&f->o, &s);
    assert_null(s.on_measure); /* the edit was made */
    after = read_all(f->conf);
    assert_non_null(strstr(after, "socket options = TCP_NODELAY,SO_RCVBUF="));
    load_state(f, &st);
    assert_true(st.hold);
    assert_false(st.pending);
    assert_non_null(strstr(st.hold_reason, "changed since smbtuned wrote it"));
    state_free(&st);
    free(after);
}

/* An admin's line written over a live trial (one whose value is not
 * `keep`'s) while it is measured: the legacy line the trial replaced, or
 * (back_to_first) the first trial's line again, once a later trial is in
 * force. */
struct set_back {
    const struct fix *f;
    bool back_to_first;
    char *first;  /* the first trial's value */
    char *admins; /* the value written by hand */
};

static void set_a_trial_back(struct sim *s, int call, void *ud)
{
    struct set_back *b = ud;
    char *v = conf_value(b->f);

    (void)call;
    if (strcmp(v, LEGACY) == 0) {
        free(v);
        return;
    }
    if (!b->back_to_first) {
        write_conf(b->f, LEGACY); /* every byte as it was before the trial */
        b->admins = strdup(LEGACY);
        s->on_measure = NULL;
    } else if (b->first == NULL) {
        b->first = strdup(v);
    } else if (strcmp(v, b->first) != 0) {
        write_conf(b->f, b->first);
        b->admins = strdup(b->first);
        s->on_measure = NULL;
    }
    free(v);
}

/* A live trial's line set back by hand: the cycle ends with a hold, the
 * admin's bytes stand, nothing is left pending, and the next cycle
 * measures nothing (no live trial over the admin's line). The reason
 * holds `why`. */
static void trial_set_back_by_hand(struct fix *f, bool back_to_first, const char *why)
{
    struct set_back b = {.f = f, .back_to_first = back_to_first};
    struct sim s;
    struct seen sn;
    struct state st;
    char *admin_bytes, *after;

    f->o.trials = TUNER_LIVE;
    sim_init(&s, &f->o);
    s.on_measure = set_a_trial_back;
    s.on_measure_ud = &b;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 1);
    assert_null(s.on_measure); /* the edit was made */
    assert_non_null(b.admins);
    write_conf(f, b.admins); /* the admin's bytes, to compare */
    admin_bytes = read_all(f->conf);
    load_state(f, &st);
    assert_true(st.hold);
    assert_false(st.pending);
    if (strstr(st.hold_reason, why) == NULL)
        fail_msg("hold reason: %s", st.hold_reason);
    state_free(&st);
    /* the refused trial's write says why the cycle ended; nothing claims
     * that smbtuned took the trial back */
    assert_true(seen_said(&sn, "live trial not written, the cycle ends: "));
    assert_int_equal(seen_count(&sn, JOURNAL_ID_TAKE_BACK), 0);
    assert_true(seen_find(&sn, 0, JOURNAL_ID_HOLD, NULL) >= 0);
    seen_end(&sn);
    /* the next cycle holds off: no trial, no probe */
    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 1);
    assert_int_equal(s.measures, 0);
    after = read_all(f->conf);
    assert_string_equal(after, admin_bytes);
    free(after);
    free(admin_bytes);
    free(b.first);
    free(b.admins);
}

/* The legacy line put back over a live trial (an editor, sed, or
 * --set-buffers with its sizes): an edit by hand as any other. The
 * cycle's take-back once found the line "already undone", ended the
 * record as if smbtuned had taken it back, and the next cycle ran live
 * trials over the admin's line again. */
static void test_live_trial_set_back_to_the_original_by_hand(void **state)
{
    trial_set_back_by_hand(*state, false, "an edit by hand during smbtuned's live trial of");
}

/* ... or a later trial's line set to the first trial's value: the record
 * of the chain takes the step before's line for its own only until the
 * last step is known to be written (it once took the admin's line back to
 * the legacy one, without a hold). */
static void test_live_trial_set_to_an_earlier_trial_by_hand(void **state)
{
    trial_set_back_by_hand(*state, true, "changed since smbtuned wrote it");
}

/* The stop of a daemon whose take-back job has written the original line
 * and waits for smbcontrol (mark: the file the script makes then). */
struct stop_ctx {
    struct tuner *t;
    sd_event *ev;
    const char *mark;
};

/* The probe of the first trial written fails: the cycle ends, and its
 * take-back runs. */
static void fail_a_trial(struct sim *s, int call, void *ud)
{
    char *v = conf_value(ud);

    if (strcmp(v, LEGACY) != 0) {
        s->measure_fail = call;
        s->on_measure = NULL;
    }
    free(v);
}

static int stop_at_mark(sd_event_source *src, uint64_t usec, void *ud)
{
    struct stop_ctx *c = ud;

    (void)usec;
    if (access(c->mark, F_OK) != 0)
        return sd_event_source_set_time_relative(src, 10000) < 0 ||
                       sd_event_source_set_enabled(src, SD_EVENT_ONESHOT) < 0
                   ? -1
                   : 0;
    tuner_stop(c->t);
    sd_event_exit(c->ev, 0);
    return 0;
}

/* A stop that cancels the cycle's own take-back after it wrote the
 * original line back (before the state that ends the record was saved):
 * the stop's take-back finds the original, as after a set back by hand,
 * but it is smbtuned's own write: no hold (owned_settle). */
static void test_stop_during_our_take_back_holds_nothing(void **state)
{
    struct fix *f = *state;
    char path[1024], mark[1024], *orig = read_all(f->conf), *after;
    struct stop_ctx c = {.mark = mark};
    struct world w;
    sd_event_source *src = NULL;
    struct state st;
    struct sim s;
    struct err e;

    f->o.trials = TUNER_LIVE;
    f->o.once = false;
    /* smbcontrol hangs once the line is the legacy one again with a trial
     * still recorded: the take-back's, after its write */
    snprintf(mark, sizeof(mark), "%s/taking-back", f->dir);
    snprintf(path, sizeof(path), "%s/smbcontrol", f->bin);
    write_script(path,
                 "grep -q '^pending yes' '%s/state' && grep -qF 'socket options = %s' '%s' && "
                 "{ touch '%s'; exec sleep 30; }\nexit 0\n",
                 f->state_dir, LEGACY, f->conf, mark);
    sim_init(&s, &f->o);
    s.on_measure = fail_a_trial;
    s.on_measure_ud = f;
    s.cycles_wanted = 2; /* (should the stop never come) */
    w = (struct world){&sim_ops, &s};
    s.ev = new_loop();
    c.ev = s.ev;
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &c.t, &e), 0);
    assert_int_equal(tuner_recover(c.t, &e), 0);
    assert_int_equal(
        sd_event_add_time_relative(s.ev, &src, CLOCK_MONOTONIC, 10000, 1, stop_at_mark, &c), 0);
    tuner_kick(c.t);
    assert_int_equal(sd_event_loop(s.ev), 0);
    sd_event_source_disable_unref(src);
    tuner_free(c.t);
    s.ev = sd_event_unref(s.ev);
    assert_int_equal(access(mark, F_OK), 0); /* stopped in the take-back */
    load_state(f, &st);
    assert_false(st.hold); /* our own half-done take-back is no admin's edit */
    assert_false(st.pending);
    state_free(&st);
    after = read_all(f->conf);
    assert_string_equal(after, orig);
    free(after);
    free(orig);
}

struct resume_ctx {
    const struct fix *f;
    bool edited, resumed;
    bool early; /* at the cycle's first words of the hold, before its save */
    sd_event *ev;
    int held_after; /* cycles that still held off after the resume */
};

/* The admin's edit, in the third cycle (a verification) after a search. */
static void edit_at_third(struct sim *s, int call, void *ud)
{
    struct resume_ctx *r = ud;

    (void)s;
    if (call == 3 && !r->edited) {
        write_conf(r->f, HAND);
        r->edited = true;
    }
}

/* `smbtuned --resume` (cmd_resume) once the daemon holds off. */
static void resume_when_held(void *ud, const char *status)
{
    struct resume_ctx *r = ud;
    struct state st;

    /* a resume lost: cycles that hold off for ever end the run, to fail */
    if (r->resumed && strstr(status, "(checked again at ") != NULL && ++r->held_after >= 3) {
        sd_event_exit(r->ev, 0);
        return;
    }
    /* between cycles, as an admin would: the idle words of a hold; or
     * early, in the cycle that takes the hold, right after it was saved
     * and before the cycle's end saves the state again (a race) */
    if (r->resumed || strncmp(status, "holding off", 11) != 0 ||
        (strstr(status, "(checked again at ") == NULL) != r->early)
        return;
    load_state(r->f, &st);
    assert_true(st.hold);
    state_end_hold(&st);
    assert_int_equal(state_save(r->f->state_dir, &st, NULL), 0);
    state_free(&st);
    r->resumed = true;
}

/* A running daemon holds off after a hand edit; --resume hands control
 * back, and its next cycle searches from the admin's line, as smbtuned(8)
 * says, instead of verifying the winner of before. */
static void resume_searches_again(struct fix *f, bool early)
{
    struct resume_ctx r = {.f = f, .early = early};
    struct sim s;
    struct seen sn;
    struct world w = {&sim_ops, &s};
    struct tuner *t;
    struct err e;
    int first, again;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 6;
    s.on_facts = edit_at_third;
    s.on_facts_ud = &r;
    seen_begin(&sn);
    s.ev = new_loop();
    r.ev = s.ev;
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &t, &e), 0);
    tuner_on_status(t, resume_when_held, &r);
    assert_int_equal(tuner_recover(t, &e), 0);
    tuner_kick(t);
    assert_int_equal(sd_event_loop(s.ev), 0);
    tuner_free(t);
    s.ev = sd_event_unref(s.ev);
    assert_true(r.edited && r.resumed);
    assert_int_equal(r.held_after, 0);
    first = seen_find(&sn, 0, JOURNAL_ID_SEARCH_START, NULL);
    assert_true(first >= 0);
    again =
        seen_find(&sn, first + 1, JOURNAL_ID_SEARCH_START,
                  (const char *const[]){"SMBTUNED_RCVBUF=131072", "SMBTUNED_SNDBUF=131072", NULL});
    if (again < 0)
        fail_msg("no search from the admin's line after --resume");
    /* the daemon's own resume event, once, before that search */
    {
        char field[1100];
        int at;

        snprintf(field, sizeof(field), "SMBTUNED_SMB_CONF=%s", f->conf);
        at = seen_find(&sn, first + 1, JOURNAL_ID_RESUME, (const char *const[]){field, NULL});
        assert_true(at > first && at < again);
        assert_int_equal(seen_count(&sn, JOURNAL_ID_RESUME), 1);
    }
    seen_end(&sn);
}

static void test_resume_searches_from_the_line_in_force(void **state)
{
    resume_searches_again(*state, false);
}

/* The same --resume, run while the cycle that took the hold was ending:
 * the daemon's save of the cycle must not take the hold again. */
static void test_resume_during_the_holding_cycle(void **state)
{
    resume_searches_again(*state, true);
}

/* `smbtuned --resume` right after an edit by hand, between the second and
 * the third cycle, before any cycle held off for it: cmd_resume ends the
 * record of our line (last_written). */
struct unheld_ctx {
    const struct fix *f;
    int idle;
    bool done;
};

static void edit_and_resume_at_second_idle(void *ud, const char *status)
{
    struct unheld_ctx *r = ud;
    struct state st;

    if (r->done || strncmp(status, "idle", 4) != 0 || ++r->idle != 2)
        return;
    write_conf(r->f, HAND);
    load_state(r->f, &st);
    assert_false(st.hold);
    assert_non_null(st.last_written);
    state_end_hold(&st);
    assert_int_equal(state_save(r->f->state_dir, &st, NULL), 0);
    state_free(&st);
    r->done = true;
}

/* The daemon, converged, verifying its winner: the third cycle searches
 * from the admin's line, holds nothing, and says why. It once went on
 * verifying the old winner (still in memory) against the admin's line. */
static void test_resume_after_an_edit_not_yet_held(void **state)
{
    struct fix *f = *state;
    struct unheld_ctx r = {.f = f};
    struct sim s;
    struct seen sn;
    struct world w = {&sim_ops, &s};
    struct tuner *t;
    struct err e;
    struct state st;
    int first, verified, again;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 3;
    seen_begin(&sn);
    s.ev = new_loop();
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &t, &e), 0);
    tuner_on_status(t, edit_and_resume_at_second_idle, &r);
    assert_int_equal(tuner_recover(t, &e), 0);
    tuner_kick(t);
    assert_int_equal(sd_event_loop(s.ev), 0);
    tuner_free(t);
    s.ev = sd_event_unref(s.ev);
    assert_true(r.done);
    first = seen_find(&sn, 0, JOURNAL_ID_SEARCH_START, NULL);
    verified = seen_find(&sn, first + 1, JOURNAL_ID_VERIFY, NULL);
    assert_true(first >= 0 && verified > first);
    again =
        seen_find(&sn, verified + 1, JOURNAL_ID_SEARCH_START,
                  (const char *const[]){"SMBTUNED_RCVBUF=131072", "SMBTUNED_SNDBUF=131072", NULL});
    if (again < 0)
        fail_msg("no search from the admin's line after --resume");
    assert_true(seen_find(&sn, verified + 1, JOURNAL_ID_RESUME, NULL) > verified);
    assert_int_equal(seen_find(&sn, verified + 1, JOURNAL_ID_VERIFY, NULL), -1);
    seen_end(&sn);
    load_state(f, &st);
    assert_false(st.hold);
    state_free(&st);
}

/* After a search the daemon verifies the winner, one sample a cycle; when
 * the rates drift (the knee moves four times further out) it searches
 * again and commits the new knee. One run, many cycles. */
static void test_drift_searches_again(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    int first;
    char *v;

    f->o.once = false;
    sim_init(&s, &f->o);
    /* late enough that verification holds a reference of its own
     * (VERIFY_MIN_REF samples) before the rates move */
    s.cycles_wanted = 63;
    s.drift_at = 32;
    s.drift_knee = 4 * 262144;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    /* the journal: a verification of the winner each cycle, then a drift */
    first =
        seen_find(&sn, 0, JOURNAL_ID_VERIFY,
                  (const char *const[]){"SMBTUNED_RCVBUF=262144", "SMBTUNED_SNDBUF=262144", NULL});
    assert_true(first >= 0);
    assert_non_null(strstr(sn.fields[first], "\nSMBTUNED_WRITE_MBPS="));
    assert_true(seen_count(&sn, JOURNAL_ID_VERIFY) >= s.drift_at - 3);
    assert_true(seen_find(&sn, first, JOURNAL_ID_DRIFT,
                          (const char *const[]){"SMBTUNED_RCVBUF=262144", NULL}) > first);
    /* a verification cycle ends in its own words, not the idle ones of
     * the cycle before */
    int end = seen_find(&sn, first, JOURNAL_ID_CYCLE, NULL);
    assert_true(end > first);
    assert_non_null(strstr(sn.line[end], "cycle done after 1 samples: verified SO_RCVBUF 262144 "
                                         "SO_SNDBUF 262144: write "));
    seen_end(&sn);
    /* the first cycle searched; the next ones took one sample each */
    assert_true(s.measures_at[1] > 5);
    for (int c = 2; c < s.drift_at; c++)
        assert_int_equal(s.measures_at[c] - s.measures_at[c - 1], 1);
    /* after the drift: more than one sample in some cycle, the new knee */
    v = conf_value(f);
    assert_non_null(strstr(v, "SO_RCVBUF=1048576"));
    assert_non_null(strstr(v, "SO_SNDBUF=1048576"));
    free(v);
}

/* A restart goes on verifying the winner of a search that converged
 * before it (the state file keeps the reference), one sample a cycle;
 * after a change of the kernel it searches again. */
static void test_restart_keeps_verifying(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 3;
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(s.measures_at[1] > 5);
    assert_int_equal(s.measures_at[2] - s.measures_at[1], 1);
    /* the restart: a new tuner on the same state directory */
    sim_init(&s, &f->o);
    s.cycles_wanted = 3;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_VERIFY), 3);
    seen_end(&sn);
    assert_int_equal(s.measures_at[1], 1);
    assert_int_equal(s.measures_at[2] - s.measures_at[1], 1);
    /* a new kernel: the reference is of another machine */
    sim_init(&s, &f->o);
    s.cycles_wanted = 2;
    s.kernel = "6.2.0-sim";
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(s.measures_at[1] > 5);
}

/* A state file that cannot be read at a cycle's start (here a link that
 * loops: -ELOOP; in the field EIO, EACCES, EMFILE) ends the cycle, and
 * its end saves nothing over it: a blank state would drop a hold, the
 * line we wrote and a live trial's record. It once did. */
static void test_unread_state_not_saved_over(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct world w = {&sim_ops, &s};
    struct tuner *t;
    struct err e;
    struct stat st;
    char path[400];

    f->o.once = true;
    sim_init(&s, &f->o);
    s.ev = new_loop();
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &t, &e), 0);
    assert_int_equal(tuner_recover(t, &e), 0);
    snprintf(path, sizeof(path), "%s/state", f->state_dir);
    unlink(path);
    assert_int_equal(symlink("state", path), 0);
    tuner_kick(t);
    assert_int_equal(sd_event_loop(s.ev), 1);
    tuner_free(t);
    s.ev = sd_event_unref(s.ev);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(s.measures, 0);
}

/* A daemon's first two cycles (a search, a verification), its state
 * file loaded into st: converged. */
static void converge_twice(struct fix *f, struct state *st)
{
    struct sim s;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 2;
    assert_int_equal(run(&f->o, &s), 0);
    load_state(f, st);
    assert_true(st->converged);
}

/* Save st (freed) as the state file, restart for one cycle, seen by sn
 * (for the caller to end): whether a journal line said text. */
static bool restart_saying(struct fix *f, struct state *st, struct sim *s, struct seen *sn,
                           const char *text)
{
    bool said = false;

    assert_int_equal(state_save(f->state_dir, st, NULL), 0);
    state_free(st);
    sim_init(s, &f->o);
    s->cycles_wanted = 1;
    seen_begin(sn);
    assert_int_equal(run(&f->o, s), 0);
    for (int i = 0; i < sn->n; i++)
        said = said || (sn->line[i] && strstr(sn->line[i], text));
    return said;
}

static void halve_the_rates(struct sim *s, int call, void *ud)
{
    s->drift = 0.5;
}

/* The rates halved while the daemon was down (the same kernel and Samba:
 * a path that fell from 1 Gbit/s to 100 Mbit/s). The reference a restart
 * restores rests on the search's few samples, so every sample is beyond
 * its stall bound and none joins it: before, it stayed unseen however
 * many cycles ran. Restarts every two cycles, as the run beyond the bound
 * is kept in the state file too: caught at the fourth sample. */
static void test_restart_sees_a_drift_made_while_down(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    struct state st;
    int drifts = 0;

    converge_twice(f, &st);
    assert_true(st.ref_n[0] < 20); /* not warm yet */
    assert_non_null(st.ref_settings);
    state_free(&st);
    for (int restart = 0; restart < 2 && drifts == 0; restart++) {
        sim_init(&s, &f->o);
        s.on_facts = halve_the_rates;
        s.cycles_wanted = 2;
        seen_begin(&sn);
        assert_int_equal(run(&f->o, &s), 0);
        drifts += seen_count(&sn, JOURNAL_ID_DRIFT);
        seen_end(&sn);
        if (restart == 0) {
            load_state(f, &st);
            assert_non_null(st.ref_recent); /* the run so far */
            state_free(&st);
        }
    }
    assert_int_equal(drifts, 1);
}

/* The recent samples a restart replays already make an alarm (the last
 * run saved the state before the sample that would have raised it): the
 * restart says why and searches, with no verification sample first. */
static void test_restart_replay_that_alarms_searches(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;
    struct state st;

    converge_twice(f, &st);
    /* four samples at 1 MB/s against about 100: beyond the stall bound */
    assert_int_equal(state_set_str(&st.ref_recent, "0,0 0,0 0,0 0,0"), 0);
    assert_true(restart_saying(f, &st, &s, &sn, "4 samples in a row beyond the stall bound"));
    assert_int_equal(seen_count(&sn, JOURNAL_ID_VERIFY), 0);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), 1);
    seen_end(&sn);
}

/* Verification refines the reference, and the state file keeps it as it
 * stands: a restart goes on from the samples taken since the search, not
 * from the search's few. */
static void test_restart_keeps_the_refined_reference(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct state st;
    long n0;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 1;
    assert_int_equal(run(&f->o, &s), 0);
    load_state(f, &st);
    n0 = st.ref_n[0];
    state_free(&st);
    sim_init(&s, &f->o);
    s.cycles_wanted = 6;
    assert_int_equal(run(&f->o, &s), 0);
    assert_int_equal(s.measures, 6); /* verified each cycle, no search */
    load_state(f, &st);
    assert_true(st.converged);
    assert_true(st.ref_n[0] > n0);
    state_free(&st);
}

/* A reference measured with other settings (another probe size here; a
 * url or a trials mode alike) is not verified against: other rates, or
 * another search's range. The restart searches again. */
static void test_restart_with_other_settings_searches(void **state)
{
    struct fix *f = *state;
    struct sim s;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 2;
    assert_int_equal(run(&f->o, &s), 0);
    f->o.probe.size *= 2;
    sim_init(&s, &f->o);
    s.cycles_wanted = 1;
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(s.measures > 5);
}

/* A reference saved by a version whose probe computed its rates another
 * way (no "rates=" word: the calls' waits counted in) is not verified
 * against either: its rates are on another scale. */
static void test_restart_with_rates_of_an_older_probe_searches(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct state st;
    struct seen sn;
    const char *rest;

    f->o.once = false;
    converge_twice(f, &st);
    assert_non_null(st.ref_settings);
    rest = strchr(st.ref_settings, ' ');
    assert_non_null(rest);
    assert_int_equal(strncmp(st.ref_settings, "rates=", 6), 0);
    assert_int_equal(state_set_str(&st.ref_settings, rest + 1), 0);
    assert_true(restart_saying(f, &st, &s, &sn, "computed its rates another way"));
    seen_end(&sn);
    assert_true(s.measures > 5);
}

/* A new kernel, and a converged reference whose rates were computed
 * another way (stripped: an older smbtuned upgraded at the same time):
 * the upgrade's line gives the rates after and compares nothing, where
 * with this version's rates it says by how much they changed. */
static void test_upgrade_with_rates_of_an_older_probe_compares_nothing(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct state st;
    struct seen sn;
    char path[400];

    f->o.once = false;
    for (int older = 0; older < 2; older++) {
        const char *said = NULL;

        converge_twice(f, &st);
        if (older)
            assert_int_equal(state_set_str(&st.ref_settings, strchr(st.ref_settings, ' ') + 1), 0);
        assert_int_equal(state_save(f->state_dir, &st, NULL), 0);
        state_free(&st);
        sim_init(&s, &f->o);
        s.cycles_wanted = 1;
        s.kernel = older ? "6.3.0-sim" : "6.2.0-sim";
        seen_begin(&sn);
        assert_int_equal(run(&f->o, &s), 0);
        for (int i = 0; i < sn.n; i++)
            if (sn.line[i] && strstr(sn.line[i], "at the same settings"))
                said = sn.line[i];
        assert_non_null(said);
        if (older) {
            assert_non_null(strstr(said, "not compared with the rates before"));
            assert_null(strchr(said, '%'));
        } else {
            assert_non_null(strstr(said, "%, read "));
        }
        seen_end(&sn);
        /* the next round starts from a fresh state */
        snprintf(path, sizeof(path), "%s/state", f->state_dir);
        assert_int_equal(unlink(path), 0);
    }
}

/* tied = yes and a line that names one size, the best there is: the
 * search measures that size for both and nothing beats it, but the line
 * itself (the other buffer autotuned) was never measured against it, so
 * nothing is written; a size that does beat it is. */
static void test_tied_from_one_size_keeps_the_line(void **state)
{
    struct fix *f = *state;
    struct sim s;
    char *v;

    f->o.search.tied = true;
    write_conf(f, "TCP_NODELAY SO_SNDBUF=262144");
    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY SO_SNDBUF=262144");
    free(v);
    /* below the knee: a larger size for both wins, and is written */
    write_conf(f, "TCP_NODELAY SO_SNDBUF=65536");
    assert_int_equal(rmtree_path(f->state_dir, NULL), 0);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
    sim_init(&s, &f->o);
    assert_int_equal(run(&f->o, &s), 0);
    v = conf_value(f);
    assert_non_null(strstr(v, "SO_RCVBUF="));
    assert_null(strstr(v, "SO_SNDBUF=65536"));
    free(v);
}

/* The admin's edit at the first sample of a search that writes nothing. */
static void edit_during_a_search(struct sim *s, int call, void *ud)
{
    (void)call;
    write_conf(ud, HAND);
    s->on_measure = NULL;
}

/* A search from `line` that writes nothing while the admin edits it: the
 * cycle's end does not claim that line kept (the admin's is in force) but
 * holds off, as a commit meeting the edit does. It once said "kept" and
 * exited 0, and only the next cycle held. */
static void keeping_search_meets_an_edit(struct fix *f, const char *line)
{
    struct sim s;
    struct seen sn;
    struct state st;
    char *v, want[1400];
    int end;

    write_conf(f, line);
    sim_init(&s, &f->o);
    s.on_measure = edit_during_a_search;
    s.on_measure_ud = f;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 1);
    assert_null(s.on_measure); /* the edit was made */
    end = seen_find(&sn, 0, JOURNAL_ID_CYCLE, (const char *const[]){"SMBTUNED_RESULT=held", NULL});
    assert_true(end >= 0);
    assert_non_null(strstr(sn.line[end], "edited by hand during the cycle"));
    assert_null(strstr(sn.line[end], "kept"));
    seen_end(&sn);
    v = conf_value(f);
    assert_string_equal(v, HAND);
    free(v);
    load_state(f, &st);
    assert_true(st.hold);
    /* where the line is (write_conf: line 3), and what it holds */
    snprintf(want, sizeof(want),
             "%s:3: socket options edited by hand during the cycle: it is '%s', not '%s' as "
             "the cycle began",
             f->conf, HAND, line);
    if (strstr(st.hold_reason, want) == NULL)
        fail_msg("hold reason: %s", st.hold_reason);
    /* nothing recorded of a search whose line is gone: no converged
     * winner, no rates of the admin's line (which was never measured) */
    assert_false(st.converged);
    assert_false(st.have_incumbent);
    state_free(&st);
}

/* ... a search that converges on the line in force (tied, the best size
 * already there) */
static void test_edit_during_a_keeping_search_holds(void **state)
{
    struct fix *f = *state;

    f->o.search.tied = true;
    keeping_search_meets_an_edit(f, "TCP_NODELAY SO_SNDBUF=262144");
}

/* ... and one stopped early (its byte budget spent at the first sample) */
static void test_edit_during_a_search_stopped_early_holds(void **state)
{
    struct fix *f = *state;

    f->o.max_bytes = 1;
    keeping_search_meets_an_edit(f, LEGACY);
}

/* A reload (SIGHUP) that changes what the probe measures: the next cycle
 * searches instead of verifying the old winner against rates of other
 * settings; a reload that changes nothing of that goes on verifying. */
struct reload_ctx {
    struct tuner *t;
    struct tuner_opts o;
    int idle, at;
    char *url; /* when set: changed in place before the reload, as a
                * SIGHUP overwrites the configuration the options point into */
};

static void reload_when_idle(void *ud, const char *status)
{
    struct reload_ctx *r = ud;

    if (strncmp(status, "idle", 4) != 0 || ++r->idle != r->at)
        return;
    if (r->url != NULL)
        memcpy(r->url + strlen(r->url) - 3, "new", 3);
    tuner_set_opts(r->t, &r->o);
}

enum reload_change { RELOAD_NOTHING_MEASURED, RELOAD_SIZE, RELOAD_URL_IN_PLACE, RELOAD_RESTART };

static int searches_after_reload(struct fix *f, enum reload_change change)
{
    char url[] = "smb://fileserver.example/old";
    struct reload_ctx r = {.at = 2};
    struct sim s;
    struct seen sn;
    int n;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 4;
    if (change == RELOAD_URL_IN_PLACE) {
        f->o.probe.url = url;
        r.url = url;
    }
    r.o = f->o;
    if (change == RELOAD_SIZE)
        r.o.probe.size *= 2;
    else if (change == RELOAD_RESTART)
        r.o.restart_smbd = !r.o.restart_smbd; /* autotuning a candidate, or not */
    else if (change == RELOAD_NOTHING_MEASURED)
        r.o.interval_s *= 2; /* not what the probe measures */
    seen_begin(&sn);
    run_watched(&s, &f->o, reload_when_idle, &r, &r.t);
    assert_true(r.idle >= 2);
    n = seen_count(&sn, JOURNAL_ID_SEARCH_START);
    seen_end(&sn);
    return n;
}

static void test_reload_with_other_settings_searches(void **state)
{
    struct fix *f = *state;
    const char *url = f->o.probe.url;

    assert_int_equal(searches_after_reload(f, RELOAD_NOTHING_MEASURED), 1);
    fresh_state(f);
    assert_int_equal(searches_after_reload(f, RELOAD_SIZE), 2);
    /* a string (url, directory, socket options) changed where the options
     * point: the tuner must not compare the new text with itself */
    fresh_state(f);
    assert_int_equal(searches_after_reload(f, RELOAD_URL_IN_PLACE), 2);
    f->o.probe.url = url;
    /* restart_smbd turned on, as the journal's advice says: autotuning
     * may now be a candidate where smbd's listener holds explicit sizes */
    fresh_state(f);
    assert_int_equal(searches_after_reload(f, RELOAD_RESTART), 2);
}

/* Advise mode: advice that differs from the line converges as a commit
 * would, and the next cycles verify it, one sample each, instead of
 * searching again every interval for the same advice. A line changed by
 * hand gets advice of its own; a reload into tune mode searches and
 * writes. */
enum advise_change { ADVISE_NOTHING, ADVISE_HAND_EDIT, ADVISE_TO_TUNE };

struct advise_ctx {
    struct fix *f;
    struct tuner *t;
    enum advise_change change;
    int idle;
};

static void advise_change_when_idle(void *ud, const char *status)
{
    struct advise_ctx *a = ud;
    struct tuner_opts o;

    if (strncmp(status, "idle", 4) != 0 || ++a->idle != 2)
        return;
    if (a->change == ADVISE_HAND_EDIT)
        write_conf(a->f, "TCP_NODELAY SO_RCVBUF=65536 SO_SNDBUF=65536");
    if (a->change == ADVISE_TO_TUNE) {
        o = a->f->o;
        o.mode = TUNER_TUNE;
        tuner_set_opts(a->t, &o);
    }
}

static int advise_searches(struct fix *f, enum advise_change change, int *verified)
{
    struct advise_ctx a = {.f = f, .change = change};
    struct sim s;
    struct seen sn;
    int n;

    f->o.once = false;
    f->o.mode = TUNER_ADVISE;
    sim_init(&s, &f->o);
    s.cycles_wanted = 4;
    seen_begin(&sn);
    run_watched(&s, &f->o, advise_change_when_idle, &a, &a.t);
    assert_true(a.idle >= 2);
    n = seen_count(&sn, JOURNAL_ID_SEARCH_START);
    *verified = seen_count(&sn, JOURNAL_ID_VERIFY);
    /* what was verified is named as the advice, not as the line in force */
    if (change == ADVISE_NOTHING)
        assert_true(seen_said(&sn, "verified SO_RCVBUF 262144 SO_SNDBUF 262144 (the advice; "
                                   "smb.conf not changed): write "));
    seen_end(&sn);
    f->o.mode = TUNER_TUNE;
    return n;
}

static void test_advise_verifies_its_advice(void **state)
{
    struct fix *f = *state;
    char *before = read_all(f->conf), *after, *v;
    int verified;

    assert_int_equal(advise_searches(f, ADVISE_NOTHING, &verified), 1);
    assert_int_equal(verified, 3);
    after = read_all(f->conf);
    assert_string_equal(before, after);
    free(after);
    fresh_state(f);
    assert_int_equal(advise_searches(f, ADVISE_HAND_EDIT, &verified), 2);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY SO_RCVBUF=65536 SO_SNDBUF=65536");
    free(v);
    write_conf(f, LEGACY);
    fresh_state(f);
    assert_int_equal(advise_searches(f, ADVISE_TO_TUNE, &verified), 2);
    v = conf_value(f);
    assert_string_not_equal(v, LEGACY);
    free(v);
    free(before);
}

static struct tuner *one_cycle(struct fix *f, struct sim *s);
static void done_with(struct tuner *t, struct sim *s);

/* An advise run's first two cycles (a search, a verification) from the
 * legacy line, its state file loaded into st: the advice (the knee, not
 * written), the line it was searched from, and the advice's reference. */
static void advise_converge(struct fix *f, struct state *st)
{
    struct sim s;

    f->o.once = false;
    f->o.mode = TUNER_ADVISE;
    sim_init(&s, &f->o);
    s.cycles_wanted = 2;
    assert_int_equal(run(&f->o, &s), 0);
    load_state(f, st);
    assert_true(st->converged);
    assert_non_null(st->advice);
    assert_string_equal(st->advice, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144");
    assert_int_equal(st->advice_rcvbuf, 262144);
    assert_int_equal(st->advice_sndbuf, 262144);
    assert_int_equal(st->advised_from_rcvbuf, 8192);
    assert_int_equal(st->advised_from_sndbuf, 8192);
    assert_int_equal(st->rcvbuf, 8192); /* the line in force, not the advice */
}

#define ADVICE_RESTORED                                                                            \
    "the advice from before the restart, SO_RCVBUF 262144 SO_SNDBUF 262144 (socket options = "     \
    "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144), searched from the line in force: verifying "  \
    "it"

/* A restart in advise mode, the line in force still the one the advice
 * was searched from: it verifies the advice, one sample a cycle, and
 * searches no more (before, it searched again from scratch: the state
 * file kept no reference of a line not in force); what it verifies is the
 * advice (tuner_verified), and the state file keeps it, its reference
 * refined. smb.conf is never written. */
static void test_advise_restart_verifies_its_advice(void **state)
{
    struct fix *f = *state;
    char *before = read_all(f->conf), *after;
    struct state st;
    struct sim s;
    struct seen sn;
    struct tuner *t;
    long n0;

    advise_converge(f, &st);
    n0 = st.ref_n[0];
    state_free(&st);
    sim_init(&s, &f->o);
    s.cycles_wanted = 3;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(seen_said(&sn, ADVICE_RESTORED));
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), 0);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_VERIFY), 3);
    assert_true(seen_said(&sn, "verified SO_RCVBUF 262144 SO_SNDBUF 262144 (the advice; "
                               "smb.conf not changed): write "));
    seen_end(&sn);
    assert_int_equal(s.measures, 3);
    load_state(f, &st);
    assert_string_equal(st.advice, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144");
    assert_int_equal(st.advised_from_rcvbuf, 8192);
    assert_true(st.converged);
    assert_true(st.ref_n[0] > n0);
    state_free(&st);
    /* once more, one cycle, the tuner kept: it verifies the advice */
    t = one_cycle(f, &s);
    assert_int_equal(s.measures, 1);
    assert_true(search_config_eq(tuner_verified(t), (struct search_config){262144, 262144}));
    done_with(t, &s);
    after = read_all(f->conf);
    assert_string_equal(before, after);
    free(before);
    free(after);
    f->o.mode = TUNER_TUNE;
}

/* The line in force changed while the daemon was down (here the advice
 * applied by hand; any edit alike): the advice of the line before is not
 * verified, the restart searches from the new line, as a running daemon
 * does, and the old advice is gone from the state file. */
static void test_advise_restart_after_the_line_changed_searches(void **state)
{
    struct fix *f = *state;
    struct state st;
    struct sim s;
    struct seen sn;

    advise_converge(f, &st);
    write_conf(f, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144");
    assert_true(restart_saying(f, &st, &s, &sn,
                               "the line in force changed since the advice: searching again"));
    assert_false(seen_said(&sn, "from before the restart"));
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), 1);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_VERIFY), 0);
    seen_end(&sn);
    assert_true(s.measures > 3);
    /* the knee is in force now: nothing to advise, the line's reference */
    load_state(f, &st);
    assert_null(st.advice);
    assert_int_equal(st.advised_from_rcvbuf, 0);
    assert_int_equal(st.rcvbuf, 262144);
    state_free(&st);
    f->o.mode = TUNER_TUNE;
}

/* A restored advice that drifts: the rates halved while the daemon was
 * down. As in a running daemon, verification raises the alarm (the
 * reference rests on few samples: at the fourth sample beyond the stall
 * bound) and the next cycle searches again. */
static void test_advise_restart_drift_searches(void **state)
{
    struct fix *f = *state;
    struct state st;
    struct sim s;
    struct seen sn;
    int drift;

    advise_converge(f, &st);
    state_free(&st);
    sim_init(&s, &f->o);
    s.on_facts = halve_the_rates;
    s.cycles_wanted = 5;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(seen_said(&sn, ADVICE_RESTORED));
    drift = seen_find(&sn, 0, JOURNAL_ID_DRIFT, NULL);
    assert_true(drift >= 0);
    assert_true(seen_find(&sn, drift, JOURNAL_ID_SEARCH_START, NULL) > drift);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), 1);
    seen_end(&sn);
    f->o.mode = TUNER_TUNE;
}

/* A restored advice meets, a cycle later, what a running daemon's does:
 * the line in force changed by hand (it searches from it), a reload into
 * tune mode (it searches, and commits). */
static void test_advise_restored_meets_an_edit_and_a_reload(void **state)
{
    struct fix *f = *state;
    struct state st;
    int verified;
    char *v;

    advise_converge(f, &st);
    state_free(&st);
    /* restored, verified at the first idle, the edit, then one search */
    assert_int_equal(advise_searches(f, ADVISE_HAND_EDIT, &verified), 1);
    assert_true(verified >= 1);
    fresh_state(f);
    write_conf(f, LEGACY);
    advise_converge(f, &st);
    state_free(&st);
    assert_int_equal(advise_searches(f, ADVISE_TO_TUNE, &verified), 1);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144");
    free(v);
}

/* A restart that cannot verify the advice (the probe's size changed:
 * other rates) searches, and the search drops the advice at once: were
 * it stopped (here by its byte budget, after one sample) the state file
 * would otherwise go on showing advice and a reference nothing verifies. */
static void test_advise_search_after_a_restart_drops_the_advice(void **state)
{
    struct fix *f = *state;
    struct state st;
    struct sim s;
    struct seen sn;

    advise_converge(f, &st);
    f->o.probe.size *= 2;
    f->o.max_bytes = 1;
    assert_true(restart_saying(f, &st, &s, &sn, "byte budget of 1 spent"));
    assert_true(seen_said(&sn, "settings changed since the search before the restart"));
    seen_end(&sn);
    load_state(f, &st);
    assert_null(st.advice);
    assert_false(st.converged);
    state_free(&st);
    f->o.mode = TUNER_TUNE;
}

/* Advice kept by an advise run, and a restart in tune mode: the
 * reference was measured in advise mode (ref_settings), so the restart
 * searches, and commits; no advice is left in the state file. And back:
 * a tune run's reference is not verified as advice. */
static void test_advise_restart_in_tune_mode_searches(void **state)
{
    struct fix *f = *state;
    struct state st;
    struct sim s;
    struct seen sn;
    char *v;

    advise_converge(f, &st);
    f->o.mode = TUNER_TUNE;
    assert_true(
        restart_saying(f, &st, &s, &sn, "settings changed since the search before the restart"));
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), 1);
    seen_end(&sn);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY SO_RCVBUF=262144 SO_SNDBUF=262144");
    free(v);
    load_state(f, &st);
    assert_null(st.advice);
    assert_true(st.converged);
    state_free(&st);
    f->o.mode = TUNER_ADVISE;
    sim_init(&s, &f->o);
    s.cycles_wanted = 1;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_SEARCH_START), 1);
    seen_end(&sn);
    f->o.mode = TUNER_TUNE;
}

/* Loopback trials that keep autotuning although the search's winner was
 * an explicit size (outcome_decide): verification in memory samples that
 * winner, whose reference is of no line in force; a restart must not
 * verify autotuning against it, so none is kept, and it searches. */
static void test_loopback_keeps_no_reference_of_another_line(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct state st;
    char *v;

    f->o.once = false;
    own_share_from(f, "TCP_NODELAY", &s);
    s.loop_gain = 0.30;
    s.cycles_wanted = 2;
    assert_int_equal(run(&f->o, &s), 0);
    v = conf_value(f);
    assert_string_equal(v, "TCP_NODELAY");
    free(v);
    load_state(f, &st);
    assert_true(st.have_incumbent);
    assert_int_equal(st.rcvbuf, 0);
    assert_false(st.converged);
    state_free(&st);
    sim_loopback(&s, &f->o);
    s.loop_gain = 0.30;
    s.cycles_wanted = 1;
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(s.measures > 5);
}

/* Verification names what it sampled: where the loopback rules advised
 * another value than the search's winner (advise mode, the own share,
 * from the legacy line: autotuning advised, an explicit winner), the
 * winner is not called the advice. */
static void test_verified_words_name_the_winner(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct seen sn;

    f->o.once = false;
    f->o.mode = TUNER_ADVISE;
    own_share_from(f, LEGACY, &s);
    s.loop_gain = 0.30;
    s.cycles_wanted = 2;
    seen_begin(&sn);
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(seen_said(&sn, "advice: socket options = TCP_NODELAY (advise mode"));
    assert_true(seen_said(&sn, " (the search's winner, not the line in force): write "));
    assert_false(seen_said(&sn, "(the advice; smb.conf not changed)"));
    seen_end(&sn);
    f->o.mode = TUNER_TUNE;
}

/* A cycle whose facts cannot be had (the job failed) is skipped: it
 * neither searches from guesses nor takes the next good facts for a new
 * machine; the cycles around it verify, one sample each. */
static void test_failed_facts_skip_the_cycle(void **state)
{
    struct fix *f = *state;
    struct sim s;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 6;
    s.facts_fail = 3;
    assert_int_equal(run(&f->o, &s), 0);
    assert_true(s.measures_at[1] > 5);
    assert_int_equal(s.measures_at[2] - s.measures_at[1], 1);
    assert_int_equal(s.measures_at[3] - s.measures_at[2], 0);
    assert_int_equal(s.measures_at[4] - s.measures_at[3], 1);
    assert_int_equal(s.measures_at[5] - s.measures_at[4], 1);
}

/* A cycle that fails says what it was doing, not the idle words of the
 * cycle before it (which nested "last: idle: ..." cycle after cycle). */
static void test_failed_cycle_says_what_it_was_doing(void **state)
{
    struct fix *f = *state;
    struct state st;
    struct sim s;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.cycles_wanted = 3;
    s.facts_fail = 3;
    assert_int_equal(run(&f->o, &s), 0);
    load_state(f, &st);
    assert_non_null(st.cycle_result);
    if (strncmp(st.cycle_result, "failed during: starting", 23) != 0 ||
        strstr(st.cycle_result, "idle") != NULL)
        fail_msg("the failed cycle's result: %s", st.cycle_result);
    state_free(&st);
}

/* ---- the schedule: the time window, a restart ---- */

/* The minute of the day of now + add_min minutes, in UTC (the tests'
 * TZ). */
static int minute_from_now(int add_min)
{
    time_t now = time(NULL);
    struct tm tm;

    gmtime_r(&now, &tm);
    return ((tm.tm_hour * 60 + tm.tm_min + add_min) % 1440 + 1440) % 1440;
}

/* Leaves the loop at the first idle words: one cycle. */
static void exit_when_idle(void *ud, const char *status)
{
    struct sim *s = ud;

    if (strncmp(status, "idle: ", 6) == 0)
        sd_event_exit(s->ev, 0);
}

/* One daemon cycle (not --once) in the sim s, made ready by the caller;
 * the tuner stays for the test to look at, and is freed by the caller. */
static struct tuner *cycle_in(struct fix *f, struct sim *s)
{
    struct world w = {&sim_ops, s};
    struct tuner *t;
    struct err e;

    s->ev = new_loop();
    assert_int_equal(tuner_new_in(s->ev, &f->o, &w, &t, &e), 0);
    tuner_on_status(t, exit_when_idle, s);
    assert_int_equal(tuner_recover(t, &e), 0);
    tuner_kick(t);
    assert_int_equal(sd_event_loop(s->ev), 0);
    return t;
}

/* The same in a fresh sim. */
static struct tuner *one_cycle(struct fix *f, struct sim *s)
{
    f->o.once = false;
    sim_init(s, &f->o);
    return cycle_in(f, s);
}

/* Seconds until the tuner's timer fires. */
static double timer_left(struct tuner *t, struct sim *s)
{
    uint64_t at, now;

    assert_non_null(t->timer);
    assert_int_equal(sd_event_source_get_time(t->timer, &at), 0);
    assert_true(sd_event_now(s->ev, CLOCK_REALTIME, &now) >= 0);
    return ((double)at - (double)now) / 1e6;
}

static void done_with(struct tuner *t, struct sim *s)
{
    tuner_free(t);
    s->ev = sd_event_unref(s->ev);
}

/* Between cycles, the status of a cycle that failed says so: "last:
 * starting ..." read like the progress of a search. */
static void test_idle_status_after_a_failed_cycle(void **state)
{
    struct fix *f = *state;
    struct tuner *t;
    struct sim s;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.facts_fail = 1;
    t = cycle_in(f, &s);
    if (strncmp(tuner_status(t), "idle: next cycle at ", 20) != 0 ||
        strstr(tuner_status(t), "; last cycle failed during: starting") == NULL)
        fail_msg("after a failed cycle: %s", tuner_status(t));
    done_with(t, &s);
}

/* Between cycles the status says the rates are the probe's, not those of
 * smbd's clients. */
static void test_idle_status_says_whose_rates(void **state)
{
    struct fix *f = *state;
    struct sim s;
    struct tuner *t = one_cycle(f, &s);

    if (strstr(tuner_status(t), ", probe write ") == NULL ||
        strstr(tuner_status(t), " MB/s") == NULL)
        fail_msg("status '%s' does not say the probe's rates", tuner_status(t));
    done_with(t, &s);
}

/* One daemon cycle (in UTC) with the window [now + from, now + to)
 * (minutes) and the interval: the next cycle is due at the window's
 * start, on its minute to the second, the timer armed for then and the
 * status saying it. st: the state after it; the wait from the cycle's
 * end to the next. */
static long window_cycle(struct fix *f, struct sim *s, int from, int to, double interval,
                         struct state *st)
{
    char *was = tz_set("UTC0");
    struct tuner *t;
    struct tm tm;
    char hhmm[48];

    f->o.window_start = minute_from_now(from);
    f->o.window_end = minute_from_now(to);
    f->o.interval_s = interval;
    t = one_cycle(f, s);
    load_state(f, st);
    gmtime_r(&(time_t){st->next_at}, &tm);
    assert_int_equal(tm.tm_hour * 60 + tm.tm_min, f->o.window_start);
    assert_int_equal(tm.tm_sec, 0);
    assert_true(fabs(timer_left(t, s) - (double)(st->next_at - time(NULL))) < 2);
    snprintf(hhmm, sizeof(hhmm), "next cycle at %02d:%02d", tm.tm_hour, tm.tm_min);
    if (strstr(tuner_status(t), hhmm) == NULL)
        fail_msg("status '%s' does not say '%s'", tuner_status(t), hhmm);
    done_with(t, s);
    tz_restore(was);
    return st->next_at - st->cycle_at;
}

/* At the search's fourth sample the clock moves three hours on (the zone
 * changes), past the window's end. */
static void close_the_window(struct sim *s, int call, void *ud)
{
    (void)ud;
    if (call == 4) {
        free(tz_set("UTC-3"));
        s->on_measure = NULL;
    }
}

/* A search still running when its time window closes stops there,
 * keeping the line it started from (nothing written, a live trial taken
 * back): the window is the admin's promise to their users, and a search
 * once ran on into the morning. */
static void test_window_closing_ends_the_search(void **state)
{
    struct fix *f = *state;
    char *was = tz_set("UTC0"), *before = read_all(f->conf), *after;
    struct tuner *t;
    struct seen sn;
    struct state st;
    struct sim s;
    bool said = false;

    f->o.once = false;
    f->o.trials = TUNER_LIVE;
    f->o.window_start = minute_from_now(-10);
    f->o.window_end = minute_from_now(60);
    sim_init(&s, &f->o);
    s.on_measure = close_the_window;
    seen_begin(&sn);
    t = cycle_in(f, &s);
    tz_restore(was); /* before any assert: the suite's other tests run in it */
    for (int i = 0; i < sn.n; i++)
        said |= strstr(sn.line[i], "closed before the search converged") != NULL &&
                strstr(sn.line[i], "keeping " LEGACY) != NULL;
    seen_end(&sn);
    assert_null(s.on_measure); /* the clock moved */
    assert_true(said);
    assert_true(s.measures <= 5);
    after = read_all(f->conf);
    assert_string_equal(after, before); /* the live trial taken back, nothing written */
    load_state(f, &st);
    assert_false(st.pending);
    assert_non_null(strstr(st.cycle_result, "time window closed"));
    state_free(&st);
    done_with(t, &s);
    free(before);
    free(after);
}

/* At the sample whose number ud points to, the clock moves three hours
 * on, as close_the_window. */
static void close_the_window_at(struct sim *s, int call, void *ud)
{
    if (call == *(int *)ud) {
        free(tz_set("UTC-3"));
        s->on_measure = NULL;
    }
}

/* The legacy line in smb.conf and in smbd's listener, autotuning 30%
 * better, restart_smbd = yes, inside the time window (an hour left). */
static void restart_world(struct fix *f, struct sim *s)
{
    write_conf(f, LEGACY);
    f->o.once = false;
    f->o.restart_smbd = true;
    f->o.window_start = minute_from_now(-10);
    f->o.window_end = minute_from_now(60);
    sim_init(s, &f->o);
    s->smbd_running = true;
    s->auto_share = 1.3;
}

/* One cycle from the legacy line, smbd running with it and autotuning
 * 30% better, restart_smbd = yes: a commit of autotuning that restarts
 * smbd. close_at >= 0: the window closes at that sample. The sim's noise
 * is seeded, so a second run takes the same samples. Returns the
 * samples; said: whether the journal told that the window closed before
 * the restart; tried: that autotuning was written and smbd's restart
 * tried (it fails here, and the line goes back). */
static int restart_cycle(struct fix *f, int close_at, bool *said, bool *tried)
{
    char *was = tz_set("UTC0");
    struct tuner *t;
    struct seen sn;
    struct sim s;
    int n;

    /* no restart of this machine's smbd, should the rule break: the
     * restart's D-Bus call finds no bus */
    restart_world(f, &s);
    s.on_measure = close_at >= 0 ? close_the_window_at : NULL;
    s.on_measure_ud = &close_at;
    seen_begin(&sn);
    t = cycle_in(f, &s);
    tz_restore(was); /* before any assert: the suite's other tests run in it */
    *said = false;
    for (int i = 0; i < sn.n; i++)
        *said |= strstr(sn.line[i], "closed before smbd could be restarted") != NULL &&
                 strstr(sn.line[i], "keeping " LEGACY) != NULL;
    *tried = seen_said(&sn, "smbd could not be restarted for the change");
    seen_end(&sn);
    n = s.measures;
    done_with(t, &s);
    return n;
}

/* A restart moves every client off smbd, so it never comes after the
 * window has closed: a search whose last sample ends after the window's
 * end keeps the legacy line when its winner needs smbd restarted (a
 * review found it committed and restarted smbd in the morning). */
static void test_no_restart_after_the_window_closed(void **state)
{
    struct fix *f = *state;
    struct state st;
    bool said, tried;
    char *v;
    int n;

    /* the window open throughout: autotuning is committed, and smbd's
     * restart tried (test_a_failed_restart_is_taken_back: it fails here) */
    n = restart_cycle(f, -1, &said, &tried);
    assert_false(said);
    assert_true(tried);
    /* the same cycle, the window closing at its last sample */
    assert_int_equal(rmtree_path(f->state_dir, NULL), 0);
    assert_int_equal(mkdir(f->state_dir, 0700), 0);
    assert_int_equal(restart_cycle(f, n, &said, &tried), n);
    v = conf_value(f);
    assert_string_equal(v, LEGACY);
    assert_true(said);
    assert_false(tried);
    load_state(f, &st);
    assert_false(st.pending);
    assert_non_null(strstr(st.cycle_result, "time window closed before smbd's restart"));
    state_free(&st);
    free(v);
}

static void put_done(void *ud, int r, const struct owned_put_result *res)
{
    (void)res;
    *(int *)ud = r;
}

/* The edit job checks the window again before it writes a commit that
 * restarts smbd: it may have closed while testparm ran since the search
 * checked it. Nothing is written, nothing recorded, and it says why. */
static void test_commit_job_refuses_a_restart_after_the_window(void **state)
{
    struct fix *f = *state;
    char *was = tz_set("UTC0"), *v;
    struct owned *w;
    struct state st;
    sd_event *ev = new_loop();
    int r = 1;

    f->o.once = false;
    f->o.restart_smbd = true;
    /* closed: it opens in an hour */
    f->o.window_start = minute_from_now(60);
    f->o.window_end = minute_from_now(120);
    memset(&st, 0, sizeof(st));
    assert_int_equal(owned_new(ev, &f->o, &st, &w), 0);
    assert_int_equal(owned_put(w, LEGACY, (struct search_config){SEARCH_AUTO, SEARCH_AUTO},
                               OWNED_COMMIT, true, put_done, &r),
                     0);
    while (r == 1)
        assert_true(sd_event_run(ev, UINT64_MAX) >= 0);
    owned_free(w);
    sd_event_unref(ev);
    tz_restore(was);
    assert_int_equal(r, -ETIME);
    v = conf_value(f);
    assert_string_equal(v, LEGACY);
    free(v);
    assert_false(st.pending);
    state_free(&st);
}

/* Outside the window the cycle is deferred to the window's start, not
 * an interval later (6h from 11:30 never meets 01:00-05:00): the timer,
 * the state's next_at and the status all say the start. The deferral
 * counts as a cycle (it ended, without a sample). */
static void test_window_defers_to_its_start(void **state)
{
    struct fix *f = *state;
    struct state st;
    struct sim s;
    /* a window that opens in two hours, minus the seconds of this minute,
     * for an hour; the default interval, which would pass it */
    long wait = window_cycle(f, &s, 120, 180, 6 * 3600, &st);

    if (wait < 119 * 60 || wait > 120 * 60)
        fail_msg("next_at %ld s after the deferral, expected the window's start in 2 h", wait);
    assert_int_equal(s.measures, 0);
    assert_int_equal(st.cycles, 1);
    assert_non_null(strstr(st.cycle_result, "waiting for the time window"));
    state_free(&st);
}

/* A cycle in the window whose next one, an interval later, would fall
 * outside it is scheduled for the window's next start instead: no
 * deferral in between, and the status says when it runs. */
static void test_next_cycle_outside_the_window_moves_to_its_start(void **state)
{
    struct state st;
    struct sim s;
    /* open for an hour either side of now; the next cycle in 3 h */
    long wait = window_cycle(*state, &s, -60, 60, 3 * 3600, &st);

    /* tomorrow's start: 23 h from now, give or take the minute */
    if (wait < 22 * 3600 || wait > 24 * 3600)
        fail_msg("next_at %ld s after the cycle, expected the window's next start", wait);
    assert_true(s.measures > 0);
    state_free(&st);
}

/* After tuner_recover: whether the start keeps the state file's schedule
 * (true), with the timer then armed for next_at (*left: seconds until
 * it fires) and the status and the journal saying so; nothing measured. */
static bool keeps_schedule(struct fix *f, struct sim *s, double *left)
{
    struct world w = {&sim_ops, s};
    struct tuner *t;
    struct seen sn;
    struct err e;
    bool kept, told = false;

    sim_init(s, &f->o);
    s->ev = new_loop();
    seen_begin(&sn);
    assert_int_equal(tuner_new_in(s->ev, &f->o, &w, &t, &e), 0);
    assert_int_equal(tuner_recover(t, &e), 0);
    kept = tuner_keep_schedule(t);
    *left = kept ? timer_left(t, s) : -1;
    for (int i = 0; i < sn.n; i++)
        told |= strstr(sn.line[i], "last cycle at ") != NULL &&
                strstr(sn.line[i], "as scheduled") != NULL;
    seen_end(&sn);
    assert_int_equal(told, kept);
    if (kept) {
        assert_non_null(strstr(tuner_status(t), "as scheduled; last cycle at "));
        assert_int_equal(strncmp(tuner_status(t), "idle: next cycle at ", 20), 0);
    }
    assert_int_equal(s->facts_calls, 0);
    done_with(t, s);
    return kept;
}

static void set_next_at(struct fix *f, long next_at, bool hold)
{
    struct state st;

    load_state(f, &st);
    st.next_at = next_at;
    st.hold = hold;
    state_set_str(&st.hold_reason, hold ? "by request" : NULL);
    assert_int_equal(state_save(f->state_dir, &st, NULL), 0);
    state_free(&st);
}

/* A restart (boot, upgrade, Restart=) keeps the schedule of the state
 * file: the first cycle waits for next_at and the journal and status say
 * so. It starts at once without a state file, with next_at passed, with
 * one further than an interval away (the clock or the interval changed),
 * and while holding off. */
static void test_restart_keeps_the_schedule(void **state)
{
    long now = (long)time(NULL);
    struct fix *f = *state;
    double left;
    struct sim s;

    f->o.once = false;
    f->o.interval_s = 3600;
    /* a fresh state directory: now */
    assert_false(keeps_schedule(f, &s, &left));
    done_with(one_cycle(f, &s), &s);
    /* the cycle just ended: the next in an hour */
    assert_true(keeps_schedule(f, &s, &left));
    assert_true(left > 3590 && left <= 3600);
    set_next_at(f, now + 600, false);
    assert_true(keeps_schedule(f, &s, &left));
    assert_true(left > 590 && left <= 600);
    /* passed, further than an interval, holding off: now */
    set_next_at(f, now - 10, false);
    assert_false(keeps_schedule(f, &s, &left));
    set_next_at(f, now + 7200, false);
    assert_false(keeps_schedule(f, &s, &left));
    set_next_at(f, now + 600, true);
    assert_false(keeps_schedule(f, &s, &left));
    /* with a window, as far as its start after an interval (2 h away),
     * not further */
    {
        char *was = tz_set("UTC0");
        long opens = now - now % 60 + 120 * 60;

        f->o.window_start = (int)(opens % 86400 / 60);
        f->o.window_end = (f->o.window_start + 60) % 1440;
        set_next_at(f, opens, false);
        assert_true(keeps_schedule(f, &s, &left));
        set_next_at(f, opens + 3600, false);
        assert_false(keeps_schedule(f, &s, &left));
        tz_restore(was);
    }
}

/* A commit written and not yet checked (a run killed between its write
 * and the check), as its record and the file have it: the value. */
static char *plant_pending_commit(struct fix *f)
{
    struct smbconf_change ch = {.expect = LEGACY, .rcvbuf = 262144, .sndbuf = 262144};
    struct smbconf_result res;
    struct smbconf_plan pl;
    struct state st;
    struct err e;
    char *v;

    assert_int_equal(smbconf_prepare(f->conf, f->state_dir, &ch, &pl, &res, &e), 0);
    assert_int_equal(smbconf_write(&pl, &res, &e), 0);
    smbconf_plan_free(&pl);
    load_state(f, &st);
    st.pending = st.pending_commit = true;
    assert_int_equal(smbconf_edit_copy(&res.edit, &st.pending_edit), 0);
    assert_int_equal(state_save(f->state_dir, &st, NULL), 0);
    state_free(&st);
    v = strdup(res.new_value);
    smbconf_result_free(&res);
    return v;
}

/* An admin adds a socket options line of their own below an unchecked
 * commit's, seen by the check (a testparm that adds it before it reads):
 * ours goes back to what it replaced, theirs stands, and the daemon holds
 * off. The take-back was counted as a plain one: no hold, the record gone. */
static void test_commit_check_meets_a_line_below(void **state)
{
    struct fix *f = *state;
    char *v = plant_pending_commit(f), wrapper[400], *after, want[256];
    struct state st;

    snprintf(wrapper, sizeof(wrapper), "%s/testparm-adds", f->dir);
    write_script(wrapper,
                 "grep -q '^   socket options = " HAND "' '%s' ||\n"
                 "  sed -i '/socket options/a\\   socket options = " HAND "' '%s'\n"
                 "exec testparm \"$@\"\n",
                 f->conf, f->conf);
    assert_int_equal(setenv("SMBTUNED_TESTPARM", wrapper, 1), 0);
    recover(f);
    assert_int_equal(unsetenv("SMBTUNED_TESTPARM"), 0);
    after = read_all(f->conf);
    snprintf(want, sizeof(want), "   socket options = %s\n   socket options = %s\n", LEGACY, HAND);
    if (strstr(after, want) == NULL)
        fail_msg("the commit %s was not taken back under the admin's line:\n%s", v, after);
    load_state(f, &st);
    assert_true(st.hold);
    assert_false(st.pending);
    state_free(&st);
    free(after);
    free(v);
}

/* An unchecked commit in a file the parse now refuses (an admin's relative
 * include): testparm still reads it as written, so it is kept, as README
 * says of a commit a killed run left. It was taken back. */
static void test_commit_kept_in_a_refused_file(void **state)
{
    struct fix *f = *state;
    char *v = plant_pending_commit(f), *after;
    struct state st;
    FILE *c;

    c = fopen(f->conf, "a");
    assert_non_null(c);
    fputs("[other]\n   include = local.conf\n", c);
    assert_int_equal(fclose(c), 0);
    recover(f);
    after = read_all(f->conf);
    if (strstr(after, v) == NULL)
        fail_msg("the commit %s is gone:\n%s", v, after);
    load_state(f, &st);
    assert_false(st.pending);
    assert_non_null(st.last_written);
    assert_string_equal(st.last_written, v);
    state_free(&st);
    free(after);
    free(v);
}

/* A commit a killed run left, found at a start outside the time window
 * with restart_smbd = yes: the record's pending_restart (the search's
 * decision, format 7) decides. Recorded as needing smbd restarted, it is
 * taken back, though nothing here shows an explicit size in smbd's
 * listener (no smbd runs: asked, the kernel would say keep it); recorded
 * as needing none, it is kept, and smbd is not restarted (no system bus
 * here: a restart would fail and say so). Before the record, both were
 * asked of the kernel. */
static void test_start_goes_by_the_recorded_restart(void **state)
{
    struct fix *f = *state;
    char *was = tz_set("UTC0"), *v, *after;
    struct state st;
    int i;

    f->o.once = false;
    f->o.restart_smbd = true;
    /* closed: it opens in an hour */
    f->o.window_start = minute_from_now(60);
    f->o.window_end = minute_from_now(120);
    for (i = 0; i < 2; i++) {
        long restart = i == 0 ? STATE_RESTART_YES : STATE_RESTART_NO;

        v = plant_pending_commit(f);
        load_state(f, &st);
        st.pending_restart = restart;
        assert_int_equal(state_save(f->state_dir, &st, NULL), 0);
        state_free(&st);
        recover(f);
        after = conf_value(f);
        if (strcmp(after, restart == STATE_RESTART_YES ? LEGACY : v) != 0)
            fail_msg("pending_restart %ld: the line after the start is %s (the commit: %s)",
                     restart, after, v);
        load_state(f, &st);
        assert_false(st.pending);
        assert_int_equal(st.pending_restart, STATE_RESTART_UNKNOWN);
        if (restart == STATE_RESTART_NO)
            assert_string_equal(st.last_written, v);
        state_free(&st);
        free(after);
        free(v);
    }
    tz_restore(was);
}

/* Leaves the loop at the second cycle's idle words. */
static void exit_at_second_idle(void *ud, const char *status)
{
    struct sim *s = ud;

    if (strncmp(status, "idle: ", 6) == 0 && ++s->idles == 2)
        sd_event_exit(s->ev, 0);
}

/* A commit of autotuning whose restart of smbd fails (no system bus here:
 * the call fails, as with smbd.service masked or D-Bus down): without the
 * restart smbd's listener keeps the old sizes while the line reads as
 * autotuning, and no later search would write that line again and
 * restart smbd. So the job takes it back at once, the cycle says so and
 * fails, and until a reload the next search chooses among explicit sizes
 * (no restart is tried again). A commit a killed run left, whose restart
 * fails at the start's check, goes back as well. */
static void test_a_failed_restart_is_taken_back(void **state)
{
    struct fix *f = *state;
    char *was = tz_set("UTC0"), *v, *first = NULL;
    struct seen sn;
    struct tuner *t;
    struct state st;
    struct sim s;
    struct err e;
    struct world w = {&sim_ops, &s};
    bool kept_back, said_why, said_fallback, one_try, reloaded;

    restart_world(f, &s);
    s.ev = new_loop();
    seen_begin(&sn);
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &t, &e), 0);
    tuner_on_status(t, exit_at_second_idle, &s);
    assert_int_equal(tuner_recover(t, &e), 0);
    tuner_kick(t);
    assert_int_equal(sd_event_loop(s.ev), 0);
    /* systemctl status says so between cycles */
    assert_non_null(strstr(tuner_status(t), " (restarts of smbd off until a reload), "));
    /* a reload with restart_smbd on: autotuning is a candidate again */
    reloaded = t->converged && t->o.restart_off && !t->o.restart_smbd;
    tuner_set_opts(t, &f->o);
    reloaded = reloaded && !t->converged && !t->o.restart_off && t->o.restart_smbd;
    done_with(t, &s);
    tz_restore(was);
    kept_back = seen_count(&sn, JOURNAL_ID_TAKE_BACK) == 1;
    said_why = seen_said(&sn, "smbd could not be restarted for the change");
    said_fallback = seen_said(&sn, "until `systemctl reload smbtuned`, which searches again, "
                                   "smbtuned chooses among explicit sizes");
    one_try = true;
    for (int i = 0, n = 0; i < sn.n; i++)
        if (strstr(sn.line[i], "smbd could not be restarted for the change") && ++n > 1)
            one_try = false;
    for (int i = 0; i < sn.n && first == NULL; i++)
        if (strstr(sn.line[i], "socket options: " LEGACY " -> "))
            first = strdup(sn.line[i]);
    seen_end(&sn);
    /* the one commit: the second cycle's explicit size (the one that
     * failed is no commit) */
    if (!kept_back || !said_why || !said_fallback || !one_try || !reloaded || first == NULL ||
        strstr(first, "SO_RCVBUF=") == NULL)
        fail_msg("take-back %d, why %d, fallback %d, one try %d, reload %d, the commit %s",
                 kept_back, said_why, said_fallback, one_try, reloaded, first ? first : "(none)");
    free(first);
    /* the second cycle's search: an explicit size, smbd told */
    v = conf_value(f);
    if (strstr(v, "SO_RCVBUF=") == NULL || strcmp(v, LEGACY) == 0)
        fail_msg("after the second cycle: %s", v);
    free(v);
    load_state(f, &st);
    assert_false(st.pending);
    state_free(&st);

    /* a start, restart_smbd on again: the reference was measured under
     * the fallback's mark, so it searches again rather than verify */
    was = tz_set("UTC0");
    sim_init(&s, &f->o);
    s.smbd_running = true;
    s.auto_share = 1.3;
    seen_begin(&sn);
    t = cycle_in(f, &s);
    done_with(t, &s);
    tz_restore(was);
    said_fallback = seen_said(&sn, "search before the restart: searching again");
    seen_end(&sn);
    assert_true(said_fallback);

    /* a commit a killed run left, recorded as needing the restart */
    was = tz_set("UTC0");
    write_conf(f, LEGACY);
    v = plant_pending_commit(f);
    free(v);
    load_state(f, &st);
    st.pending_restart = STATE_RESTART_YES;
    assert_int_equal(state_save(f->state_dir, &st, NULL), 0);
    state_free(&st);
    seen_begin(&sn);
    recover(f);
    tz_restore(was);
    said_fallback = seen_said(&sn, "until `systemctl reload smbtuned`");
    seen_end(&sn);
    assert_true(said_fallback);
    v = conf_value(f);
    assert_string_equal(v, LEGACY);
    free(v);
    load_state(f, &st);
    assert_false(st.pending);
    state_free(&st);
}

/* A stop with a commit recorded as needing smbd restarted (its write met
 * the window shut, and the cycle's take-back had not run yet): outside
 * the window it is taken back at once, as the next start would take it
 * (a run stopped for good leaves none). Inside the window, recorded as
 * needing no restart, or with restart_smbd off, it stays recorded for
 * the next start to check, as a stop waits for no testparm. */
static void test_stop_takes_back_a_late_commit(void **state)
{
    struct fix *f = *state;
    static const struct {
        bool shut;
        long restart;
        bool restart_smbd, back;
    } cases[] = {{true, STATE_RESTART_YES, true, true},
                 {false, STATE_RESTART_YES, true, false},
                 {true, STATE_RESTART_NO, true, false},
                 {true, STATE_RESTART_YES, false, false}};
    char *was = tz_set("UTC0"), *v, *after;
    struct state st;

    f->o.once = false;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sd_event *ev = new_loop();
        struct owned *w;

        f->o.restart_smbd = cases[i].restart_smbd;
        /* shut: it opens in an hour; open: for an hour either side */
        f->o.window_start = minute_from_now(cases[i].shut ? 60 : -60);
        f->o.window_end = minute_from_now(cases[i].shut ? 120 : 60);
        v = plant_pending_commit(f);
        load_state(f, &st);
        st.pending_restart = cases[i].restart;
        assert_int_equal(state_save(f->state_dir, &st, NULL), 0);
        assert_int_equal(owned_new(ev, &f->o, &st, &w), 0);
        owned_take_back_now(w, true);
        owned_free(w);
        sd_event_unref(ev);
        state_free(&st);
        after = conf_value(f);
        load_state(f, &st);
        if (strcmp(after, cases[i].back ? LEGACY : v) != 0 || st.pending == cases[i].back)
            fail_msg("case %zu: the line after the stop is %s, pending %d (the commit: %s)", i,
                     after, st.pending, v);
        state_free(&st);
        free(after);
        free(v);
        if (!cases[i].back) {
            /* the record a start settles, and the legacy line again */
            recover(f);
            write_conf(f, LEGACY);
        }
    }
    tz_restore(was);
}

/* The edit job records the search's decision with the commit, before the
 * write: a testparm that copies the state file while the commit is
 * pending sees pending_restart yes for a commit that restarts smbd, no
 * for one that only tells it, unknown (0) for a trial. */
static void test_commit_records_its_restart(void **state)
{
    struct fix *f = *state;
    static const struct {
        enum owned_kind kind;
        bool restart;
        long want;
    } cases[] = {{OWNED_COMMIT, true, STATE_RESTART_YES},
                 {OWNED_COMMIT, false, STATE_RESTART_NO},
                 {OWNED_TRIAL, false, STATE_RESTART_UNKNOWN}};
    char wrapper[400], seen[400], *text;

    f->o.restart_smbd = true;
    snprintf(seen, sizeof(seen), "%s/state-seen", f->dir);
    snprintf(wrapper, sizeof(wrapper), "%s/testparm-copies", f->dir);
    write_script(wrapper,
                 "grep -q '^pending yes' '%s/state' && cp '%s/state' '%s'\n"
                 "exec testparm \"$@\"\n",
                 f->state_dir, f->state_dir, seen);
    assert_int_equal(setenv("SMBTUNED_TESTPARM", wrapper, 1), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sd_event *ev = new_loop();
        struct state st, got;
        struct owned *o;
        struct err e;
        char *cur = conf_value(f);
        long size = 131072 << i;
        int r = 1;

        unlink(seen);
        load_state(f, &st);
        assert_int_equal(owned_new(ev, &f->o, &st, &o), 0);
        assert_int_equal(owned_put(o, cur, (struct search_config){size, SEARCH_AUTO}, cases[i].kind,
                                   cases[i].restart, put_done, &r),
                         0);
        while (r == 1)
            assert_true(sd_event_run(ev, UINT64_MAX) >= 0);
        if (cases[i].kind == OWNED_TRIAL)
            owned_take_back_now(o, false);
        owned_free(o);
        sd_event_unref(ev);
        state_free(&st);
        free(cur);
        text = read_all(seen);
        memset(&got, 0, sizeof(got));
        assert_int_equal(state_parse(text, strlen(text), "state-seen", &got, &e), 0);
        if (!got.pending || got.pending_commit != (cases[i].kind == OWNED_COMMIT) ||
            got.pending_restart != cases[i].want)
            fail_msg("case %zu: pending %d, pending_commit %d, pending_restart %ld (expected "
                     "%ld)",
                     i, got.pending, got.pending_commit, got.pending_restart, cases[i].want);
        state_free(&got);
        free(text);
    }
    assert_int_equal(unsetenv("SMBTUNED_TESTPARM"), 0);
}

/* The loop's first facts call, after the cycle's settling step: the
 * run ends there. */
static void exit_at_facts(struct sim *s, int call, void *ud)
{
    (void)call;
    (void)ud;
    sd_event_exit(s->ev, 0);
}

/* An unchecked commit whose start-up check finds the edit lock busy (an
 * `smbtuned --set-buffers` at that moment) stays on record; the running
 * daemon's next cycle confirms it in its settling step, in a job, and
 * keeps it: the commit event says so, and nothing is taken back. */
static void test_settling_step_keeps_an_unchecked_commit(void **state)
{
    struct fix *f = *state;
    char *v = plant_pending_commit(f), *after, lock[400];
    struct world w;
    struct state st;
    struct tuner *t;
    struct seen sn;
    struct err e;
    struct sim s;
    double t0;
    int held;

    f->o.once = false;
    sim_init(&s, &f->o);
    s.on_facts = exit_at_facts;
    w = (struct world){&sim_ops, &s};
    s.ev = new_loop();
    seen_begin(&sn);
    assert_int_equal(tuner_new_in(s.ev, &f->o, &w, &t, &e), 0);
    /* the start's check waits for the lock (10 s) and leaves the record */
    snprintf(lock, sizeof(lock), "%s/smbconf.lock", f->state_dir);
    held = files_lock(lock, 0, NULL);
    assert_true(held >= 0);
    assert_int_equal(tuner_recover(t, &e), 0);
    close(held);
    load_state(f, &st);
    assert_true(st.pending);
    state_free(&st);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_COMMIT), 0);
    /* the running daemon's cycle (a settling step that failed would try
     * again at every cycle, and never reach the facts: bounded) */
    tuner_kick(t);
    t0 = child_now();
    while (sd_event_get_state(s.ev) != SD_EVENT_FINISHED && child_now() - t0 < 60)
        assert_true(sd_event_run(s.ev, 100000) >= 0);
    assert_int_equal(sd_event_get_state(s.ev), SD_EVENT_FINISHED);
    tuner_free(t);
    s.ev = sd_event_unref(s.ev);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_COMMIT), 1);
    assert_int_equal(seen_count(&sn, JOURNAL_ID_TAKE_BACK), 0);
    seen_end(&sn);
    after = conf_value(f);
    assert_string_equal(after, v);
    load_state(f, &st);
    assert_false(st.pending);
    assert_false(st.hold);
    assert_non_null(st.last_written);
    assert_string_equal(st.last_written, v);
    state_free(&st);
    free(after);
    free(v);
}

/* A run killed with a live trial in smb.conf: the restart settles it
 * (tuner_recover) and starts a cycle at once, whatever next_at says. */
static void test_restart_after_a_cut_cycle_starts_at_once(void **state)
{
    struct fix *f = *state;
    bool pending = false;
    struct state st;
    double left;
    struct sim s;

    /* the small search of test_kill_between_any_two_steps */
    f->o.trials = TUNER_LIVE;
    f->o.search.tied = true;
    f->o.search.min_size = 65536;
    f->o.search.max_rcvbuf = f->o.search.max_sndbuf = 1048576;
    /* kill at each step until one leaves a live trial pending */
    for (int at = 1; at < 40 && !pending; at++) {
        run_killed_at(f, &s, at);
        memset(&st, 0, sizeof(st));
        if (state_load(f->state_dir, &st, NULL) == 0)
            pending = st.pending && !st.pending_commit;
        state_free(&st);
    }
    assert_true(pending);
    f->o.once = false;
    f->o.interval_s = 3600;
    load_state(f, &st);
    st.cycle_at = (long)time(NULL) - 60;
    st.next_at = st.cycle_at + 1800;
    assert_int_equal(state_save(f->state_dir, &st, NULL), 0);
    state_free(&st);
    assert_false(keeps_schedule(f, &s, &left));
    load_state(f, &st);
    assert_false(st.pending);
    state_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_once_commits_the_knee, setup, teardown),
        cmocka_unit_test_setup_teardown(test_once_tells_its_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_once_one_decision_an_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_status_cut_at_a_word, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_tells_before_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_probe_tells_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auto_check_ends_far_below, setup, teardown),
        cmocka_unit_test_setup_teardown(test_once_commits_auto_when_best, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loopback_keeps_autotuning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_trials_here_keep_autotuning, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loopback_legacy_commits_auto, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_clients_steer_loopback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_clients_watch_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_clients_steer_a_new_search, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_clients_before_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_advise_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_trials_refused_when_the_probe_left, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_live_cycle_keeps_the_admin_bytes_in_backup, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kill_between_any_two_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hand_edit_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edit_during_a_keeping_search_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edit_during_a_search_stopped_early_holds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_read_waits_on_a_hung_include_in_a_job, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_line_added_below_a_live_trial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_check_meets_a_line_below, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_kept_in_a_refused_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settling_step_keeps_an_unchecked_commit, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_refused_line_added_below_a_live_trial, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_live_trial_reworded_by_hand, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_trial_set_back_to_the_original_by_hand, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_live_trial_set_to_an_earlier_trial_by_hand, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stop_during_our_take_back_holds_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_resume_during_the_holding_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_after_an_edit_not_yet_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_searches_from_the_line_in_force, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_drift_searches_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_facts_skip_the_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_cycle_says_what_it_was_doing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_status_after_a_failed_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_keeps_verifying, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unread_state_not_saved_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_sees_a_drift_made_while_down, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_keeps_the_refined_reference, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_with_other_settings_searches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busy_rate_defers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_told_after_a_deferred_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upgrade_with_rates_of_an_older_probe_compares_nothing,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_with_rates_of_an_older_probe_searches, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_loopback_keeps_no_reference_of_another_line, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reload_with_other_settings_searches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_advise_verifies_its_advice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_advise_restart_verifies_its_advice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_advise_restart_after_the_line_changed_searches, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_advise_restart_drift_searches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_advise_search_after_a_restart_drops_the_advice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_advise_restored_meets_an_edit_and_a_reload, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_advise_restart_in_tune_mode_searches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verified_words_name_the_winner, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clients_seen_by_the_search_do_not_steer_again, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_tied_from_one_size_keeps_the_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_replay_that_alarms_searches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_status_says_whose_rates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_defers_to_its_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_closing_ends_the_search, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_restart_after_the_window_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_failed_restart_is_taken_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_job_refuses_a_restart_after_the_window, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_busy_rate_stops_a_search, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_goes_by_the_recorded_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commit_records_its_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_takes_back_a_late_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_next_cycle_outside_the_window_moves_to_its_start,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_keeps_the_schedule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restart_after_a_cut_cycle_starts_at_once, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
