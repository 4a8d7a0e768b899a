/* owned_int: what the owned module's files (owned.c, owned_back.c,
 * owned_revert.c, owned_read.c, owned_restart.c) share; nothing else
 * includes this. */
#ifndef SMBTUNED_OWNED_INT_H
#define SMBTUNED_OWNED_INT_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "apply.h"
#include "err.h"
#include "owned.h"

/* A job's bound: the edit lock (10 s) and testparm before and after the
 * write (60 s each at most), then smbcontrol (30 s) or a restart of
 * smbd: testparm for its pid directory (60 s), the wait for the restart's
 * end (45 s), and, should it fail, the take-back (the edit lock, 10 s,
 * and smbcontrol, 30 s): 275 s at worst, with the D-Bus calls' round
 * trips in what is left. A job killed at it leaves what a kill -9 would:
 * a record the next step settles. */
#define OWNED_JOB_DEADLINE_S 300.0

/* What a job tells its parent: plain bytes, the value after them. */
struct reply {
    int r;                           /* the edit: 0 or -errno */
    int apply_r;                     /* telling smbd: 0 or -errno */
    bool checked, undone, restarted; /* a confirm: see confirm() */
    bool not_restarted;              /* a restart it would want, left (--dry-run) */
    bool late;                       /* a revert: BACK_LATE (back_plan) */
    /* a revert: a commit that needs smbd restarted found files open on
     * it, or could not tell (restart_msg says) */
    bool files_open;
    bool unrestarted; /* a revert: smbd could not be restarted for it (restart_msg) */
    /* unrestarted: systemd refused the restart for a job already queued
     * for smbd (an admin's stop), no fault of smbd's unit */
    bool restart_queued;
    /* a restart wanted, and no smbd runs: none ran (apply_restart_check),
     * or it was stopping, or it is down after the restart (down_after:
     * said as a warning); restart_msg says which */
    bool not_running, down_after;
    bool confirmed; /* a take-back's job confirmed a commit in force */
    int undo;       /* a confirm undone: how (smbconf_confirm's *how) */
    int line;
    char msg[sizeof(((struct err *)0)->msg)];
    char apply_msg[sizeof(((struct err *)0)->msg)];
    char restart_msg[sizeof(((struct err *)0)->msg)];
    char file[PATH_MAX]; /* "" when the line is nowhere (Samba's default) */
    /* followed by the new value, NUL-terminated */
};

struct owned {
    sd_event *ev;
    const struct tuner_opts *o;
    struct state *st;
    char *live_value;
    struct job *job;
    sd_event_source *defer; /* a take-back with nothing to do, told from the loop */
    /* the operation under way */
    enum owned_kind kind;
    const char *expect;
    struct search_config c;
    bool restart, keep;
    owned_put_fn put_done;
    owned_back_fn back_done;
    void *ud;
    bool hold_on_disk;  /* st->hold was saved by us or read from the file */
    char *keep_value;   /* a commit in force that a take-back confirms */
    bool confirming;    /* the job under way confirms, not reverts */
    bool wants_restart; /* back_plan: the commit to confirm needs smbd restarted */
    bool reading;       /* the job under way only reads (owned_read.c) */
    owned_read_fn read_done;
    /* why the last read or take-back failed ("" after one that did not:
     * owned_last_error) */
    char error[sizeof(((struct err *)0)->msg)];
    pid_t stuck_pid; /* a job of ours killed that had not ended (see owned_stuck()) */
    /* why a restart of smbd failed, since owned_restart_failure asked */
    char restart_failed[sizeof(((struct err *)0)->msg)];
    bool restart_failed_new;
    /* live_value is in smb.conf as the put's job wrote it (its reply said
     * so), and no job of ours has written, or may have written, anything
     * else since: none ended without its reply, was killed or cancelled
     * half-way, or took our line back. Then what else the line holds is
     * an admin's doing, the trial's original value too (owned_settle).
     * False after a start: see owned_recover. */
    bool live_sure;
};

/* -EBUSY, said, while a job of ours that was killed may still write
 * smb.conf (even after a `--resume`): nothing of ours may race it. */
int owned_refuse_while_stuck(const struct owned *w);

/* A failure of a read or a take-back: told to the journal (LOG_ERR, or
 * prio) and kept for owned_last_error. */
void owned_error(struct owned *w, int prio, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The rest, shared by owned.c (the core and the put), owned_back.c (the
 * take-back's plan and the confirm), owned_revert.c (the revert and what
 * it came to) and owned_restart.c (smbd restarted for a commit); each is
 * described where it is defined. */

/* owned.c */
enum apply_method owned_trial_apply(const struct tuner_opts *o);
void owned_reload(struct owned *w);
bool owned_outside_window(const struct tuner_opts *o);
void owned_stuck(struct owned *w, pid_t pid, const char *doing);
bool owned_still_stuck(const struct owned *w);

/* owned_revert.c */
void owned_revert(struct owned *w, struct reply *rep);
int owned_settle(struct owned *w, const struct reply *rep);

/* owned_restart.c */
void owned_demote(struct state *st);
int owned_smbd_restart(struct owned *w, struct reply *rep);
void owned_files_back(struct owned *w, struct reply *rep);

#endif
