/* owned: the socket options line smbtuned owns in smb.conf.
 *
 * Every value smbtuned puts there (a live trial, a commit) is recorded in
 * the state file before it reaches the disk, so that a run killed at any
 * moment can be settled by the next: a trial taken back, a commit kept.
 * Only our line is ever touched, and only while it holds what we wrote
 * (compare-and-set); a line someone else changed stands, and we hold off
 * (owned_hold) until `smbtuned --resume`. So we do when a job editing it
 * was killed and did not end (stuck in the kernel: it may still write):
 * the record of its edit stays, and nothing of ours writes while it lives
 * (owned_busy).
 *
 * Writing blocks (testparm before and after, smbcontrol): owned_put and
 * owned_take_back run it in a job (lib/job.h) and call their done function
 * from the loop later. The job records into the state file itself; the
 * state is read back from the disk when it ends, the one truth after a
 * child wrote it. One operation at a time. */
#ifndef SMBTUNED_OWNED_H
#define SMBTUNED_OWNED_H

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "search.h"
#include "state.h"
#include "tuner_opts.h"

struct owned;

/* What a put wrote. */
struct owned_put_result {
    const char *new_value; /* the value now in force */
    const char *file;      /* where the line is (as named), NULL: smb.conf itself */
    int line;
    const char *msg; /* on failure: why */
    bool restarted;  /* a commit that restarted smbd (restart_smbd) */
};

/* r: 0; -ECANCELED when the line was not ours to change (the hold is
 * taken already, unless a trial of ours is still on record: then the
 * caller's take-back puts it back and holds); -ESRCH when a trial was written but smbd was not told
 * (the trial stays recorded: take it back); -ETIME when a commit that
 * restarts smbd met the time window shut (written or not: a written one
 * stays recorded, and the cycle's end takes it back); -ETXTBSY when a
 * commit that restarts smbd found files open on it, or could not tell
 * (nothing written; or, files opened after the write, taken back as
 * owned_settle() tells); -EREMOTEIO when a
 * commit's restart of smbd failed (msg: why), and it was taken back (as
 * owned_settle() tells; a take-back that failed leaves it recorded); -ETIMEDOUT when the job did
 * not finish (with the hold taken when it did not even end when killed);
 * other -errno. */
typedef void (*owned_put_fn)(void *ud, int r, const struct owned_put_result *res);
typedef void (*owned_back_fn)(void *ud, int r);

enum owned_kind { OWNED_TRIAL, OWNED_COMMIT };

/* o and st are the tuner's and outlive *op; the options may be replaced
 * between operations. */
int owned_new(sd_event *ev, const struct tuner_opts *o, struct state *st, struct owned **op);
void owned_free(struct owned *w); /* kills an operation under way */

/* Put c's buffers into the line, if it still holds `expect` (NULL: the
 * value the last put wrote). A trial is told to smbd at once (smbcontrol
 * unless configured otherwise: a live trial measures nothing until smbd
 * has it); a commit as configured, or with restart by restarting
 * smbd's unit (smbd_unit). done is called from the loop. -EBUSY while an operation
 * runs, or while a job of ours that was killed has not ended (said). */
int owned_put(struct owned *w, const char *expect, struct search_config c, enum owned_kind kind,
              bool restart, owned_put_fn done, void *ud);

/* Take back what the pending record put in, or was putting in: a live
 * trial, or a commit that did not go through; only while our line still
 * holds it. With keep, a commit found in force stays once confirmed: the
 * check its write would have made after it (testparm), then smbd told as
 * configured, since the run, or the job, that wrote it may have died
 * before either. done(ud, 0) also when there was nothing to take back. */
int owned_take_back(struct owned *w, bool keep, owned_back_fn done, void *ud);

/* owned_take_back in the caller's process, blocking: at a stop, when
 * there is no loop to come back to. It does not wait for testparm or
 * smbd: a commit in force to be confirmed stays recorded, for the next
 * start. A job under way that does not end when killed, or one of before
 * that has not ended, leaves the record too (and a hold): it may still
 * write. Returns true when what it should have taken back may still be
 * in smb.conf (its take-back failed, or such a job): the next start
 * takes it back. */
bool owned_take_back_now(struct owned *w, bool keep);

/* At start-up, blocking, what a run that died or stopped left pending: a
 * trial is taken back; a commit found in force is confirmed (as
 * owned_take_back with keep). */
void owned_recover(struct owned *w);

/* The socket options value in force now, read in a job (an include on a
 * hung mount must not stop the loop), handed to done from the loop. It
 * must be what we last wrote: otherwise an admin edited our line, theirs
 * stands, and we hold off (-EPERM, the hold taken). Other errors are
 * told to the journal; value is NULL then. where: the line's file and
 * number ("FILE:N"), or smb.conf itself when there is no line. -EBUSY
 * (nothing started) while an operation runs, or a job that was killed has
 * not ended. */
typedef void (*owned_read_fn)(void *ud, int r, const char *value, const char *where);
int owned_read(struct owned *w, owned_read_fn done, void *ud);

/* Why the last owned_read or owned_take_back failed, as it told the
 * journal (smb.conf refused, a job killed at its deadline...), or "" (it
 * did not): what --once --json says of a cycle that failed there, without
 * reading smb.conf again in the loop's process. */
const char *owned_last_error(const struct owned *w);

/* Our line was changed by someone else: theirs stands, we hold off. */
void owned_hold(struct owned *w, const char *why);

/* The cycle read st from the state file: a hold in it is on disk. */
void owned_hold_read(struct owned *w);

/* Before the tuner saves st with a hold in it: `smbtuned --resume` may
 * have ended that hold on disk since it was saved or read, and the save
 * would take it again without a word. If so, st gets what --resume wrote
 * (no hold, the line the admin's) and true is returned. */
bool owned_resumed(struct owned *w);

/* The value a live trial put in smb.conf now, or NULL. */
const char *owned_live_value(const struct owned *w);

/* An operation runs, or a job of ours that was killed has not ended yet
 * (stuck in the kernel: it may still write smb.conf). */
bool owned_busy(const struct owned *w);

/* Why a restart of smbd for a commit failed (the commit was taken back,
 * or, should that fail, is recorded as a trial to be), once since the
 * last call; else NULL. The text lives until the next failure. */
const char *owned_restart_failure(struct owned *w);

/* Nothing left to undo or confirm (and the state saved by the caller). */
void owned_pending_clear(struct state *st);

/* Save st; a failure is logged (the next save tries again) and is -1. */
int owned_save(const struct tuner_opts *o, const struct state *st);

/* -ETXTBSY when files are open on smbd, whose restart would cut them
 * off, or smbstatus cannot tell (e says so); 0 when none. Runs smbstatus
 * (up to SMBSTATUS_TIMEOUT_S): in a job. */
int owned_files_open(const struct tuner_opts *o, struct err *e);

#endif
