/* outcome: what a finished search comes to. Given the search, the
 * cycle's tally and the facts: keep the value in force, advise, or commit
 * the winner (and whether smbd must restart for it to reach new
 * connections); the words that say so; the rates kept in the state file.
 * No I/O but the notices it logs. */
#ifndef SMBTUNED_OUTCOME_H
#define SMBTUNED_OUTCOME_H

#include <stdbool.h>

#include "clients_watch.h"
#include "facts.h"
#include "report.h"
#include "search.h"
#include "state.h"
#include "tuner_opts.h"

enum outcome_kind {
    OUTCOME_KEEP,    /* the value in force stays */
    OUTCOME_ADVISE,  /* a better value, told, not written (advise mode) */
    OUTCOME_COMMIT,  /* a better value, to be written */
    OUTCOME_STOPPED, /* the search ended before it converged: its byte budget ran out, or
                      * its time window closed */
};

struct outcome {
    enum outcome_kind kind;
    struct search_config w; /* the configuration it rates (the winner) */
    char *after;            /* the value it ends with, or would (malloc'ed) */
    bool restart;           /* a commit that needs smbd restarted (restart_smbd = yes) */
    char what[1280];        /* the outcome in words */
    /* Why the winner of loopback trials was not taken as it was, or was
     * taken only because AUTO cannot take effect: which figure decided
     * it; "" when the trials' winner stands on its own. */
    char why[768];
};

/* What the search s (converged) comes to from value0 (whose configuration
 * is inc0). real: this cycle's summary of smbd's real connections (NULL
 * or not valid: none read). probe_loopback: a probe of the search found
 * its connection on this machine (probe_result.loopback). Loopback trials
 * (facts_trials_on_loopback)
 * cannot rank sizes above the small-buffer cliff, so there an explicit
 * size of the winner is committed only if real connections held back by
 * that buffer ask for one (then at least what covers their largest
 * bandwidth-delay product), otherwise autotuning where it can take
 * effect; a size the search kept is raised the same way when real
 * connections are held back by it. out->why says which. -ENOMEM. */
int outcome_decide(struct outcome *out, const struct search *s, const struct tally *tally,
                   const struct facts *f, const struct tuner_opts *o, const char *value0,
                   struct search_config inc0, bool auto_blocked,
                   const struct clients_watch_summary *real, bool probe_loopback);

/* The outcome of a search stopped before it converged (its byte budget
 * spent, its time window closed): the line it started from stays; why, in
 * words, ends with ": nothing changed". -ENOMEM. */
int outcome_stopped(struct outcome *out, const char *value0, struct search_config inc0,
                    const char *why);

/* The commit went through with new_value in force (the words end with
 * out->why when there is one), or failed (why). */
void outcome_written(struct outcome *out, const char *new_value);
void outcome_failed(struct outcome *out, const char *why);

/* Keep in st what the search found: the configuration in force and its
 * rates. Returns whether verification watches the winner from now on:
 * it is the value in force, or advice (advise mode), which verification
 * samples on trials. */
bool outcome_record(const struct outcome *out, const struct search *s, const struct tally *tally,
                    struct search_config inc0, struct state *st);

void outcome_free(struct outcome *out);

#endif
