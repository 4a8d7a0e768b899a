/* tuner_ref: the verification reference across restarts (see
 * tuner_int.h). The state file keeps the converged search's reference,
 * refined by every verification sample, with the samples it does not hold
 * yet and the settings it was measured with; a restart goes on verifying
 * from it instead of searching again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "tuner_int.h"

void tuner_settings_words(const struct tuner_opts *o, char *buf, size_t len)
{
    const struct probe_params *p = &o->probe;
    const struct search_params *q = &o->search;

    /* What the rates measured depend on, and the sizes the search may
     * take: not the credentials (a secret's path is no rate), the
     * deadline (it bounds a stall, not a rate) or min_gain. First, how
     * the probe computes a rate: TUNER_RATES_VERSION. */
    snprintf(buf, len,
             "rates=" TUNER_RATES_VERSION
             " url=%s directory=%s size=%lld request_size=%lld duration=%g socket_options=%s "
             "trials=%d tied=%d sizes=%ld-%ld/%ld restart=%s mode=%s",
             p->url ? p->url : "-", p->directory ? p->directory : "-", p->size, p->request_size,
             p->duration_s, p->socket_options ? p->socket_options : "-", (int)o->trials,
             q->tied ? 1 : 0, q->min_size, q->max_rcvbuf, q->max_sndbuf,
             /* Whether smbd may be restarted decides whether autotuning is
              * a candidate while smbd's listener holds explicit sizes
              * (facts_search_bounds): turned on, the search must look
              * again (the journal's advice says so). "off": it chose among
              * explicit sizes only because a restart failed; a reload or
              * a start searches again. */
             o->restart_off    ? "off"
             : o->restart_smbd ? "yes"
                               : "no",
             /* advice converges unwritten (outcome_record): a reload into
              * tune mode must search, and write, rather than verify it */
             o->mode == TUNER_ADVISE ? "advise" : "tune");
}

bool tuner_ref_other_rates(const struct state *st)
{
    static const char mine[] = "rates=" TUNER_RATES_VERSION " ";

    return st->ref_settings != NULL && strncmp(st->ref_settings, mine, sizeof(mine) - 1) != 0;
}

struct search_config tuner_verified(const struct tuner *t)
{
    return t->s != NULL ? search_incumbent(t->s) : t->inc0;
}

/* verify_recent's samples in words for the state file ("" for none). */
static void recent_words(const struct verify *v, char *buf, size_t len)
{
    double y[VERIFY_WINDOW][2];
    size_t used = 0;
    int n = 0;

    buf[0] = '\0';
    if (v == NULL || verify_recent(v, y, &n) < 0)
        return;
    for (int j = 0; j < n && used < len; j++)
        used += (size_t)snprintf(buf + used, len - used, "%s%.17g,%.17g", j ? " " : "", y[j][0],
                                 y[j][1]);
    if (used >= len)
        buf[0] = '\0'; /* cannot be: 10 pairs of %.17g */
}

/* The state file's recent samples into a watch made from its reference:
 * words that do not read as such are left out (the reference alone is
 * still a watch). True when they raise an alarm. */
static bool replay_words(struct verify *v, const char *words)
{
    const char *p = words;
    double y[2];
    char *end;
    int r;

    for (int j = 0; p != NULL && *p != '\0' && j < VERIFY_WINDOW; j++) {
        y[0] = strtod(p, &end);
        if (end == p || *end != ',')
            return false;
        p = end + 1;
        y[1] = strtod(p, &end);
        if (end == p || (*end != ' ' && *end != '\0'))
            return false;
        p = *end ? end + 1 : end;
        r = verify_replay(v, y);
        if (r == VERIFY_RESEARCH)
            return true;
        if (r < 0) /* an infinite rate: the rest is not read */
            return false;
    }
    return false;
}

/* Only when what verification samples is what the state records in
 * force: the loopback rules may keep another line than the search's
 * winner (outcome_decide), whose reference it is not. */
void tuner_ref_store(struct tuner *t, const struct search_reference *ref, const struct verify *v)
{
    struct state *st = &t->st;
    struct search_config rec = {st->rcvbuf, st->sndbuf};
    char words[STATE_SETTINGS_LEN];

    state_unconverge(st);
    if (!st->have_incumbent || !search_config_eq(tuner_verified(t), rec))
        return;
    tuner_settings_words(&t->o, words, sizeof(words));
    if (state_set_str(&st->ref_settings, words) < 0)
        return;
    recent_words(v, words, sizeof(words));
    if (state_set_str(&st->ref_recent, words[0] ? words : NULL) < 0)
        return;
    st->converged = true;
    st->ref_channels = ref->nch;
    for (int i = 0; i < ref->nch; i++) {
        st->ref_rate[i] = ref->ch[i].rate;
        st->ref_mbps[i] = exp(ref->ch[i].mean);
        st->ref_n[i] = ref->ch[i].n;
        st->ref_ss[i] = ref->ch[i].ss;
        st->ref_df[i] = ref->ch[i].df;
        st->ref_reject[i] = ref->ch[i].reject;
    }
}

void tuner_ref_keep(struct tuner *t)
{
    struct search_reference ref;

    if (t->converged && search_reference(t->s, &ref) == 0)
        tuner_ref_store(t, &ref, NULL);
    else
        state_unconverge(&t->st);
}

void tuner_unconverge(struct tuner *t)
{
    t->converged = false;
    state_unconverge(&t->st);
}

bool tuner_ref_restore(struct tuner *t)
{
    const struct state *st = &t->st;
    struct search_reference ref = {.nch = (int)st->ref_channels};
    struct search_config won = {st->rcvbuf, st->sndbuf};
    char words[STATE_SETTINGS_LEN];

    if (t->o.once || t->s != NULL || t->v != NULL || !st->converged || !st->have_incumbent ||
        !search_config_eq(won, t->inc0) || ref.nch < 1 || ref.nch > 2)
        return false;
    /* measured with other settings (another url, size, trials mode, or
     * other sizes allowed): other rates, or another search's range */
    tuner_settings_words(&t->o, words, sizeof(words));
    if (st->ref_settings == NULL || strcmp(st->ref_settings, words) != 0) {
        if (tuner_ref_other_rates(st))
            journal_log(LOG_INFO, "the reference was measured by a probe that computed its "
                                  "rates another way than this version's: searching again");
        else
            journal_log(LOG_INFO, "the probe or search settings changed since the search "
                                  "before the restart: searching again");
        return false;
    }
    for (int i = 0; i < ref.nch; i++) {
        if (!(st->ref_mbps[i] > 0))
            return false;
        ref.ch[i] = (struct search_channel){.rate = (enum search_rate)st->ref_rate[i],
                                            .mean = log(st->ref_mbps[i]),
                                            .n = (int)st->ref_n[i],
                                            .ss = st->ref_ss[i],
                                            .df = st->ref_df[i],
                                            .reject = st->ref_reject[i]};
    }
    if (verify_new(&ref, t->o.search.drift_min, &t->v) < 0)
        return false;
    /* an alarm in what the last run saw (the state file may have been
     * saved just before the sample that would have raised it) */
    if (st->ref_recent != NULL && replay_words(t->v, st->ref_recent)) {
        journal_log(LOG_INFO, "%s", verify_why(t->v));
        verify_free(t->v);
        t->v = NULL;
        return false;
    }
    journal_log(LOG_INFO, "the search before the restart converged on the line in force: "
                          "verifying it");
    return true;
}
