/* tuner_ref: the verification reference across restarts (see
 * tuner_int.h). The state file keeps the converged search's reference,
 * refined by every verification sample, with the samples it does not hold
 * yet and the settings it was measured with, and in advise mode the advice
 * it is of and the line that was searched from; a restart goes on
 * verifying from it instead of searching again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "sockopts.h"
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

bool tuner_advice(const struct tuner *t, struct search_config *w)
{
    if (t->st.advice == NULL)
        return false;
    *w = (struct search_config){t->st.advice_rcvbuf, t->st.advice_sndbuf};
    return true;
}

bool tuner_advice_is(const struct tuner *t, struct search_config c)
{
    struct search_config w;

    return tuner_advice(t, &w) && search_config_eq(c, w);
}

struct search_config tuner_verified(const struct tuner *t)
{
    struct search_config w;

    if (t->s != NULL)
        return search_incumbent(t->s);
    /* restored: the advice (advise mode), or else the line in force */
    return tuner_advice(t, &w) ? w : t->inc0;
}

bool tuner_advice_outdated(struct tuner *t, struct search_config from)
{
    if (t->o.mode != TUNER_ADVISE || search_config_eq(from, t->inc0))
        return false;
    journal_log(LOG_INFO, "the line in force changed since the advice: searching again");
    tuner_unconverge(t);
    return true;
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
 * force, or the advice it records (advise mode): the loopback rules may
 * keep or advise another line than the search's winner (outcome_decide),
 * whose reference it is not. */
void tuner_ref_store(struct tuner *t, const struct search_reference *ref, const struct verify *v)
{
    struct state *st = &t->st;
    struct search_config rec = {st->rcvbuf, st->sndbuf}, w = tuner_verified(t);
    char words[STATE_SETTINGS_LEN];

    if (st->advice != NULL ? !tuner_advice_is(t, w)
                           : !st->have_incumbent || !search_config_eq(w, rec)) {
        state_unconverge(st);
        return;
    }
    tuner_settings_words(&t->o, words, sizeof(words));
    if (state_set_str(&st->ref_settings, words) < 0) {
        state_unconverge(st);
        return;
    }
    recent_words(v, words, sizeof(words));
    if (state_set_str(&st->ref_recent, words[0] ? words : NULL) < 0) {
        state_unconverge(st);
        return;
    }
    st->converged = true;
    st->ref_channels = ref->nch;
    for (int i = 0; i < 2; i++) {
        const struct search_channel *c = &ref->ch[i];
        bool set = i < ref->nch;

        st->ref_rate[i] = set ? c->rate : 0;
        st->ref_mbps[i] = set ? exp(c->mean) : 0;
        st->ref_n[i] = set ? c->n : 0;
        st->ref_ss[i] = set ? c->ss : 0;
        st->ref_df[i] = set ? c->df : 0;
        st->ref_reject[i] = set ? c->reject : 0;
    }
}

/* The advice a search converged on (advise mode), into the state file
 * beside its reference: only when it is what verification samples (the
 * loopback rules may advise another value than the winner). */
static void advice_keep(struct tuner *t)
{
    struct state *st = &t->st;
    const struct outcome *out = &t->out;

    if (out->kind != OUTCOME_ADVISE || out->after == NULL ||
        !search_config_eq(out->w, tuner_verified(t)) || state_set_str(&st->advice, out->after) < 0)
        return;
    st->advice_rcvbuf = out->w.rcvbuf;
    st->advice_sndbuf = out->w.sndbuf;
    st->advised_from_rcvbuf = t->searched_from.rcvbuf;
    st->advised_from_sndbuf = t->searched_from.sndbuf;
}

void tuner_ref_keep(struct tuner *t)
{
    struct search_reference ref;

    /* the reference of before goes, and the advice it was of */
    state_unconverge(&t->st);
    if (!t->converged || search_reference(t->s, &ref) < 0)
        return;
    advice_keep(t);
    tuner_ref_store(t, &ref, NULL);
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
    struct search_config won = {st->rcvbuf, st->sndbuf}, from = won;
    bool advice = tuner_advice(t, &won);
    char words[STATE_SETTINGS_LEN], cs[96];

    if (advice)
        from = (struct search_config){st->advised_from_rcvbuf, st->advised_from_sndbuf};
    if (t->o.once || t->s != NULL || t->v != NULL || !st->converged || ref.nch < 1 || ref.nch > 2)
        return false;
    if (!advice && (!st->have_incumbent || !search_config_eq(won, t->inc0)))
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
    /* advice rests on the line it was searched from, as in a running
     * daemon (tuner_cycle_go) */
    if (advice && tuner_advice_outdated(t, from))
        return false;
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
    t->searched_from = from;
    /* the advice as the line in force reads now: the admin's other
     * options may have changed since, its buffers have not */
    if (advice) {
        char *v = sockopts_with(t->value0, won.rcvbuf, won.sndbuf);

        /* (out of memory: the advice as it was recorded) */
        if (v != NULL)
            state_set_str(&t->st.advice, v);
        free(v);
    }
    if (advice)
        journal_log(LOG_INFO,
                    "the advice from before the restart, %s (socket options = %s), searched "
                    "from the line in force: verifying it",
                    search_config_str(won, cs, sizeof(cs)), st->advice);
    else
        journal_log(LOG_INFO, "the search before the restart converged on the line in force: "
                              "verifying it");
    return true;
}
