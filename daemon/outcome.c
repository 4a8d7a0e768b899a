/* outcome: see outcome.h. */
#include "outcome.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "sockopts.h"

/* The largest size the kernel allows won: a larger one might do better,
 * and only the admin can allow it. */
static void cap_notices(const struct search *s, const struct tuner_opts *o, struct search_config w)
{
    const struct search_params *p = search_params_of(s);

    if (w.rcvbuf != SEARCH_AUTO && w.rcvbuf == p->max_rcvbuf && w.rcvbuf < o->search.max_rcvbuf)
        facts_cap_event(LOG_NOTICE, SOCKOPTS_RCVBUF, w.rcvbuf,
                        "SO_RCVBUF=%ld is the kernel's cap: raising "
                        "net.core.rmem_max may allow a faster setting",
                        w.rcvbuf);
    if (w.sndbuf != SEARCH_AUTO && w.sndbuf == p->max_sndbuf && w.sndbuf < o->search.max_sndbuf)
        facts_cap_event(LOG_NOTICE, SOCKOPTS_SNDBUF, w.sndbuf,
                        "SO_SNDBUF=%ld is the kernel's cap: raising "
                        "net.core.wmem_max may allow a faster setting",
                        w.sndbuf);
}

/* ---- loopback trials and real connections ---- */

static const char *const buf_opt[2] = {"SO_RCVBUF", "SO_SNDBUF"};
static const char *const buf_words[2] = {"receive buffer", "send buffer"};
static const char *const tcp_sysctl[2] = {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"};

static void why_add(struct outcome *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void why_add(struct outcome *out, const char *fmt, ...)
{
    size_t n = strlen(out->why);
    va_list ap;

    if (n > 0 && n + 2 < sizeof(out->why)) {
        memcpy(out->why + n, "; ", 3);
        n += 2;
    }
    va_start(ap, fmt);
    vsnprintf(out->why + n, sizeof(out->why) - n, fmt, ap);
    va_end(ap);
}

/* The smallest size of the search's lattice (search.h: the powers of two
 * from min_size, and the cap) at or above want, at most cap. */
static long lattice_up(const struct search_params *p, double want, long cap)
{
    long x = 1;

    while (x < p->min_size)
        x <<= 1;
    while ((double)x < want && x < cap)
        x <<= 1;
    return x > cap ? cap : x;
}

/* What a buffer that holds real connections back is raised to, as a
 * multiple of their largest bandwidth-delay product (see loopback_size). */
#define HELD_STEP 4

/* What an explicit size wb the loopback trials chose for buffer b comes
 * to. Loopback cannot rank sizes above the small-buffer cliff (runs vary
 * by 25%, shared/FACTS.md): a win there says only that the size is above
 * the cliff, not that any client on a real path needs it, and an explicit
 * size takes autotuning away from every one of them. So it takes real
 * connections held back by that buffer to keep an explicit size (then one
 * that covers their largest bandwidth-delay product); without them,
 * autotuning, unless it cannot take effect (smbd's listener holds
 * explicit sizes and restart_smbd is off: then no AUTO was a candidate
 * and the trials' choice stays, as before, said so). From AUTO the same
 * rule is "explicit only on evidence from a real path": here that
 * evidence can only be real connections, as the trials are loopback. */
static long loopback_size(struct outcome *out, const struct search_params *p, const struct facts *f,
                          const struct tuner_opts *o, struct search_config inc0,
                          const struct clients_watch_summary *real, enum sockopts_buf b, long wb,
                          bool kept)
{
    bool rcv = b == SOCKOPTS_RCVBUF;
    long cap = rcv ? p->max_rcvbuf : p->max_sndbuf;
    long inc = rcv ? inc0.rcvbuf : inc0.sndbuf;
    bool seen = real != NULL && real->valid;
    int held = seen ? real->s.by[rcv ? CLIENTS_RCVBUF : CLIENTS_SNDBUF] : 0;

    if (wb == SEARCH_AUTO)
        return wb;
    /* The search kept the value in force: only a buffer that holds real
     * connections back changes (the trials could not have told it from a
     * larger one); the others stay as they are written. */
    if (kept && !(held > 0 && real->bdp[b] > 0))
        return wb;
    if (held > 0 && real->bdp[b] > 0) {
        /* Four times the estimate: it is a lower bound of what the path
         * needs (clients_watch.c: a connection held back moves what its
         * buffer lets through, whatever the path could carry), so two
         * lattice steps a cycle: a path that needs ten times its buffer is
         * covered in two cycles (steering starts the next one), and an
         * overshoot costs only kernel memory, within the cap. One step
         * (twice) left a 64K client of a 40 ms / 100 Mbit/s path at 256K
         * after a cycle, half of its 500 KB product. */
        long need = lattice_up(p, HELD_STEP * real->bdp[b], cap);
        long size;

        /* Held back under autotuning at a buffer of buf_max: an explicit
         * size helps only above it (the kernel doubles a request), and
         * none may when the cap is below it: autotuning stays. */
        if (inc == SEARCH_AUTO && real->buf_max[b] > 0) {
            if (2 * cap <= real->buf_max[b] &&
                (!facts_listener_explicit(f, inc0, b) || o->restart_smbd)) {
                why_add(out,
                        "%s autotuning: real connections held back by the server's %s have %ld "
                        "bytes under autotuning, more than %s=%ld (the largest allowed) would "
                        "give them",
                        buf_opt[b], buf_words[b], real->buf_max[b], buf_opt[b], cap);
                return SEARCH_AUTO;
            }
            if (lattice_up(p, real->buf_max[b], cap) > need)
                need = lattice_up(p, real->buf_max[b], cap);
        }
        size = wb > need ? wb : need;
        why_add(out,
                "%s=%ld: real connections held back by the server's %s (%d of %d) had a "
                "bandwidth-delay product of up to %.0f bytes, which it covers%s",
                buf_opt[b], size, buf_words[b], held, real->s.connections, real->bdp[b],
                size == cap && HELD_STEP * real->bdp[b] > cap ? " as far as the kernel's cap allows"
                                                              : "");
        if (inc == SEARCH_AUTO && f->tcp_max_known && real->buf_max[b] >= f->tcp_max[b])
            why_add(out,
                    "under autotuning they were capped by %s's maximum (%ld): raising it "
                    "would let autotuning serve them instead",
                    tcp_sysctl[b], f->tcp_max[b]);
        return size;
    }
    if (!facts_listener_explicit(f, inc0, b) || o->restart_smbd) {
        why_add(out,
                "%s autotuning: loopback trials cannot rank sizes above the small-buffer cliff, "
                "and %s",
                buf_opt[b],
                !seen                      ? "smbd's real connections could not be read"
                : real->s.connections == 0 ? "no real connection was there to ask for more"
                : held == 0 ? "no real connection is held back by the server's buffer"
                            : "the real connections held back gave no round trip to size it by");
        return SEARCH_AUTO;
    }
    /* restart_off: restart_smbd is on but its restart failed this run
     * (tuner_restart_failed()); telling the admin to set what is already
     * set would send them the wrong way. */
    why_add(out,
            "%s=%ld on loopback trials alone (no real connection held back by the server's %s): "
            "autotuning cannot take effect before smbd restarts (its listener holds explicit "
            "sizes, %s)",
            buf_opt[b], wb, buf_words[b],
            o->restart_off ? "restart_smbd = yes, but smbd's restart failed: restarts are off "
                             "until `systemctl reload smbtuned`"
                           : "restart_smbd = no");
    return wb;
}

int outcome_decide(struct outcome *out, const struct search *s, const struct tally *tally,
                   const struct facts *f, const struct tuner_opts *o, const char *value0,
                   struct search_config inc0, bool auto_blocked,
                   const struct clients_watch_summary *real, bool probe_loopback)
{
    struct search_config w = search_incumbent(s);
    bool kept = search_config_eq(w, inc0);
    double wr, rr;

    memset(out, 0, sizeof(*out));
    /* Kept too: a tied search from a line that names one size starts from
     * that size for both (search_init), and the line itself is never
     * measured; ending where it started, it has no evidence that the
     * other buffer's autotuning is worse, so nothing changes. */
    if (search_params_of(s)->tied && !kept &&
        (inc0.rcvbuf == SEARCH_AUTO) != (inc0.sndbuf == SEARCH_AUTO)) {
        long named = inc0.rcvbuf > inc0.sndbuf ? inc0.rcvbuf : inc0.sndbuf;

        if (w.rcvbuf == named && w.sndbuf == named) {
            why_add(out,
                    "tied: no size beat %ld, which the line names for one buffer; the "
                    "other's autotuning was not measured against it, so the line stays",
                    named);
            w = inc0;
            kept = true;
        }
    }
    /* Kept too: loopback trials that keep a size holding real clients back
     * could not have told it from a larger one. */
    if (facts_trials_on_loopback(o, probe_loopback)) {
        const struct search_params *p = search_params_of(s);

        w.rcvbuf = loopback_size(out, p, f, o, inc0, real, SOCKOPTS_RCVBUF, w.rcvbuf, kept);
        w.sndbuf = loopback_size(out, p, f, o, inc0, real, SOCKOPTS_SNDBUF, w.sndbuf, kept);
        kept = search_config_eq(w, inc0);
    }
    out->w = w;
    /* Kept: the value stays as written (its start may be spelled otherwise,
     * SO_RCVBUF=0 as 1). */
    out->after = kept ? strdup(value0) : sockopts_with(value0, w.rcvbuf, w.sndbuf);
    if (out->after == NULL)
        return -ENOMEM;
    if (auto_blocked)
        report_auto_after_restart(s, tally, search_incumbent(s));
    cap_notices(s, o, w);
    if (!kept && o->mode == TUNER_TUNE) {
        out->kind = OUTCOME_COMMIT;
        /* Only reachable with restart_smbd = yes (otherwise AUTO is no
         * candidate while the listener holds explicit sizes). */
        out->restart =
            (w.rcvbuf == SEARCH_AUTO && facts_listener_explicit(f, inc0, SOCKOPTS_RCVBUF)) ||
            (w.sndbuf == SEARCH_AUTO && facts_listener_explicit(f, inc0, SOCKOPTS_SNDBUF));
        /* the words of the commit come once it is written */
        if (out->why[0])
            journal_log(LOG_NOTICE, "%s", out->why);
        return 0;
    }
    if (!kept) {
        out->kind = OUTCOME_ADVISE;
        snprintf(out->what, sizeof(out->what),
                 "advice: socket options = %s (advise mode: smb.conf not changed)%s%s", out->after,
                 out->why[0] ? ": " : "", out->why);
    } else if (out->why[0]) {
        /* the trials' winner undone by the rule above */
        out->kind = OUTCOME_KEEP;
        snprintf(out->what, sizeof(out->what), "kept socket options = %s: %s", value0, out->why);
    } else if (report_buffers_do_not_matter(s, tally)) {
        out->kind = OUTCOME_KEEP;
        report_rates(s, tally, w, &wr, &rr);
        snprintf(out->what, sizeof(out->what),
                 "buffers do not limit this share: every size tried "
                 "gave the same rates (write %.1f, read %.1f MB/s); kept socket options = %s",
                 wr, rr, value0);
    } else {
        out->kind = OUTCOME_KEEP;
        snprintf(out->what, sizeof(out->what), "kept socket options = %s: no neighbour did better",
                 value0);
    }
    journal_log(LOG_NOTICE, "%s", out->what);
    return 0;
}

int outcome_stopped(struct outcome *out, const char *value0, struct search_config inc0,
                    const char *why)
{
    memset(out, 0, sizeof(*out));
    out->kind = OUTCOME_STOPPED;
    out->w = inc0;
    out->after = strdup(value0);
    snprintf(out->what, sizeof(out->what), "%s: nothing changed", why);
    return out->after ? 0 : -ENOMEM;
}

void outcome_written(struct outcome *out, const char *new_value)
{
    snprintf(out->what, sizeof(out->what), "committed socket options = %s%s%s", new_value,
             out->why[0] ? ": " : "", out->why);
}

void outcome_failed(struct outcome *out, const char *why)
{
    out->kind = OUTCOME_KEEP;
    snprintf(out->what, sizeof(out->what), "not written: %s", why);
}

bool outcome_record(const struct outcome *out, const struct search *s, const struct tally *tally,
                    struct search_config inc0, struct state *st)
{
    bool in_force = out->kind == OUTCOME_COMMIT || search_config_eq(out->w, inc0);
    struct search_config c = in_force ? out->w : inc0;
    double wr, rr;

    /* The rates of what is in force: advised, that is inc0, not the
     * winner (the next cycle's first sample is compared with them). */
    report_rates(s, tally, c, &wr, &rr);
    st->have_incumbent = true;
    st->rcvbuf = c.rcvbuf;
    st->sndbuf = c.sndbuf;
    /* A rate never measured (every write timed out: no read) is kept as
     * 0, none: the state file takes digits only, and "nan" would make it
     * damaged, which holds the tuner off. */
    st->write_mbps = isnan(wr) ? 0 : wr;
    st->read_mbps = isnan(rr) ? 0 : rr;
    /* Advice converges too: the next cycles verify the advised value on
     * trials instead of searching again for the same advice every
     * interval. Its reference is kept with the advice and the line it was
     * searched from (tuner_ref_keep), so that a restart verifies it while
     * that line stays in force. */
    return in_force || out->kind == OUTCOME_ADVISE;
}

void outcome_free(struct outcome *out)
{
    free(out->after);
    out->after = NULL;
}
