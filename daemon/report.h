/* report: what a cycle measured, told to the admin: the rates of a
 * configuration, the --once table or JSON object, and the notices that
 * compare configurations (buffers do not matter; autotuning after a
 * restart).
 *
 * Rates come from the search's own estimates (search_estimate: the robust
 * geometric mean of a buffer's samples), so that the numbers a decision
 * rests on, the numbers in the report and those kept in the state file are
 * one statistic. The only samples the search never sees are those of
 * AUTO taken after a search that could not offer it (auto checks): the
 * tally keeps their log rates and gives their geometric mean. */
#ifndef SMBTUNED_REPORT_H
#define SMBTUNED_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "search.h"

#define REPORT_MAX_TRIED 128 /* configurations a cycle remembers having tried */
#define REPORT_MAX_AUTO 16   /* auto-check samples kept */

/* What one cycle's probes added up to. */
struct tally {
    double started; /* child_now() at its start */
    int samples;
    long long bytes;
    struct search_config tried[REPORT_MAX_TRIED];
    int ntried;
    double auto_log[2][REPORT_MAX_AUTO]; /* [0] write, [1] read: log rates */
    int nauto[2];
    bool reported; /* the cycle's --once report (or failure object) is out */
};

/* A cycle's start; report_first_error() forgets the last cycle's too. */
void tally_begin(struct tally *t, double now);

/* One sample of c (auto_check: an AUTO sample the search is not told). */
void tally_add(struct tally *t, struct search_config c, const struct search_sample *x,
               long long bytes, bool auto_check);

/* The write and read rates of c: the search's estimate, or for AUTO
 * outside the search the auto checks'. NAN when there is none. */
void report_rates(const struct search *s, const struct tally *t, struct search_config c, double *w,
                  double *r);

/* Every configuration tried gave the same rates within the search's
 * smallest gain: the share is limited by something else (the link's
 * rate, disk, CPU), not by socket buffers. */
bool report_buffers_do_not_matter(const struct search *s, const struct tally *t);

/* What autotuning measured against the winner w, which the search could
 * not offer: a notice, so that the admin decides whether a restart of
 * smbd is worth it. Nothing when AUTO was not measured. */
void report_auto_after_restart(const struct search *s, const struct tally *t,
                               struct search_config w);

/* --once --progress: a line per sample. */
void report_progress(FILE *f, int n, const char *cfg, double write_mbps, double read_mbps,
                     bool timeout);

/* The first sample after Samba, the kernel or smb.conf changed (what
 * says which), against the rates st kept from before; unless those were
 * measured by a probe that computed its rates another way (!comparable:
 * an smbtuned upgraded at the same time), when a difference would be the
 * probe's, not the upgrade's: then the rates alone. */
struct state;
void report_fingerprint_change(const char *what, const struct state *st, double write_mbps,
                               double read_mbps, bool comparable);

/* What a journal event carries besides its message (lib/journal_ids.h
 * and systemd/smbtuned.catalog): any of these; a NULL, negative or NAN
 * one is left out, and samples 0. */
struct event_fields {
    const char *smb_conf;
    const struct search_config *c;
    int samples;                  /* 0: left out */
    double write_mbps, read_mbps; /* 0 or NAN: left out, unless measured */
    bool measured;                /* a probe's rates: 0 is one (a stalled trial) */
    /* more "NAME=value" fields of this kind of event (SMBTUNED_ERROR,
     * SMBTUNED_SAMBA_BEFORE ...), NULL-terminated, or NULL */
    const char *const *more;
};
void report_event(const char *message_id, int prio, const struct event_fields *f, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));

/* A failure that ends or skips a cycle: a LOG_ERR entry with
 * JOURNAL_ID_ERROR and SMBTUNED_ERROR=what (a word: "probe", "commit",
 * "state" ...), so that `journalctl SMBTUNED_ERROR=probe` finds them. */
void report_error(const char *what, const char *smb_conf, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The message of the first report_error since tally_begin, "" when none:
 * the cause (what follows from it is told after it), which --once's
 * failure object gives as its error. */
const char *report_first_error(void);

struct report_in {
    const char *before;               /* socket options when the cycle began */
    const char *after;                /* what it ends with, or would (advise) */
    struct search_config inc0, rated; /* their configurations, for the rates */
    bool committed;
    bool advise;
    const char *what; /* the outcome in words */
    double now;       /* child_now() */
};

/* The --once report: a table, or with json one object on a line. Marks
 * t reported. */
void report_print(FILE *f, bool json, const struct search *s, struct tally *t,
                  const struct report_in *in);

/* --once --json when no report came (a hold, a failed or stopped cycle,
 * a run refused before its cycle: t NULL): one object on a line all the
 * same, so that a script always has one to read, with the keys in this
 * order: result ("held", "failed" or "error"), error (why, in words),
 * mode ("tune", "advise", null when not known), and what the cycle's
 * probes did, as in the report (samples, bytes, seconds; 0 without t).
 * Nothing when t is reported already (the report said it all); marks t
 * reported. */
void report_print_failure(FILE *f, struct tally *t, const char *result, const char *error,
                          const char *mode, double now);

#endif
