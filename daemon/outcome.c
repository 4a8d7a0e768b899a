/* outcome: see outcome.h. */
#include "outcome.h"

#include <errno.h>
#include <math.h>
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

int outcome_decide(struct outcome *out, const struct search *s, const struct tally *tally,
                   const struct facts *f, const struct tuner_opts *o, const char *value0,
                   struct search_config inc0, bool auto_blocked)
{
    struct search_config w = search_incumbent(s);
    bool kept = search_config_eq(w, inc0);
    double wr, rr;

    memset(out, 0, sizeof(*out));
    out->w = w;
    /* Kept: the value stays as written (its start may be spelled otherwise,
     * SO_RCVBUF=0 as 1). */
    out->after = kept ? strdup(value0) : sockopts_with(value0, w.rcvbuf, w.sndbuf);
    if (out->after == NULL)
        return -ENOMEM;
    if (auto_blocked)
        report_auto_after_restart(s, tally, w);
    cap_notices(s, o, w);
    if (!kept && o->mode == TUNER_TUNE) {
        out->kind = OUTCOME_COMMIT;
        /* Only reachable with restart_smbd = yes (otherwise AUTO is no
         * candidate while the listener holds explicit sizes). */
        out->restart =
            (w.rcvbuf == SEARCH_AUTO && facts_listener_explicit(f, inc0, SOCKOPTS_RCVBUF)) ||
            (w.sndbuf == SEARCH_AUTO && facts_listener_explicit(f, inc0, SOCKOPTS_SNDBUF));
        return 0;
    }
    if (!kept) {
        out->kind = OUTCOME_ADVISE;
        snprintf(out->what, sizeof(out->what),
                 "advice: socket options = %s (advise mode: smb.conf not changed)", out->after);
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

int outcome_budget(struct outcome *out, const char *value0, struct search_config inc0)
{
    memset(out, 0, sizeof(*out));
    out->kind = OUTCOME_BUDGET;
    out->w = inc0;
    out->after = strdup(value0);
    snprintf(out->what, sizeof(out->what), "budget spent: nothing changed");
    return out->after ? 0 : -ENOMEM;
}

void outcome_written(struct outcome *out, const char *new_value)
{
    snprintf(out->what, sizeof(out->what), "committed socket options = %s", new_value);
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
    st->cycles++;
    return in_force;
}

void outcome_free(struct outcome *out)
{
    free(out->after);
    out->after = NULL;
}
