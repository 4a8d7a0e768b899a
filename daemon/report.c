/* report: see report.h. */
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "journal.h"
#include "jsonw.h"
#include "sockopts.h"
#include "state.h"
#include "stats.h"

/* report_first_error(): the one piece of state of its own here, since
 * report_error is called from every room of the tuner, none of which
 * holds the tally. Cut at its size (it is a line of the log, whole). */
static char first_error[2048];

/* How sure a restart advice must be that autotuning is apart (one-sided). */
#define AUTO_CONFIDENCE 0.95

void tally_begin(struct tally *t, double now)
{
    *t = (struct tally){.started = now};
    first_error[0] = '\0';
}

void tally_add(struct tally *t, struct search_config c, const struct search_sample *x,
               long long bytes, bool auto_check)
{
    double rate[2] = {x->write, x->read};
    int i;

    t->samples++;
    t->bytes += bytes;
    if (auto_check) {
        for (int d = 0; d < 2; d++)
            if (rate[d] >= 0 && t->nauto[d] < REPORT_MAX_AUTO)
                t->auto_log[d][t->nauto[d]++] = log(fmax(rate[d], 1e-9));
        return;
    }
    for (i = 0; i < t->ntried && !search_config_eq(t->tried[i], c); i++)
        ;
    if (i == t->ntried && t->ntried < REPORT_MAX_TRIED)
        t->tried[t->ntried++] = c;
}

/* The geometric mean of a few samples: the mean of their logs, as the
 * search's estimate, without its stall rejection (three samples cannot
 * tell which one stalled). */
static double auto_rate(const struct tally *t, int d)
{
    struct stats_summary sum;

    if (t->nauto[d] < 1 || stats_summarize(t->auto_log[d], t->nauto[d], 0, &sum) < 0)
        return NAN;
    return exp(sum.mean);
}

void report_rates(const struct search *s, const struct tally *t, struct search_config c, double *w,
                  double *r)
{
    struct search_estimate est;

    *w = *r = NAN;
    if (s != NULL && search_estimate(s, c, &est) == 0 && est.nwrite > 0 && est.nread > 0) {
        *w = est.write;
        *r = est.read;
        return;
    }
    if (c.rcvbuf == SEARCH_AUTO && c.sndbuf == SEARCH_AUTO) {
        *w = auto_rate(t, 0);
        *r = auto_rate(t, 1);
    }
}

bool report_buffers_do_not_matter(const struct search *s, const struct tally *t)
{
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {0, 0}, gain = search_params_of(s)->min_gain;
    struct search_estimate est;
    int n = 0;

    for (int i = 0; i < t->ntried; i++) {
        if (search_estimate(s, t->tried[i], &est) < 0 || est.nwrite < 2 || est.nread < 2)
            continue;
        n++;
        lo[0] = fmin(lo[0], est.write);
        hi[0] = fmax(hi[0], est.write);
        lo[1] = fmin(lo[1], est.read);
        hi[1] = fmax(hi[1], est.read);
    }
    return n >= 3 && hi[0] <= lo[0] * (1 + gain) && hi[1] <= lo[1] * (1 + gain);
}

/* Autotuning's few samples of direction d against the winner's rate win
 * (MB/s): +1 better by min_gain or more beyond their noise, -1 worse
 * alike, 0 neither. Their own spread is the noise (one-sided 95%, t with
 * n-1 degrees of freedom): three loopback samples may spread 25%, and an
 * admin must not restart a production smbd over that. One sample has no
 * spread: only a loss to half (an ended check) counts. */
static int auto_apart(const struct tally *t, int d, double win, double gain)
{
    struct stats_summary sum;
    int n = t->nauto[d];
    double diff, half;

    if (n < 1 || !(win > 0) || stats_summarize(t->auto_log[d], n, 0, &sum) < 0)
        return 0;
    diff = sum.mean - log(win);
    if (n < 2)
        return diff <= -log(2.0) ? -1 : 0;
    half = stats_t_quantile(AUTO_CONFIDENCE, n - 1) * sqrt(sum.ss / (n - 1) / n);
    if (diff - half > 0 && diff >= log1p(gain))
        return 1;
    if (diff + half < 0 && diff <= -log1p(gain))
        return -1;
    return 0;
}

void report_auto_after_restart(const struct search *s, const struct tally *t,
                               struct search_config w)
{
    double ww, wr, dw, dr, gain = search_params_of(s)->min_gain;
    int aw, ar, n;

    report_rates(s, t, w, &ww, &wr);
    dw = auto_rate(t, 0) / ww - 1;
    dr = auto_rate(t, 1) / wr - 1;
    if (isnan(dw) || isnan(dr))
        return;
    aw = auto_apart(t, 0, ww, gain);
    ar = auto_apart(t, 1, wr, gain);
    n = t->nauto[0] > t->nauto[1] ? t->nauto[0] : t->nauto[1];
    /* the sizes chosen, and the rates autotuning measured */
    struct event_fields f = {.c = &w, .write_mbps = auto_rate(t, 0), .read_mbps = auto_rate(t, 1)};

    /* Apart from the sizes chosen in no direction beyond the samples'
     * noise: nothing to advise either way (three noisy samples once made
     * +28% a reason to restart smbd). */
    if (aw == 0 && ar == 0 && (fabs(dw) >= gain || fabs(dr) >= gain))
        journal_log(LOG_INFO,
                    "autotuning (no explicit size) measured write %+.0f%%, read %+.0f%% against "
                    "the sizes chosen, within the noise of its %d sample%s: nothing to advise",
                    100 * dw, 100 * dr, n, n == 1 ? "" : "s");
    /* Worse in a direction and better in none: nothing to advise (it once
     * said "they serve as well" of autotuning at -65%). */
    else if (aw <= 0 && ar <= 0 && (aw < 0 || ar < 0))
        journal_log(LOG_INFO,
                    "autotuning (no explicit size) measured write %+.0f%%, read %+.0f%% against "
                    "the sizes chosen: the sizes chosen serve better",
                    100 * dw, 100 * dr);
    else if (aw <= 0 && ar <= 0)
        report_event(JOURNAL_ID_RESTART, LOG_NOTICE, &f,
                     "autotuning (no explicit size) measured write %+.0f%%, read "
                     "%+.0f%% against the sizes chosen: they serve as well; autotuning would "
                     "too after a restart of smbd, whose listener keeps explicit sizes until "
                     "then",
                     100 * dw, 100 * dr);
    else
        report_event(JOURNAL_ID_RESTART, LOG_NOTICE, &f,
                     "autotuning (no explicit size) measured write %+.0f%%, read "
                     "%+.0f%% against the sizes chosen, but smbd's listener keeps explicit "
                     "sizes until smbd restarts: remove the sizes and restart smbd to have it",
                     100 * dw, 100 * dr);
}

/* A buffer of a value as --show gives it: the int smbd passes; absent
 * (auto) only when no token names it. */
static struct sockopts_size size_of(const char *value, enum sockopts_buf which)
{
    struct sockopts so;
    struct sockopts_size z = {0};

    if (sockopts_parse(value, &so) == 0) {
        z = sockopts_get(&so, which);
        sockopts_free(&so);
    }
    return z;
}

static const char *size_str(const char *value, enum sockopts_buf which, char *buf, size_t len)
{
    struct sockopts_size z = size_of(value, which);

    if (z.present)
        snprintf(buf, len, "%d", z.value);
    else
        snprintf(buf, len, "auto");
    return buf;
}

/* A rate in JSON: MB/s to the 1 kB/s, null when unmeasured. */
static json_t *rate_json(double v)
{
    return isnan(v) ? json_null() : json_real(round(v * 1000) / 1000);
}

static json_t *side_json(const char *value, double w, double r)
{
    struct sockopts_size rz = size_of(value, SOCKOPTS_RCVBUF), sz = size_of(value, SOCKOPTS_SNDBUF);

    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "value", jsonw_text(value), "rcvbuf",
                     rz.present ? json_integer(rz.value) : json_null(), "sndbuf",
                     sz.present ? json_integer(sz.value) : json_null(), "write_mbps", rate_json(w),
                     "read_mbps", rate_json(r));
}

static void print_json(FILE *f, const struct tally *t, const struct report_in *in, double w0,
                       double r0, double w1, double r1)
{
    json_t *o;
    char *text;

    o = json_pack("{s:o, s:o, s:b, s:s, s:i, s:I, s:f, s:o}", "before",
                  side_json(in->before, w0, r0), "after", side_json(in->after, w1, r1), "committed",
                  in->committed, "mode", in->advise ? "advise" : "tune", "samples", t->samples,
                  "bytes", (json_int_t)t->bytes, "seconds", round((in->now - t->started) * 10) / 10,
                  "result", jsonw_text(in->what));
    text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12)) : NULL;
    if (text == NULL) {
        report_error("report", NULL, "the report: out of memory");
    } else {
        fprintf(f, "%s\n", text);
        free(text);
    }
    json_decref(o);
}

void report_print(FILE *f, bool json, const struct search *s, struct tally *t,
                  const struct report_in *in)
{
    double w0, r0, w1, r1;
    char a[32], b[32];

    t->reported = true;
    report_rates(s, t, in->inc0, &w0, &r0);
    report_rates(s, t, in->rated, &w1, &r1);
    if (json) {
        print_json(f, t, in, w0, r0, w1, r1);
        return;
    }
    fprintf(f, "\nsocket options\n  before  %s\n  %-6s  %s\n\n", in->before,
            in->committed ? "after" : "best", in->after);
    fprintf(f, "%-12s %12s %12s\n", "", "before", in->committed ? "after" : "best");
    fprintf(f, "%-12s %12s %12s\n", "SO_RCVBUF",
            size_str(in->before, SOCKOPTS_RCVBUF, a, sizeof(a)),
            size_str(in->after, SOCKOPTS_RCVBUF, b, sizeof(b)));
    fprintf(f, "%-12s %12s %12s\n", "SO_SNDBUF",
            size_str(in->before, SOCKOPTS_SNDBUF, a, sizeof(a)),
            size_str(in->after, SOCKOPTS_SNDBUF, b, sizeof(b)));
    fprintf(f, "%-12s %12.2f %12.2f\n", "write MB/s", w0, w1);
    fprintf(f, "%-12s %12.2f %12.2f\n", "read MB/s", r0, r1);
    fprintf(f, "\n%s\n%d samples, %.1f MB moved, %.0f s\n", in->what, t->samples, t->bytes / 1e6,
            in->now - t->started);
}

void report_print_failure(FILE *f, struct tally *t, const char *result, const char *error,
                          const char *mode, double now)
{
    json_t *o;

    if (t != NULL && t->reported)
        return;
    if (t != NULL)
        t->reported = true;
    o = json_pack("{s:s, s:o, s:o, s:i, s:I, s:f}", "result", result, "error", jsonw_text(error),
                  "mode", mode ? json_string(mode) : json_null(), "samples", t ? t->samples : 0,
                  "bytes", (json_int_t)(t ? t->bytes : 0), "seconds",
                  t ? round((now - t->started) * 10) / 10 : 0.0);
    if (jsonw_print(f, o) < 0)
        report_error("report", NULL, "the report: out of memory");
}

void report_progress(FILE *f, int n, const char *cfg, double write_mbps, double read_mbps,
                     bool timeout)
{
    fprintf(f, "sample %3d  %-40s write %8.2f MB/s  read %8.2f MB/s%s\n", n, cfg, write_mbps,
            read_mbps, timeout ? "  (deadline: lower bound)" : "");
}

void report_fingerprint_change(const char *what, const struct state *st, double write_mbps,
                               double read_mbps, bool comparable)
{
    double w = st->write_mbps, r = st->read_mbps;

    char wb[64], rb[64];

    if (!comparable) {
        report_event(JOURNAL_ID_UPGRADE, LOG_NOTICE,
                     &(struct event_fields){.smb_conf = st->smb_conf,
                                            .write_mbps = write_mbps,
                                            .read_mbps = read_mbps},
                     "%s: write %.2f MB/s, read %.2f MB/s at the same settings; not compared "
                     "with the rates before, which an older smbtuned computed another way",
                     what, write_mbps, read_mbps);
        return;
    }

    /* after: the fields' rates; before: the state's */
    snprintf(wb, sizeof(wb), "SMBTUNED_WRITE_MBPS_BEFORE=%.2f", w);
    snprintf(rb, sizeof(rb), "SMBTUNED_READ_MBPS_BEFORE=%.2f", r);
    report_event(JOURNAL_ID_UPGRADE, LOG_NOTICE,
                 &(struct event_fields){.smb_conf = st->smb_conf,
                                        .write_mbps = write_mbps,
                                        .read_mbps = read_mbps,
                                        .more = (const char *const[]){wb, rb, NULL}},
                 "%s: write %+.0f%%, read %+.0f%% at the same settings", what,
                 w > 0 ? 100 * (write_mbps / w - 1) : 0, r > 0 ? 100 * (read_mbps / r - 1) : 0);
}

/* One more "NAME=value" string at out[*k], when there is room and memory
 * (a field left out costs less than the entry). */
__attribute__((format(printf, 4, 5))) static void add(char **out, size_t *k, size_t n,
                                                      const char *fmt, ...)
{
    va_list ap;
    int r;

    if (*k + 1 >= n)
        return;
    va_start(ap, fmt);
    r = vasprintf(&out[*k], fmt, ap);
    va_end(ap);
    if (r >= 0)
        (*k)++;
}

/* The fields of f as malloc'd "NAME=value" strings in out, NULL after the
 * last (at most n - 1). */
static void event_strings(const struct event_fields *f, char **out, size_t n)
{
    char rcv[32], snd[32];
    size_t k = 0;

    if (f->smb_conf)
        add(out, &k, n, "SMBTUNED_SMB_CONF=%s", f->smb_conf);
    if (f->c) {
        add(out, &k, n, "SMBTUNED_RCVBUF=%s", search_size_str(f->c->rcvbuf, rcv, sizeof(rcv)));
        add(out, &k, n, "SMBTUNED_SNDBUF=%s", search_size_str(f->c->sndbuf, snd, sizeof(snd)));
    }
    if (f->samples > 0)
        add(out, &k, n, "SMBTUNED_SAMPLES=%d", f->samples);
    /* one rate without the other is no measurement (NAN > 0 is false) */
    if ((f->write_mbps > 0 && f->read_mbps > 0) ||
        (f->measured && f->write_mbps >= 0 && f->read_mbps >= 0)) {
        add(out, &k, n, "SMBTUNED_WRITE_MBPS=%.2f", f->write_mbps);
        add(out, &k, n, "SMBTUNED_READ_MBPS=%.2f", f->read_mbps);
    }
    for (size_t i = 0; f->more != NULL && f->more[i] != NULL; i++)
        add(out, &k, n, "%s", f->more[i]);
    out[k] = NULL;
}

__attribute__((format(printf, 4, 0))) static void
event_v(const char *message_id, int prio, const struct event_fields *f, const char *fmt, va_list ap)
{
    char *fields[24], *msg = NULL;

    event_strings(f, fields, sizeof(fields) / sizeof(fields[0]));
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    journal_event(message_id, prio, (const char *const *)fields, "%s",
                  msg ? msg : "(out of memory)");
    free(msg);
    for (size_t i = 0; fields[i] != NULL; i++)
        free(fields[i]);
}

void report_event(const char *message_id, int prio, const struct event_fields *f, const char *fmt,
                  ...)
{
    va_list ap;

    va_start(ap, fmt);
    event_v(message_id, prio, f, fmt, ap);
    va_end(ap);
}

void report_error(const char *what, const char *smb_conf, const char *fmt, ...)
{
    char *field = NULL;
    va_list ap;

    if (asprintf(&field, "SMBTUNED_ERROR=%s", what) < 0)
        field = NULL;
    if (first_error[0] == '\0') {
        va_start(ap, fmt);
        vsnprintf(first_error, sizeof(first_error), fmt, ap);
        va_end(ap);
    }
    va_start(ap, fmt);
    event_v(
        JOURNAL_ID_ERROR, LOG_ERR,
        &(struct event_fields){.smb_conf = smb_conf, .more = (const char *const[]){field, NULL}},
        fmt, ap);
    va_end(ap);
    free(field);
}

const char *report_first_error(void)
{
    return first_error;
}
