/* tuner_int: what the two halves of the tuner share. tuner.c runs a
 * cycle (its start, facts, busy check, end) and the API; tuner_search.c
 * the samples of a search or a verification and the search's end;
 * tuner_ref.c the verification reference kept across restarts. */
#ifndef SMBTUNED_TUNER_INT_H
#define SMBTUNED_TUNER_INT_H

#include <stdbool.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "clients_watch.h"
#include "facts.h"
#include "outcome.h"
#include "owned.h"
#include "report.h"
#include "state.h"
#include "tuner.h"
#include "verify.h"
#include "world.h"

enum tuner_state {
    T_IDLE,       /* between cycles: the timer runs (or nothing, after --once) */
    T_SETTLING,   /* taking back what a failed step left, before a cycle */
    T_READING,    /* reading the line in force (a job) */
    T_FACTS,      /* learning what the machine and smbd are */
    T_CLIENTS,    /* watching what smbd's real connections get */
    T_BUSY_CHECK, /* watching the clients' traffic before adding ours */
    T_PLACING,    /* putting a candidate where the probe sees it */
    T_PROBING,    /* the probe measures it */
    T_COMMITTING, /* writing the winner into our line */
    T_ENDING,     /* taking a trial back at the end of a cycle */
};

/* What the sample under way is for. */
enum sample_kind {
    S_SEARCH, /* told to the search */
    S_AUTO,   /* AUTO after a search that could not offer it: for the report */
    S_VERIFY, /* the winner, watched for drift */
};

struct tuner {
    sd_event *ev;
    struct tuner_opts o;
    struct world w;
    struct owned *line;
    struct state st;
    enum tuner_state state;
    sd_event_source *timer;
    bool failed;
    /* the state file had an edit pending at the start (tuner_recover): the
     * cut cycle starts again at once, whatever the schedule says */
    bool recovered;
    /* this cycle was deferred by the time window: the next one is at the
     * window's start, not an interval later */
    bool window_deferred;
    char status[256];
    /* tuner_settings_words() of o when it was set: o's strings point into
     * the caller's configuration, which a reload overwrites in place
     * before tuner_set_opts() is called, so o itself cannot say what the
     * settings were */
    char settings[STATE_SETTINGS_LEN];
    void (*status_fn)(void *ud, const char *status); /* tuner_on_status */
    void *status_ud;

    /* the cycle */
    char *value0; /* socket options in force when it began */
    struct search_config inc0;
    struct facts facts;
    bool converged;     /* s holds a converged search (verify mode) */
    bool reading_after; /* the search's outcome waits for the line read again */
    /* inc0 when the search began: in advise mode the winner is not
     * written, and a line changed by hand since asks for new advice */
    struct search_config searched_from;
    struct search *s; /* this cycle's search, or the last one's */
    struct verify *v; /* watches s's winner once converged, NULL before */
    struct tally tally;
    bool auto_blocked;   /* AUTO left out of the search: it cannot work yet */
    int auto_checks;     /* AUTO samples taken for the report since */
    char fp_change[512]; /* fingerprint change, told with the first sample */
    bool fp_other_rates; /* its rates before: computed another way */
    /* a probe of this search found its connection on this machine
     * (probe_result.loopback): its client trials are loopback trials
     * (facts_trials_on_loopback); set from the samples, so that no name
     * is resolved on the loop */
    bool probe_loopback;
    /* A search's commit that needed smbd restarted met files open on it
     * (tuner_files.c): the line in force it was searched from; later
     * cycles ask smbstatus before searching again, in files_job. */
    bool files_wait;
    struct search_config files_from;
    struct job *files_job;
    /* smbd's real connections this cycle (clients_watch.h) */
    struct clients_watch_summary real;
    /* a search started for them (steering), from this value in force:
     * once for each value and the clients its search saw (cycle_search),
     * so that a search that keeps it ends it */
    bool steered;
    struct search_config steered_from;
    /* the largest bandwidth-delay product of the clients held back when
     * that value's search began: clients that need twice that came since,
     * and steer again */
    double steered_bdp;
    /* the summary of the cycle of the last commit (this run's), against
     * which the connections opened since are compared */
    bool have_before;
    struct clients_watch_summary real_before;

    /* when the clients' traffic was last watched (CLOCK_MONOTONIC usec;
     * busy_rate: at the cycle's start, then between a search's samples) */
    uint64_t busy_at;
    struct search_config busy_next; /* the sample a watch between samples holds */

    /* the sample under way */
    enum sample_kind kind;
    struct search_config probe_cfg;
    bool probe_cut;       /* its deadline was cut short for a poor trial (abort_ratio) */
    char probe_url[2048]; /* what it measures: the target, or a shadow smbd's port */
    unsigned seq;

    struct outcome out; /* the end of a search, while its commit runs */
};

void tuner_set_status(struct tuner *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tuner_save(struct tuner *t);

/* The end of every cycle, well (ok) or not: nothing it put up (shadow,
 * live trial, probe file) outlives it. */
void tuner_cycle_end(struct tuner *t, bool ok);
/* A cycle's start (tuner_begin.c): the state, the settling, the line,
 * the checks, then tuner_cycle_go. */
void tuner_cycle_begin(struct tuner *t);
/* The journal's resume event: the hold ended while we ran. */
void tuner_resumed_told(const struct tuner *t, const char *what);
/* A time as the status and the journal say it: the hour within a day of
 * now, the date too further off. */
void tuner_when_str(time_t at, time_t now, char *buf, size_t len);

/* busy_rate (tuner.c): whether this cycle watches the clients' traffic
 * (not --once, smbd running); a watch of it, done told with t (state
 * T_BUSY_CHECK; <0 when it cannot start, the watch said why); and the
 * time of its end, to be noted by done. */
bool tuner_busy_watched(const struct tuner *t);
int tuner_busy_watch(struct tuner *t, world_busy_fn done);
void tuner_busy_watched_now(struct tuner *t);

/* ---- the verification reference across restarts (tuner_ref.c) ---- */

/* The search converged no longer (a drift, a change of Samba or the
 * kernel, a hold ended): in memory and in the state file's reference. */
void tuner_unconverge(struct tuner *t);
/* The probe and search settings a reference is measured with, in words
 * (state.ref_settings), led by how the probe's rates are computed:
 * TUNER_RATES_VERSION changes whenever the same transfer gives another
 * rate, so that a reference of the old kind is not verified against.
 * "2": each call's wait for its last answer is left out (probe_call_wait);
 * before, it was in, and rates on long paths were up to a fifth lower. */
#define TUNER_RATES_VERSION "2"
void tuner_settings_words(const struct tuner_opts *o, char *buf, size_t len);
/* Were the state's rates computed another way than this version's? Known
 * from a converged search's settings words only (false without them). */
bool tuner_ref_other_rates(const struct state *st);
/* Seconds until the time window opens, 0 while it is open or without one;
 * and the window in words (HH:MM-HH:MM). */
long tuner_window_wait(const struct tuner *t);
void tuner_window_str(const struct tuner *t, char *buf, size_t len);

/* After an edit step: a restart of smbd that failed for a fault of
 * smbd's unit (owned_restart.c took the commit back; owned_settle
 * records it, not for a stop of smbd queued) turns restart_smbd off until
 * a reload, saying so. */
void tuner_restart_failed(struct tuner *t);
/* What verification samples: the search's winner, or after a restart (no
 * search in memory) the advice restored (advise mode) or the line in
 * force. */
struct search_config tuner_verified(const struct tuner *t);
/* The state file's advice (advise mode: the search converged on a value
 * smb.conf does not hold): its buffers in *w. */
bool tuner_advice(const struct tuner *t, struct search_config *w);
/* Whether c is that advice: what a verified sample was of. */
bool tuner_advice_is(const struct tuner *t, struct search_config c);
/* In advise mode, the line in force is no longer the one the advice was
 * searched from (from; edited by hand, the advice applied or not): says
 * so, forgets the advice and its reference, and returns true: the cycle
 * searches again. */
bool tuner_advice_outdated(struct tuner *t, struct search_config from);
/* A reference into the state file (saved at the cycle's end), with
 * verification's recent samples (v; NULL at a search's end); the advice
 * it records stays when the reference is its. */
void tuner_ref_store(struct tuner *t, const struct search_reference *ref, const struct verify *v);
/* The converged search's reference at its end, with its advice in
 * advise mode (t->out); none when it did not converge. */
void tuner_ref_keep(struct tuner *t);
/* After a restart (no search in memory): the state file's converged
 * search, when its winner is the line in force, or its advice was
 * searched from the line in force (advise mode), and its settings are
 * these, is verified as before; true when the watch on it is set up. Not
 * for --once, which always searches. */
bool tuner_ref_restore(struct tuner *t);

/* After the checks at the start of a cycle: verify the winner, or search
 * (tuner_search.c). */
void tuner_cycle_go(struct tuner *t);
/* The end of a search (tuner_end.c): its outcome decided, committed and
 * told; a search stopped early keeping the line it started from (why: in
 * the status); whether the window closed before another sample (then
 * stopped there); at a stop by a signal, the outcome of a search that was
 * reading the line again before its end, recorded. */
void tuner_finish_search(struct tuner *t);
void tuner_stop_early(struct tuner *t, const char *why);
bool tuner_window_closed(struct tuner *t);
void tuner_end_stopped(struct tuner *t);
/* A new search from the line in force (tuner_search.c). */
void tuner_cycle_search(struct tuner *t);
/* Search, unless a search's commit met files open on smbd and they still
 * are (tuner_files.c): then the cycle is deferred. */
void tuner_files_then_search(struct tuner *t);
/* Forget the wait (a reload, a stop). */
void tuner_files_forget(struct tuner *t);

#endif
