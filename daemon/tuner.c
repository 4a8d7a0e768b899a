/* tuner: see tuner.h. */
#include "tuner.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "journal.h"
#include "jsonw.h"
#include "kernel.h"
#include "smbconf.h"
#include "smbd.h"
#include "sockopts.h"
#include "state.h"
#include "trial.h"
#include "verify.h"

/* A shadow smbd must serve within this; a healthy one takes about 1 s. */
#define SHADOW_READY_S 30.0
/* How long the busy check watches the clients' traffic. */
#define BUSY_SAMPLE_S 1.0
/* Samples of AUTO taken after a search that could not offer it. */
#define AUTO_CHECKS 3
/* Configurations whose means the report keeps. */
#define MAX_SEEN 128

enum phase { IDLE, BUSY_CHECK, SEARCHING, AUTO_CHECK, VERIFYING };

/* What the samples of one configuration add up to (for the report). */
struct seen {
    struct search_config c;
    double w, r;
    int nw, nr;
};

struct tuner {
    sd_event *ev;
    struct tuner_opts o;
    struct state st;
    enum phase phase;
    sd_event_source *timer;
    bool failed;
    char status[256];

    /* the cycle */
    char *value0; /* socket options in force when it began */
    struct search_config inc0;
    bool converged;   /* s holds a converged search (verify mode) */
    struct search *s; /* this cycle's search, or the last one's */
    struct verify *v; /* watches s's winner once converged, NULL before */
    long long bytes;  /* moved by this cycle's probes */
    int samples;
    double started;
    struct seen seen[MAX_SEEN];
    int nseen;
    struct kernel_sock_bytes *busy0; /* client connections at the busy check's start */
    size_t nbusy0;
    int smb_port;                    /* production smbd's first port, 0 unknown */
    long kcap[2], kmin[2];           /* [SOCKOPTS_RCVBUF], [SOCKOPTS_SNDBUF]: the kernel's cap
                                      * (rmem_max, wmem_max) and smallest buffer */
    bool listener_rcv, listener_snd; /* its listener hands out explicit sizes */
    bool research;                   /* a verification sample asked for a new search */
    bool auto_blocked;               /* AUTO left out of the search: it cannot work yet */
    int auto_checks;                 /* AUTO samples taken for the report since */
    char fp_change[512];             /* fingerprint change, told with the first sample */

    /* where the trial runs */
    struct trial_shadow shadow;
    bool shadow_up;
    struct search_config shadow_cfg;
    char *live_value; /* value a live trial put in smb.conf, if any */

    /* the probe on the way */
    struct probe_job job;
    bool probing;
    struct search_config probe_cfg;
    bool probe_dirty;     /* a probe was killed: its file may be in the share */
    bool probe_cut;       /* its deadline was cut short for a poor trial (abort_ratio) */
    char probe_url[2048]; /* what it measures: the target, or a shadow smbd's port */
    sd_event_source *probe_io, *probe_timer;
    unsigned seq;
};

static void step(struct tuner *t);
static void cycle_end(struct tuner *t, bool ok);
static void cycle_search(struct tuner *t);

static const char *cfg_str(struct search_config c, char *buf, size_t len)
{
    char a[32], b[32];

    snprintf(buf, len, "SO_RCVBUF %s SO_SNDBUF %s", search_size_str(c.rcvbuf, a, sizeof(a)),
             search_size_str(c.sndbuf, b, sizeof(b)));
    return buf;
}

static bool cfg_eq(struct search_config a, struct search_config b)
{
    return a.rcvbuf == b.rcvbuf && a.sndbuf == b.sndbuf;
}

static void set_status(struct tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_status(struct tuner *t, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(t->status, sizeof(t->status), fmt, ap);
    va_end(ap);
}

const char *tuner_status(const struct tuner *t)
{
    return t->status;
}

int tuner_exit_code(const struct tuner *t)
{
    return t->failed ? 1 : 0;
}

void tuner_set_opts(struct tuner *t, const struct tuner_opts *o)
{
    t->o = *o;
}

bool tuner_busy(const struct tuner *t)
{
    return t->phase != IDLE || t->probing;
}

/* socket options value with the buffers of c, the other tokens of base. */
static char *value_with(const char *base, struct search_config c)
{
    struct sockopts so;
    char *v = NULL;

    if (sockopts_parse(base, &so) < 0)
        return NULL;
    if (sockopts_set(&so, SOCKOPTS_RCVBUF, c.rcvbuf) == 0 &&
        sockopts_set(&so, SOCKOPTS_SNDBUF, c.sndbuf) == 0)
        v = sockopts_format(&so);
    sockopts_free(&so);
    return v;
}

/* Where the search starts for one buffer of the value in force: what the
 * kernel really does with what smbd passes it (sockopts_kernel). An absent
 * token is AUTO. Any explicit size, 0 included, turns autotuning off: a
 * size the kernel raises to its minimum starts from 1, the smallest
 * request, which it raises the same way (so the incumbent measured on a
 * shadow is the buffer production has); a negative size, or one at or over
 * the cap, from the cap; any other from itself. */
static long start_of(const struct tuner *t, struct sockopts_size z, enum sockopts_buf which)
{
    struct sockopts_kernel k;

    if (!z.present)
        return SEARCH_AUTO;
    k = sockopts_kernel(z.value, t->kcap[which], t->kmin[which]);
    return k.effect == SOCKOPTS_AT_MIN ? 1 : k.request;
}

static struct search_config config_of_value(const struct tuner *t, const char *v)
{
    struct sockopts so;
    struct search_config c = {SEARCH_AUTO, SEARCH_AUTO};

    if (sockopts_parse(v, &so) == 0) {
        c.rcvbuf = start_of(t, sockopts_get(&so, SOCKOPTS_RCVBUF), SOCKOPTS_RCVBUF);
        c.sndbuf = start_of(t, sockopts_get(&so, SOCKOPTS_SNDBUF), SOCKOPTS_SNDBUF);
        sockopts_free(&so);
    }
    return c;
}

/* The kernel's buffer limits, for start_of. Unreadable caps: the
 * configured maximum stands in (the search is bounded by it anyway); an
 * unknown minimum: 0, so that only 0 counts as at the minimum. */
static void kernel_facts(struct tuner *t)
{
    struct err e;

    if (kernel_buffer_caps(&t->kcap[SOCKOPTS_RCVBUF], &t->kcap[SOCKOPTS_SNDBUF], &e) < 0) {
        t->kcap[SOCKOPTS_RCVBUF] = t->o.search.max_rcvbuf;
        t->kcap[SOCKOPTS_SNDBUF] = t->o.search.max_sndbuf;
    }
    if (kernel_buffer_mins(&t->kmin[SOCKOPTS_RCVBUF], &t->kmin[SOCKOPTS_SNDBUF], &e) < 0) {
        journal_log(LOG_WARNING, "%s", e.msg);
        t->kmin[SOCKOPTS_RCVBUF] = t->kmin[SOCKOPTS_SNDBUF] = 0;
    }
}

/* Nothing is left to undo or confirm. */
static void pending_clear(struct tuner *t)
{
    t->st.pending = false;
    t->st.pending_commit = false;
    smbconf_edit_free(&t->st.pending_edit);
}

static void save_state(struct tuner *t)
{
    struct err e;

    if (state_save(t->o.state_dir, &t->st, &e) < 0)
        journal_log(LOG_ERR, "%s", e.msg);
}

/* ---- the report ---- */

static struct seen *seen_of(struct tuner *t, struct search_config c)
{
    for (int i = 0; i < t->nseen; i++)
        if (cfg_eq(t->seen[i].c, c))
            return &t->seen[i];
    if (t->nseen == MAX_SEEN)
        return NULL;
    t->seen[t->nseen] = (struct seen){.c = c};
    return &t->seen[t->nseen++];
}

/* The write rate of a configuration is the mean over the samples that had
 * the buffer the write ranks (server side SO_RCVBUF, the probe's client
 * socket SO_SNDBUF), whatever the other buffer was: the search assumes the
 * other does not matter to it, and the pair it ends at may never have been
 * measured as such. Likewise the read rate. */
static double mean_rate(const struct tuner *t, struct search_config c, bool write)
{
    bool rcv = write == (t->o.trials != TUNER_CLIENT);
    double sum = 0;
    int n = 0;

    for (int i = 0; i < t->nseen; i++) {
        const struct seen *sn = &t->seen[i];

        if ((rcv ? sn->c.rcvbuf != c.rcvbuf : sn->c.sndbuf != c.sndbuf))
            continue;
        sum += write ? sn->w : sn->r;
        n += write ? sn->nw : sn->nr;
    }
    return n > 0 ? sum / n : NAN;
}

static double mean_w(const struct tuner *t, struct search_config c)
{
    return mean_rate(t, c, true);
}

static double mean_r(const struct tuner *t, struct search_config c)
{
    return mean_rate(t, c, false);
}

static void json_num(FILE *f, double v)
{
    if (isnan(v))
        fputs("null", f);
    else
        fprintf(f, "%.3f", v);
}

/* A buffer of a value as --show gives it: the int smbd passes, "auto"
 * (null in JSON) only when no token names it. */
static const char *value_size_str(const char *value, enum sockopts_buf which, bool json, char *buf,
                                  size_t len)
{
    struct sockopts so;
    struct sockopts_size z = {0};

    if (sockopts_parse(value, &so) == 0) {
        z = sockopts_get(&so, which);
        sockopts_free(&so);
    }
    if (z.present)
        snprintf(buf, len, "%d", z.value);
    else
        snprintf(buf, len, "%s", json ? "null" : "auto");
    return buf;
}

static void json_side(FILE *f, const char *value, double w, double r)
{
    char b[32];

    fputs("{\"value\":", f);
    jsonw_string(f, value);
    fprintf(f, ",\"rcvbuf\":%s", value_size_str(value, SOCKOPTS_RCVBUF, true, b, sizeof(b)));
    fprintf(f, ",\"sndbuf\":%s", value_size_str(value, SOCKOPTS_SNDBUF, true, b, sizeof(b)));
    fputs(",\"write_mbps\":", f);
    json_num(f, w);
    fputs(",\"read_mbps\":", f);
    json_num(f, r);
    fputc('}', f);
}

static void report(struct tuner *t, const char *after, struct search_config rated, bool committed,
                   const char *what)
{
    double w0 = mean_w(t, t->inc0), r0 = mean_r(t, t->inc0);
    double w1 = mean_w(t, rated), r1 = mean_r(t, rated);
    char a[32], b[32];

    if (!t->o.once)
        return;
    if (t->o.json) {
        fputs("{\"before\":", stdout);
        json_side(stdout, t->value0, w0, r0);
        fputs(",\"after\":", stdout);
        json_side(stdout, after, w1, r1);
        printf(",\"committed\":%s,\"mode\":\"%s\",\"samples\":%d,\"bytes\":%lld,\"seconds\":%.1f,"
               "\"result\":",
               committed ? "true" : "false", t->o.mode == TUNER_TUNE ? "tune" : "advise",
               t->samples, t->bytes, child_now() - t->started);
        jsonw_string(stdout, what);
        fputs("}\n", stdout);
        return;
    }
    printf("\nsocket options\n  before  %s\n  %-6s  %s\n\n", t->value0,
           committed ? "after" : "best", after);
    printf("%-12s %12s %12s\n", "", "before", committed ? "after" : "best");
    printf("%-12s %12s %12s\n", "SO_RCVBUF",
           value_size_str(t->value0, SOCKOPTS_RCVBUF, false, a, sizeof(a)),
           value_size_str(after, SOCKOPTS_RCVBUF, false, b, sizeof(b)));
    printf("%-12s %12s %12s\n", "SO_SNDBUF",
           value_size_str(t->value0, SOCKOPTS_SNDBUF, false, a, sizeof(a)),
           value_size_str(after, SOCKOPTS_SNDBUF, false, b, sizeof(b)));
    printf("%-12s %12.2f %12.2f\n", "write MB/s", w0, w1);
    printf("%-12s %12.2f %12.2f\n", "read MB/s", r0, r1);
    printf("\n%s\n%d samples, %.1f MB moved, %.0f s\n", what, t->samples, t->bytes / 1e6,
           child_now() - t->started);
}

/* ---- where a trial runs ---- */

static void shadow_down(struct tuner *t)
{
    struct err e;

    if (!t->shadow_up)
        return;
    if (trial_shadow_stop(&t->shadow, &e) < 0)
        journal_log(LOG_WARNING, "stopping the shadow smbd: %s", e.msg);
    t->shadow_up = false;
}

static char *shadow_base(const struct tuner *t)
{
    char *b;

    return asprintf(&b, "%s/shadow", t->o.state_dir) < 0 ? NULL : b;
}

/* Record an edit in the state file before it reaches the disk (struct
 * smbconf_change's hook): a trial, which a restart takes back, or a
 * commit, which it keeps. */
static int record(struct tuner *t, const struct smbconf_edit *ed, bool commit)
{
    struct smbconf_edit next;
    struct err e;
    int r;

    if (t->st.pending && !t->st.pending_commit)
        /* a later value (trial or commit) replaces a trial: one record
         * undoes both, from either step (smbconf_edit_chain) */
        r = smbconf_edit_chain(&t->st.pending_edit, ed, &next);
    else
        r = smbconf_edit_copy(ed, &next);
    if (r < 0)
        return r;
    smbconf_edit_free(&t->st.pending_edit);
    t->st.pending_edit = next;
    t->st.pending = true;
    t->st.pending_commit = commit;
    r = state_save(t->o.state_dir, &t->st, &e);
    if (r < 0)
        journal_log(LOG_ERR, "%s", e.msg);
    return r;
}

static int record_trial(const struct smbconf_edit *ed, void *ctx)
{
    return record(ctx, ed, false);
}

static int record_commit(const struct smbconf_edit *ed, void *ctx)
{
    return record(ctx, ed, true);
}

/* Our line was changed by someone else: theirs stands, we hold off. */
static void hold(struct tuner *t, const char *why)
{
    journal_log(LOG_WARNING, "%s", why);
    journal_log(LOG_WARNING, "hands off smb.conf until `smbtuned --resume`");
    t->st.hold = true;
    state_set_str(&t->st.hold_reason, why);
    pending_clear(t);
    save_state(t);
}

/* Put the value of a live trial into smb.conf and make smbd take it. */
static int live_put(struct tuner *t, struct search_config c)
{
    const char *now = t->live_value ? t->live_value : t->value0;
    struct smbconf_change ch = {.expect = now,
                                .rcvbuf = c.rcvbuf,
                                .sndbuf = c.sndbuf,
                                .before_write = record_trial,
                                .ctx = t};
    struct smbconf_result res;
    struct err e;
    int r;

    r = smbconf_set_buffers(t->o.smb_conf, t->o.state_dir, &ch, &res, &e);
    if (r == -ECANCELED) {
        hold(t, e.msg);
        smbconf_result_free(&res);
        return r;
    }
    if (r < 0) {
        journal_log(LOG_ERR, "live trial: %s", e.msg);
        smbconf_result_free(&res);
        return r;
    }
    free(t->live_value);
    t->live_value = res.new_value;
    res.new_value = NULL;
    smbconf_result_free(&res);
    if (apply_run(t->o.apply == APPLY_NONE ? APPLY_SMBCONTROL : t->o.apply, t->o.smb_conf, &e) <
        0) {
        journal_log(LOG_ERR, "live trial: %s", e.msg);
        return -ESRCH;
    }
    return 0;
}

/* Whether the line in force is the one the pending edit wrote. */
static bool pending_on_disk(struct tuner *t)
{
    const struct smbconf_edit *ed = &t->st.pending_edit;
    const char *line = ed->written + ed->line_off;
    struct smbconf c;
    struct err e;
    bool on;

    if (smbconf_load(&c, t->o.smb_conf, &e) < 0)
        return false;
    on = c.found && strcmp(c.files[c.hit.file].path, ed->file) == 0 &&
         c.hit.end - c.hit.start == ed->line_len &&
         memcmp(c.files[c.hit.file].buf + c.hit.start, line, ed->line_len) == 0;
    if (on)
        state_set_str(&t->st.last_written, c.value);
    smbconf_free(&c);
    return on;
}

/* Take back what the pending record put in, or was putting in, when its
 * step failed or the run died in it: a live trial, or a commit that did
 * not go through. Only our line, only while it holds a value we wrote.
 * With keep, a commit found on disk stays: the run that died after
 * writing it had decided it. */
static void take_back(struct tuner *t, bool keep)
{
    struct err e;
    int r;

    if (!t->st.pending)
        return;
    if (keep && t->st.pending_commit && pending_on_disk(t)) {
        pending_clear(t);
        save_state(t);
        return;
    }
    r = smbconf_revert(t->o.smb_conf, t->o.state_dir, &t->st.pending_edit, &e);
    if (r == 0 || r == -EALREADY) {
        if (r == 0)
            journal_log(LOG_NOTICE,
                        "%s taken back in %s: the socket options line holds what "
                        "it held before",
                        t->st.pending_commit ? "unfinished change" : "live trial",
                        t->st.pending_edit.file);
        if (r == 0 && apply_run(t->o.apply == APPLY_NONE ? APPLY_SMBCONTROL : t->o.apply,
                                t->o.smb_conf, &e) < 0)
            journal_log(LOG_WARNING, "%s", e.msg);
        pending_clear(t);
        save_state(t);
    } else if (r == -ECANCELED) {
        hold(t, e.msg);
    } else {
        /* the record stays: the next cycle, or the next start, tries again */
        journal_log(LOG_ERR, "taking our change back failed: %s", e.msg);
    }
    free(t->live_value);
    t->live_value = NULL;
}

/* Make the next probe measure c. */
static int trial_put(struct tuner *t, struct search_config c, char *url, size_t urllen)
{
    struct probe_url u;
    struct err e;
    char *v, *base;
    int r;

    snprintf(url, urllen, "%s", t->o.probe.url);
    switch (t->o.trials) {
    case TUNER_CLIENT:
        return 0; /* the probe's own client socket carries c */
    case TUNER_LIVE:
        if (t->live_value && cfg_eq(config_of_value(t, t->live_value), c))
            return 0;
        return live_put(t, c);
    case TUNER_SHADOW:
        break;
    }
    if (t->shadow_up && cfg_eq(t->shadow_cfg, c))
        goto url;
    shadow_down(t);
    v = value_with(t->value0, c);
    base = shadow_base(t);
    r = v && base ? trial_shadow_start(t->o.smb_conf, base, v, SHADOW_READY_S, &t->shadow, &e)
                  : err_set(&e, -ENOMEM, "out of memory");
    free(v);
    free(base);
    if (r < 0) {
        journal_log(LOG_ERR, "shadow smbd: %s", e.msg);
        return r;
    }
    t->shadow_up = true;
    t->shadow_cfg = c;
url:
    /* The shadow serves the same shares on its own port of 127.0.0.1. */
    if (probe_parse_url(t->o.probe.url, &u, &e) < 0)
        return -EINVAL;
    snprintf(u.host, sizeof(u.host), "127.0.0.1");
    u.port = (unsigned)t->shadow.port;
    return probe_format_url(&u, "", url, urllen) < 0 ? -ENAMETOOLONG : 0;
}

static void trial_teardown(struct tuner *t)
{
    shadow_down(t);
    take_back(t, false);
}

/* ---- probing ---- */

static void probe_sources_off(struct tuner *t)
{
    t->probe_io = sd_event_source_disable_unref(t->probe_io);
    t->probe_timer = sd_event_source_disable_unref(t->probe_timer);
}

static void probe_kill(struct tuner *t)
{
    struct probe_result r;
    struct err e;

    if (!t->probing)
        return;
    probe_sources_off(t);
    kill(t->job.pid, SIGKILL);
    probe_finish(&t->job, &r, &e);
    t->probing = false;
    t->probe_dirty = true;
}

/* A killed probe's file is removed by the next probe; at the end of a
 * cycle, or at a stop, there is no next one. */
static void probe_tidy(struct tuner *t)
{
    struct err e;

    if (!t->probe_dirty)
        return;
    t->probe_dirty = false;
    if (probe_cleanup(&t->o.probe, &e) < 0)
        journal_log(LOG_WARNING, "removing a killed probe's file: %s", e.msg);
}

static void tell(struct tuner *t, const struct probe_result *r)
{
    struct search_sample x = {r->write_mbps, r->read_mbps, false, false};
    struct seen *sn = seen_of(t, t->probe_cfg);
    char cs[96];
    int res;

    /* A timeout in the write half left the read unmeasured. */
    if (r->outcome == PROBE_TIMEOUT) {
        if (r->write_bytes < t->o.probe.size) {
            x.write_timeout = true;
            x.read = -1;
        } else {
            x.read_timeout = true;
        }
    }
    if (sn != NULL) {
        if (x.write >= 0) {
            sn->w += x.write;
            sn->nw++;
        }
        if (x.read >= 0) {
            sn->r += x.read;
            sn->nr++;
        }
    }
    t->samples++;
    t->bytes += r->write_bytes + r->read_bytes;
    cfg_str(t->probe_cfg, cs, sizeof(cs));
    if (t->o.progress)
        fprintf(stderr, "sample %3d  %-40s write %8.2f MB/s  read %8.2f MB/s%s\n", t->samples, cs,
                r->write_mbps, r->read_mbps,
                r->outcome == PROBE_TIMEOUT ? "  (deadline: lower bound)" : "");
    if (t->fp_change[0] != '\0') {
        double w = t->st.write_mbps, rd = t->st.read_mbps;

        journal_log(LOG_NOTICE, "%s: write %+.0f%%, read %+.0f%% at the same settings",
                    t->fp_change, w > 0 ? 100 * (r->write_mbps / w - 1) : 0,
                    rd > 0 ? 100 * (r->read_mbps / rd - 1) : 0);
        t->fp_change[0] = '\0';
    }
    if (t->phase == VERIFYING) {
        res = verify_tell(t->v, &x);
        if (verify_why(t->v)[0])
            journal_log(LOG_INFO, "%s", verify_why(t->v));
        if (res == VERIFY_RESEARCH) {
            journal_log(LOG_NOTICE, "the rates at %s drifted: searching again", cs);
            t->converged = false;
            t->research = true;
        } else {
            /* One line per cycle, so that the journal shows the winner
             * being watched, not only when it fails. */
            journal_log(LOG_INFO, "verified %s: write %.2f MB/s, read %.2f MB/s%s", cs,
                        r->write_mbps, r->read_mbps,
                        r->outcome == PROBE_TIMEOUT ? " (deadline: lower bound)" : "");
        }
        t->phase = IDLE; /* one sample per verification cycle */
        return;
    }
    if (t->phase == AUTO_CHECK) {
        t->auto_checks++;
        return;
    }
    res = search_tell(t->s, t->probe_cfg, &x);
    if (search_why(t->s)[0])
        journal_log(LOG_INFO, "%s", search_why(t->s));
    if (res == SEARCH_ABORTED)
        journal_log(LOG_INFO, "trial of %s ended early: far below the incumbent", cs);
}

/* A probe that measured nothing ends the cycle (its trial goes back). The
 * line names what was probed: a shadow smbd's failure is not production's. */
static void probe_failed(struct tuner *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void probe_failed(struct tuner *t, const char *fmt, ...)
{
    char why[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    journal_log(LOG_ERR, "probe of %s failed: %s%s", t->probe_url, why,
                t->o.trials == TUNER_SHADOW ? " (a trial's shadow smbd)" : "");
    cycle_end(t, false);
}

static int on_probe_done(sd_event_source *src, int fd, uint32_t revents, void *ud)
{
    struct tuner *t = ud;
    struct probe_result r;
    struct err e;
    int ret;

    probe_sources_off(t);
    t->probing = false;
    ret = probe_finish(&t->job, &r, &e);
    /* Only a probe that ended well removed its file itself (a failed
     * delete is a failure: probe.c). */
    if (ret < 0 || r.outcome != PROBE_OK)
        t->probe_dirty = true;
    if (ret < 0 || (r.outcome != PROBE_OK && r.outcome != PROBE_TIMEOUT)) {
        probe_failed(t, "%s", ret < 0 ? e.msg : r.cause);
        return 0;
    }
    /* The whole deadline passed before the transfer began: the server took
     * the connection and never answered (a hung smbd). That is no rate of
     * this candidate, and each later sample would wait out its deadline in
     * silence with a trial in force: the cycle ends, the trial goes back.
     * Under a deadline cut short for a poor trial, a slow log-on may be
     * all it was: that stays a lower bound, as before. */
    if (r.outcome == PROBE_TIMEOUT && r.write_s == 0 && r.write_bytes == 0 && !t->probe_cut) {
        probe_failed(t, "no answer within its deadline of %.0f s (%s)", t->o.probe.deadline_s,
                     r.cause);
        return 0;
    }
    tell(t, &r);
    if (t->phase == IDLE) { /* a verification sample */
        if (t->research) {
            t->research = false;
            cycle_search(t);
        } else {
            cycle_end(t, true);
        }
        return 0;
    }
    step(t);
    return 0;
}

static int on_probe_deadline(sd_event_source *src, uint64_t usec, void *ud)
{
    /* probe_finish kills the child and counts what it moved. */
    return on_probe_done(src, -1, 0, ud);
}

static int probe_launch(struct tuner *t, struct search_config c)
{
    struct probe_params p = t->o.probe;
    char url[2048], *client = NULL;
    double wmin = 0, rmin = 0;
    struct err e;
    int r;

    r = trial_put(t, c, url, sizeof(url));
    if (r < 0)
        return r;
    p.url = url;
    p.seq = ++t->seq;
    if (t->o.trials == TUNER_CLIENT) {
        client = value_with(t->o.probe.socket_options ? t->o.probe.socket_options
                                                      : PROBE_DEFAULT_SOCKET_OPTIONS,
                            c);
        if (client == NULL)
            return -ENOMEM;
        p.socket_options = client;
    }
    /* A trial far below the incumbent ends at its deadline: the time the
     * incumbent would need at abort_ratio of its rate. */
    if (t->phase == SEARCHING)
        search_abort_rates(t->s, c, &wmin, &rmin);
    if (wmin > 0 && rmin > 0) {
        double d = p.size / (wmin * 1e6) + p.size / (rmin * 1e6);

        if (d < p.deadline_s)
            p.deadline_s = d;
    }
    t->probe_cut = p.deadline_s < t->o.probe.deadline_s;
    snprintf(t->probe_url, sizeof(t->probe_url), "%s", url);
    r = probe_start(&p, &t->job, &e);
    free(client);
    if (r < 0) {
        journal_log(LOG_ERR, "probe: %s", e.msg);
        return r;
    }
    t->probing = true;
    t->probe_cfg = c;
    sd_event_add_io(t->ev, &t->probe_io, t->job.fd, EPOLLIN, on_probe_done, t);
    sd_event_add_time(t->ev, &t->probe_timer, CLOCK_MONOTONIC,
                      (uint64_t)(t->job.deadline * 1e6) + 1000, 0, on_probe_deadline, t);
    return 0;
}

/* ---- the cycle ---- */

static void fingerprint(struct tuner *t)
{
    char rel[256], out[256], errout[64], *argv[] = {"smbd", "-V", NULL};
    char msg[512] = "";
    int status;

    kernel_release(rel, sizeof(rel));
    if (child_run(argv, 10, out, sizeof(out), errout, sizeof(errout), &status) < 0 || status != 0)
        snprintf(out, sizeof(out), "unknown");
    out[strcspn(out, "\n")] = '\0';
    /* `smbd -V` says "Version 4.17.12-Debian" */
    if (strncmp(out, "Version ", 8) == 0)
        memmove(out, out + 8, strlen(out + 8) + 1);
    if (t->st.samba && strcmp(t->st.samba, out) != 0)
        snprintf(msg, sizeof(msg), "Samba %s -> %s", t->st.samba, out);
    if (t->st.kernel && strcmp(t->st.kernel, rel) != 0)
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%skernel %s -> %s",
                 msg[0] ? ", " : "", t->st.kernel, rel);
    if (t->st.smb_conf && strcmp(t->st.smb_conf, t->o.smb_conf) != 0)
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "%ssmb.conf %s -> %s",
                 msg[0] ? ", " : "", t->st.smb_conf, t->o.smb_conf);
    if (msg[0]) {
        /* measured on something else: search again, and say what changed */
        journal_log(LOG_NOTICE, "%s: searching again", msg);
        if (t->st.have_incumbent)
            snprintf(t->fp_change, sizeof(t->fp_change), "%s", msg);
        t->converged = false;
    }
    state_set_str(&t->st.samba, out);
    state_set_str(&t->st.kernel, rel);
    state_set_str(&t->st.smb_conf, t->o.smb_conf);
}

static bool in_window(const struct tuner *t)
{
    time_t now = time(NULL);
    struct tm tm;
    int m;

    if (t->o.window_start < 0)
        return true;
    localtime_r(&now, &tm);
    m = tm.tm_hour * 60 + tm.tm_min;
    if (t->o.window_start <= t->o.window_end)
        return m >= t->o.window_start && m < t->o.window_end;
    return m >= t->o.window_start || m < t->o.window_end; /* across midnight */
}

/* The search's bounds: configured, capped at what the kernel allows. */
static void search_bounds(struct tuner *t, struct search_params *p)
{
    long rmax, wmax;
    struct err e;

    *p = t->o.search;
    if (kernel_buffer_caps(&rmax, &wmax, &e) < 0) {
        journal_log(LOG_WARNING, "%s: keeping the configured maximum", e.msg);
        return;
    }
    if (rmax < p->max_rcvbuf) {
        journal_log(LOG_INFO, "SO_RCVBUF sizes capped at %ld by net.core.rmem_max", rmax);
        p->max_rcvbuf = rmax;
    }
    if (wmax < p->max_sndbuf) {
        journal_log(LOG_INFO, "SO_SNDBUF sizes capped at %ld by net.core.wmem_max", wmax);
        p->max_sndbuf = wmax;
    }
    /* The probe's client socket is the one tuned: rates rank it swapped. */
    p->mapping = t->o.trials == TUNER_CLIENT ? SEARCH_RANK_CLIENT : SEARCH_RANK_SERVER;
    /* While smbd's listener carries explicit sizes, AUTO written into
     * smb.conf would not reach a single new connection before smbd
     * restarts (Linux keeps autotuning off on a socket that had a size,
     * and accepted sockets inherit the listener's): it is no candidate.
     * Live, it could not even be measured. Shadow and client trials
     * measure it after the search, for the admin's information. */
    t->auto_blocked = false;
    if ((t->listener_rcv || t->listener_snd) && (t->o.trials == TUNER_LIVE || !t->o.restart_smbd)) {
        p->auto_observable = false;
        t->auto_blocked = t->o.trials != TUNER_LIVE;
        t->auto_checks = 0;
    }
}

/* What the running smbd does with smb.conf. Its listener got its buffers
 * when smbd started and hands them to every new connection: when they are
 * explicit, AUTO cannot take effect before smbd restarts. The kernel's
 * numbers cannot tell SO_SNDBUF=8192 or SO_RCVBUF=65536 from the
 * autotuning start sizes, so an explicit size in smb.conf counts too (the
 * file smbd most likely started with). */
static void smbd_facts(struct tuner *t)
{
    int ports[SMBD_MAX_PORTS], n;
    char cmdline[8192];
    struct err e;
    pid_t pid;
    bool running;

    t->smb_port = 0;
    if (smbd_ports(t->o.smb_conf, ports, &n, &e) == 0)
        t->smb_port = ports[0];
    /* No smbd running: it will start with whatever smb.conf says, AUTO
     * included. */
    running = smbd_pid(t->o.smb_conf, &pid, &e) == 0;
    t->listener_rcv = running && t->inc0.rcvbuf != SEARCH_AUTO;
    t->listener_snd = running && t->inc0.sndbuf != SEARCH_AUTO;
    if (running && t->smb_port > 0) {
        bool r, s;

        if (smbd_listener_explicit(t->smb_port, &r, &s, &e) == 0) {
            t->listener_rcv |= r;
            t->listener_snd |= s;
        }
    }
    if (running && kernel_proc_cmdline(pid, cmdline, sizeof(cmdline)) == 0 &&
        smbd_cmdline_overrides(cmdline))
        journal_log(LOG_WARNING,
                    "smbd (pid %d) runs with --option 'socket options=...': "
                    "it overrides smb.conf, so nothing smbtuned writes there takes effect "
                    "until smbd runs without it",
                    (int)pid);
}

/* Read smb.conf and the state; 0 to go on, <0 to skip this cycle. */
static int cycle_prepare(struct tuner *t)
{
    struct smbconf c;
    struct err e;
    int r;

    state_free(&t->st);
    r = state_load(t->o.state_dir, &t->st, &e);
    if (r < 0) {
        journal_log(LOG_ERR, "%s", e.msg);
        return r;
    }
    if (t->st.hold) {
        /* The reason says why: an edit by hand, a damaged state file. */
        set_status(t, "holding off: %s", t->st.hold_reason ? t->st.hold_reason : "by request");
        journal_log(LOG_NOTICE,
                    "not tuning: holding off: %s; `smbtuned --resume` hands control back",
                    t->st.hold_reason ? t->st.hold_reason : "by request");
        return -EPERM;
    }
    /* A take-back that failed last time (lock held, disk full) first. */
    take_back(t, false);
    if (t->st.pending || t->st.hold)
        return -EAGAIN;
    r = smbconf_load(&c, t->o.smb_conf, &e);
    if (r < 0) {
        journal_log(LOG_ERR, "%s", e.msg);
        return r;
    }
    free(t->value0);
    t->value0 = strdup(c.value);
    if (t->st.last_written && !sockopts_same(c.value, t->st.last_written)) {
        char *why = NULL;
        const char *fp = c.found ? c.files[c.hit.file].path : t->o.smb_conf;

        /* Where and why first, the values (of any length) last: a reader
         * or a cut line keeps the reason. */
        if (c.found)
            r = asprintf(&why,
                         "%s:%d: socket options edited by hand: it is '%s', not '%s' as "
                         "smbtuned wrote it",
                         fp, c.hit.line, c.value, t->st.last_written);
        else
            r = asprintf(&why,
                         "%s: socket options edited by hand: it is '%s', not '%s' as "
                         "smbtuned wrote it",
                         fp, c.value, t->st.last_written);
        smbconf_free(&c);
        if (r < 0) {
            hold(t, "socket options edited by hand (out of memory for the details)");
            return -EPERM;
        }
        hold(t, why);
        free(why);
        return -EPERM;
    }
    smbconf_free(&c);
    if (t->value0 == NULL)
        return -ENOMEM;
    kernel_facts(t);
    t->inc0 = config_of_value(t, t->value0);
    fingerprint(t);
    smbd_facts(t);
    return 0;
}

static void cycle_search(struct tuner *t)
{
    struct search_params p;
    char cs[96];

    search_bounds(t, &p);
    /* a new search: the old one and the watch on its winner go */
    verify_free(t->v);
    t->v = NULL;
    search_free(t->s);
    if (search_new(&p, t->inc0, &t->s) < 0) {
        journal_log(LOG_ERR, "search: bad parameters (min/max sizes?)");
        cycle_end(t, false);
        return;
    }
    t->phase = SEARCHING;
    journal_log(LOG_INFO, "tuning cycle: searching from %s (%s trials)",
                cfg_str(t->inc0, cs, sizeof(cs)),
                t->o.trials == TUNER_SHADOW   ? "shadow smbd"
                : t->o.trials == TUNER_CLIENT ? "client socket"
                                              : "live");
    set_status(t, "searching from %s", cs);
    step(t);
}

static int on_busy_checked(sd_event_source *src, uint64_t usec, void *ud);

/* After the checks: verify the winner, or search. */
static void cycle_go(struct tuner *t)
{
    if (t->converged) {
        /* verification: one sample of the winner */
        t->phase = VERIFYING;
        if ((t->v == NULL && verify_of_search(t->s, &t->v) < 0) ||
            probe_launch(t, search_incumbent(t->s)) < 0)
            cycle_end(t, false);
        return;
    }
    cycle_search(t);
}

static void cycle_begin(struct tuner *t)
{
    t->started = child_now();
    t->samples = 0;
    t->bytes = 0;
    t->nseen = 0;
    t->failed = false;
    t->fp_change[0] = '\0';
    if (cycle_prepare(t) < 0) {
        cycle_end(t, false);
        return;
    }
    if (!t->o.once && !in_window(t)) {
        journal_log(LOG_INFO, "outside the time window %02d:%02d-%02d:%02d: cycle deferred",
                    t->o.window_start / 60, t->o.window_start % 60, t->o.window_end / 60,
                    t->o.window_end % 60);
        set_status(t, "waiting for the time window");
        cycle_end(t, true);
        return;
    }
    if (!t->o.once && t->o.busy_mbps > 0 && t->smb_port > 0) {
        struct err e;

        /* Watch the clients' traffic for a moment before adding ours. */
        free(t->busy0);
        t->busy0 = NULL;
        if (kernel_port_sockets(t->smb_port, &t->busy0, &t->nbusy0, &e) == 0) {
            t->phase = BUSY_CHECK;
            t->timer = sd_event_source_disable_unref(t->timer);
            sd_event_add_time_relative(t->ev, &t->timer, CLOCK_MONOTONIC,
                                       (uint64_t)(BUSY_SAMPLE_S * 1e6), 10000, on_busy_checked, t);
            return;
        }
        journal_log(LOG_WARNING, "cannot watch client traffic: %s", e.msg);
    }
    cycle_go(t);
}

static int on_busy_checked(sd_event_source *src, uint64_t usec, void *ud)
{
    struct tuner *t = ud;
    struct kernel_sock_bytes *now;
    size_t n;
    struct err e;
    double mbps;

    t->timer = sd_event_source_disable_unref(t->timer);
    if (kernel_port_sockets(t->smb_port, &now, &n, &e) < 0) {
        journal_log(LOG_WARNING, "cannot watch client traffic: %s", e.msg);
        cycle_go(t);
        return 0;
    }
    mbps = (double)kernel_bytes_since(t->busy0, t->nbusy0, now, n) / 1e6 / BUSY_SAMPLE_S;
    free(now);
    if (mbps > t->o.busy_mbps) {
        journal_log(LOG_INFO, "clients move %.1f MB/s (more than %.1f): tuning deferred", mbps,
                    t->o.busy_mbps);
        set_status(t, "deferred: clients busy (%.1f MB/s)", mbps);
        cycle_end(t, true);
        return 0;
    }
    cycle_go(t);
    return 0;
}

/* Commit the winner w (tune mode). Returns what to say. */
static void commit(struct tuner *t, struct search_config w, char *what, size_t len)
{
    struct smbconf_change ch = {.expect = t->value0,
                                .rcvbuf = w.rcvbuf,
                                .sndbuf = w.sndbuf,
                                .before_write = record_commit,
                                .ctx = t};
    struct smbconf_result res;
    struct err e;
    int r;

    if (t->o.trials == TUNER_LIVE && t->live_value) {
        if (cfg_eq(w, t->inc0)) {
            take_back(t, false);
            snprintf(what, len, "kept socket options = %s", t->value0);
            return;
        }
        ch.expect = t->live_value;
    }
    r = smbconf_set_buffers(t->o.smb_conf, t->o.state_dir, &ch, &res, &e);
    if (r == -ECANCELED) {
        hold(t, e.msg);
        snprintf(what, len, "not written: %s", e.msg);
        t->failed = true;
        smbconf_result_free(&res);
        return;
    }
    if (r < 0) {
        journal_log(LOG_ERR, "commit: %s", e.msg);
        snprintf(what, len, "not written: %s", e.msg);
        t->failed = true;
        take_back(t, false); /* the commit's record, and a live trial under it */
        smbconf_result_free(&res);
        return;
    }
    /* From what the cycle began with: after live trials the file's old
     * value (res.old_value) is the last trial's, often the winner itself. */
    journal_log(LOG_NOTICE, "socket options: %s -> %s (%s:%d)", t->value0, res.new_value,
                res.file ? res.file : t->o.smb_conf, res.line);
    state_set_str(&t->st.last_written, res.new_value);
    pending_clear(t);
    free(t->live_value);
    t->live_value = NULL;
    save_state(t);
    if ((w.rcvbuf == SEARCH_AUTO && t->listener_rcv) ||
        (w.sndbuf == SEARCH_AUTO && t->listener_snd)) {
        /* Only reachable with restart_smbd = yes (otherwise AUTO is no
         * candidate while the listener holds explicit sizes). */
        journal_log(LOG_NOTICE,
                    "restarting smbd so that autotuning reaches new connections "
                    "(restart_smbd = yes): its listener keeps the old explicit sizes until then");
        if (apply_restart_smbd(&e) < 0)
            journal_log(LOG_WARNING, "written, but smbd was not restarted: %s", e.msg);
    } else if (apply_run(t->o.apply, t->o.smb_conf, &e) < 0) {
        journal_log(LOG_WARNING, "written, but smbd was not told: %s", e.msg);
    }
    snprintf(what, len, "committed socket options = %s", res.new_value);
    smbconf_result_free(&res);
}

/* Every configuration tried gave the same rates within noise: the share is
 * limited by something else (the link's rate, disk, CPU), not by socket
 * buffers. */
static bool buffers_do_not_matter(const struct tuner *t)
{
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0};
    int n = 0;

    for (int i = 0; i < t->nseen; i++) {
        const struct seen *sn = &t->seen[i];

        if (sn->nw < 2 || sn->nr < 2)
            continue;
        n++;
        lo[0] = fmin(lo[0], sn->w / sn->nw);
        hi[0] = fmax(hi[0], sn->w / sn->nw);
        lo[1] = fmin(lo[1], sn->r / sn->nr);
        hi[1] = fmax(hi[1], sn->r / sn->nr);
    }
    return n >= 3 && hi[0] <= lo[0] * (1 + search_params_of(t->s)->min_gain) &&
           hi[1] <= lo[1] * (1 + search_params_of(t->s)->min_gain);
}

/* What autotuning measured against the winner, which the search could not
 * offer: the admin decides whether a restart of smbd is worth it. */
static void auto_after_restart(struct tuner *t, struct search_config w)
{
    struct search_config a = {SEARCH_AUTO, SEARCH_AUTO};
    double dw = mean_w(t, a) / mean_w(t, w) - 1, dr = mean_r(t, a) / mean_r(t, w) - 1;
    double gain = search_params_of(t->s)->min_gain;

    if (isnan(dw) || isnan(dr))
        return;
    if (dw < gain && dr < gain)
        journal_log(LOG_NOTICE,
                    "autotuning (no explicit size) measured write %+.0f%%, read "
                    "%+.0f%% against the sizes chosen: they serve as well; autotuning would "
                    "too after a restart of smbd, whose listener keeps explicit sizes until "
                    "then",
                    100 * dw, 100 * dr);
    else
        journal_log(LOG_NOTICE,
                    "autotuning (no explicit size) measured write %+.0f%%, read "
                    "%+.0f%% against the sizes chosen, but smbd's listener keeps explicit "
                    "sizes until smbd restarts: remove the sizes and restart smbd to have it",
                    100 * dw, 100 * dr);
}

static void finish_search(struct tuner *t)
{
    struct search_config w = search_incumbent(t->s);
    char what[1280], cs[96], *after;
    bool committed = false;

    cfg_str(w, cs, sizeof(cs));
    /* Kept: the value stays as written (its start may be spelled otherwise,
     * SO_RCVBUF=0 as 1). */
    after = cfg_eq(w, t->inc0) ? strdup(t->value0) : value_with(t->value0, w);
    shadow_down(t);
    if (t->auto_blocked)
        auto_after_restart(t, w);
    /* The largest size the kernel allows won: a larger one might do
     * better, and only the admin can allow it. */
    if (w.rcvbuf != SEARCH_AUTO && w.rcvbuf == search_params_of(t->s)->max_rcvbuf &&
        w.rcvbuf < t->o.search.max_rcvbuf)
        journal_log(LOG_NOTICE,
                    "SO_RCVBUF=%ld is the kernel's cap: raising "
                    "net.core.rmem_max may allow a faster setting",
                    w.rcvbuf);
    if (w.sndbuf != SEARCH_AUTO && w.sndbuf == search_params_of(t->s)->max_sndbuf &&
        w.sndbuf < t->o.search.max_sndbuf)
        journal_log(LOG_NOTICE,
                    "SO_SNDBUF=%ld is the kernel's cap: raising "
                    "net.core.wmem_max may allow a faster setting",
                    w.sndbuf);
    if (after == NULL) {
        cycle_end(t, false);
        return;
    }
    if (cfg_eq(w, t->inc0)) {
        take_back(t, false);
        if (buffers_do_not_matter(t))
            snprintf(what, sizeof(what),
                     "buffers do not limit this share: every size tried "
                     "gave the same rates (write %.1f, read %.1f MB/s); kept socket options = %s",
                     mean_w(t, w), mean_r(t, w), t->value0);
        else
            snprintf(what, sizeof(what), "kept socket options = %s: no neighbour did better",
                     t->value0);
        journal_log(LOG_NOTICE, "%s", what);
    } else if (t->o.mode == TUNER_ADVISE) {
        take_back(t, false);
        snprintf(what, sizeof(what),
                 "advice: socket options = %s (advise mode: smb.conf not "
                 "changed)",
                 after);
        journal_log(LOG_NOTICE, "%s", what);
    } else {
        commit(t, w, what, sizeof(what));
        committed = !t->failed;
    }
    if (!t->failed) {
        t->st.have_incumbent = true;
        t->st.rcvbuf = committed || cfg_eq(w, t->inc0) ? w.rcvbuf : t->inc0.rcvbuf;
        t->st.sndbuf = committed || cfg_eq(w, t->inc0) ? w.sndbuf : t->inc0.sndbuf;
        t->st.write_mbps = mean_w(t, w);
        t->st.read_mbps = mean_r(t, w);
        t->st.cycles++;
        save_state(t);
        t->converged = committed || cfg_eq(w, t->inc0);
    }
    set_status(t, "%s", what);
    report(t, after, w, committed, what);
    free(after);
    cycle_end(t, !t->failed);
}

static void step(struct tuner *t)
{
    struct search_config c;

    if (t->o.max_bytes > 0 && t->bytes >= t->o.max_bytes) {
        journal_log(LOG_NOTICE,
                    "byte budget of %lld spent before the search converged: "
                    "keeping %s",
                    t->o.max_bytes, t->value0);
        trial_teardown(t);
        report(t, t->value0, t->inc0, false, "budget spent: nothing changed");
        cycle_end(t, true);
        return;
    }
    if (t->phase == AUTO_CHECK || search_ask(t->s, &c) == SEARCH_DONE) {
        if (!t->auto_blocked || t->auto_checks >= AUTO_CHECKS) {
            finish_search(t);
            return;
        }
        t->phase = AUTO_CHECK;
        c = (struct search_config){SEARCH_AUTO, SEARCH_AUTO};
    }
    if (probe_launch(t, c) < 0) {
        trial_teardown(t);
        cycle_end(t, false);
    }
}

static int on_timer(sd_event_source *src, uint64_t usec, void *ud)
{
    struct tuner *t = ud;

    t->timer = sd_event_source_disable_unref(t->timer);
    cycle_begin(t);
    return 0;
}

static void cycle_end(struct tuner *t, bool ok)
{
    if (!ok) {
        t->failed = true;
        trial_teardown(t);
    }
    probe_tidy(t);
    /* The state file always tells how the last cycle left things. */
    save_state(t);
    t->phase = IDLE;
    if (t->o.once) {
        sd_event_exit(t->ev, t->failed ? 1 : 0);
        return;
    }
    t->timer = sd_event_source_disable_unref(t->timer);
    sd_event_add_time_relative(t->ev, &t->timer, CLOCK_MONOTONIC, (uint64_t)(t->o.interval_s * 1e6),
                               1000000, on_timer, t);
}

void tuner_kick(struct tuner *t)
{
    if (t->phase != IDLE)
        return;
    t->timer = sd_event_source_disable_unref(t->timer);
    cycle_begin(t);
}

int tuner_recover(struct tuner *t, struct err *e)
{
    char *base = shadow_base(t);
    int r;

    if (base == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    r = trial_shadow_sweep(base, e);
    free(base);
    if (r < 0)
        return r;
    /* A killed predecessor's probe may have left its file, still open on
     * the server for a moment: the cleanup child retries for a while,
     * which a measurement's own sweep does not. */
    t->probe_dirty = true;
    probe_tidy(t);
    r = state_load(t->o.state_dir, &t->st, e);
    if (r < 0 || !t->st.pending)
        return r;
    journal_log(LOG_NOTICE, "a run that did not finish left a %s of %s pending: settling it",
                t->st.pending_commit ? "change" : "live trial", t->st.pending_edit.file);
    take_back(t, true);
    return 0;
}

void tuner_stop(struct tuner *t)
{
    probe_kill(t);
    trial_teardown(t);
    probe_tidy(t);
    t->timer = sd_event_source_disable_unref(t->timer);
    t->phase = IDLE;
}

int tuner_new(sd_event *ev, const struct tuner_opts *o, struct tuner **tp, struct err *e)
{
    struct tuner *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return err_set(e, -ENOMEM, "out of memory");
    t->ev = sd_event_ref(ev);
    t->o = *o;
    set_status(t, "starting");
    *tp = t;
    return 0;
}

void tuner_free(struct tuner *t)
{
    if (t == NULL)
        return;
    tuner_stop(t);
    state_free(&t->st);
    verify_free(t->v);
    search_free(t->s);
    free(t->value0);
    free(t->live_value);
    free(t->busy0);
    sd_event_unref(t->ev);
    free(t);
}
