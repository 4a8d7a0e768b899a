/* state: what smbtuned must remember across restarts, in STATE_DIR/state.
 *
 * A text file of `key value` lines (values C-escaped), replaced atomically.
 * The first entry is `version N` (STATE_VERSION). A file without it was
 * written before the format had a version and is read as version 1, which
 * it is, so that an upgrade keeps its state (a pending trial included).
 *
 * The file is read strictly, because a record we misread could make us
 * write smb.conf: every key known and given once, every number in range,
 * every record complete (a pending edit has all its parts), no NUL byte or
 * raw control character, every line ended. A newer version is refused as
 * well: its keys could mean what this version cannot know. state_load
 * keeps such a file aside for the admin and holds off (see there).
 *
 * The parse and format are pure (state_text.c); state_load/state_save
 * touch the disk (state.c). */
#ifndef SMBTUNE_STATE_H
#define SMBTUNE_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "smbconf.h"
#include "err.h"

struct state {
    /* the configuration in force, as far as smbtuned knows, and its rates */
    bool have_incumbent;
    long rcvbuf, sndbuf; /* SEARCH_AUTO (0): no explicit size, else a size */
    double write_mbps, read_mbps;
    /* the socket options value smbtuned last wrote, and where */
    char *last_written;
    /* an admin changed our line: hands off until `smbtuned --resume` */
    bool hold;
    char *hold_reason;
    /* what the measurements were made on: a change means search again */
    char *kernel;
    char *samba;
    char *smb_conf;
    /* a step that must be undone if we died in it (a live trial): the
     * edit that put the trial value in, taken back by compare-and-set */
    bool pending;
    bool pending_commit; /* the edit is a commit, not a trial: keep it */
    struct smbconf_edit pending_edit;
    /* whether the run that wrote the pending commit restarts smbd to
     * apply it (format 7; STATE_RESTART_*): what a start that finds the
     * commit in force goes by. Before, it asked the kernel about smbd's
     * listener, which cannot tell an explicit SO_RCVBUF=65536 from the
     * autotuning start size, and could keep a commit without the restart
     * it needs, or keep one outside the time window that needs one. */
    long pending_restart;
    /* the pending record was a commit whose restart of smbd failed, or
     * was not made for files open on smbd, made a trial's so that it is
     * taken back, never kept (format 8): what the journal calls it when a
     * later start takes it back */
    bool pending_unrestarted;
    /* the incumbent's rates are the probe's on this machine's loopback
     * (format 9): shadow trials, or client trials whose probe found its
     * connection on this machine (a url of this machine by any name or
     * address); what `smbtuned --status` calls them */
    bool rates_loopback;
    /* the format version the file was read in (not written: a save is
     * always STATE_VERSION); 0 when there was no file */
    int version;
    /* what `smbtuned --status` tells (format version 2; 0 and NULL in a
     * file of version 1): unix seconds, 0 for never */
    long written_at;    /* last_written was written (a commit) */
    long cycle_at;      /* the last cycle ended */
    char *cycle_result; /* how, in words */
    long next_at;       /* the next cycle is due (0: none, after --once) */
    /* what smbd's real connections got when a cycle last watched them
     * (issue 13; format version 3, zeros in an older file): how many, how
     * many each cause held back, their round trips, the largest
     * bandwidth-delay product (bytes) among the buffer-limited ones. No
     * client address. */
    long clients_at; /* unix seconds, 0: never */
    long clients;
    long clients_sndbuf_limited, clients_rcvbuf_limited, clients_client_window;
    long clients_network, clients_idle;
    long clients_smbd; /* held back by smbd's own reading (format 4) */
    double rtt_median_ms, rtt_max_ms;
    long bdp_max;
    /* the search that chose the incumbent converged (format 5): what a
     * restart needs to go on verifying its winner rather than search
     * again, the verification's reference (struct search_reference) per
     * channel: its ranked rate (enum search_rate), the winner's rate
     * (the exp of its mean log rate), the samples it rests on, the pooled
     * squares and degrees of freedom of the spread, the stall bound */
    bool converged;
    long ref_channels; /* 0 to 2 */
    long ref_rate[2], ref_n[2];
    double ref_mbps[2], ref_ss[2], ref_df[2], ref_reject[2];
    /* the probe and search settings the reference was measured with, in
     * words (format 6): another url, size or trials mode measures other
     * rates, so a reference of other settings is not verified against */
    char *ref_settings;
    /* the verification samples the reference does not hold yet (format
     * 6): "W,R W,R ..." ranked log rates, oldest first (verify_recent) */
    char *ref_recent;
    /* advise mode (format 10): the search converged on advice, which
     * smb.conf does not hold, and the reference is the advice's: the
     * socket options value advised (NULL: no advice, the reference, if
     * any, is of the line in force), its buffers (what verification
     * samples), and the buffers of the line in force it was searched
     * from. A restart goes on verifying it while that line stays. */
    char *advice;
    long advice_rcvbuf, advice_sndbuf;
    long advised_from_rcvbuf, advised_from_sndbuf;
    long cycles;
    /* Not in the file: this copy stands for a file that could not be
     * read (a read error, not damage: EIO, EACCES, EMFILE, ...) or a
     * record a job may have changed that could not be read back. The
     * file may hold a hold, a live trial's record or the line we wrote:
     * state_save refuses to write this copy over it (-ESTALE). */
    bool unread;
};

/* The format this smbtuned writes, and the newest it reads. Version 2
 * added written_at, cycle_at, cycle_result and next_at; version 3 the
 * real connections' summary (clients_at ... bdp_max); version 4 its
 * count of connections smbd itself held back (clients_smbd); version 5 the
 * converged search's reference (converged ... ref_reject1); version 6 the
 * settings it was measured with and verification's recent samples
 * (ref_settings, ref_recent); version 7 whether a pending commit restarts
 * smbd (pending_restart); version 8 whether a pending trial's record was
 * such a commit, whose restart failed (pending_unrestarted); version 9
 * whether the incumbent's rates were measured on loopback
 * (rates_loopback); version 10 advise mode's advice and the line it was
 * searched from (advice ... advised_from_sndbuf). A file of an older version is read without the
 * newer keys, and one that has them is damaged (no smbtuned of that version wrote them). */
#define STATE_VERSION 10
/* pending_restart: unknown (a trial, none pending, or a commit recorded
 * by a version before 7: ask the kernel, as then), no, yes */
enum { STATE_RESTART_UNKNOWN, STATE_RESTART_NO, STATE_RESTART_YES };
/* ref_settings' words fit in this (tuner_settings_words) */
#define STATE_SETTINGS_LEN 8192
/* The largest time a state file holds: 9999-12-31T23:59:59Z. */
#define STATE_TIME_MAX 253402300799L

/* Parse len bytes of text (NULs included: they make the file damaged).
 * -EBADMSG for a damaged, partial or newer file, with "NAME:LINE: what
 * was found; what was expected" in e; -ENOMEM. */
int state_parse(const char *text, size_t len, const char *name, struct state *s, struct err *e);
/* malloc'ed text; NULL when out of memory */
char *state_format(const struct state *s);
void state_free(struct state *s);

/* STATE_DIR/state; a missing file is an empty state.
 *
 * A damaged one (state_parse's -EBADMSG) never stops a start: it is kept
 * aside as STATE_DIR/state.damaged-YYYYmmdd-HHMMSS[-N] (a name no earlier
 * file has; its bytes untouched), the reason is logged, and the state
 * becomes a hold whose reason names the kept file: nothing is written to
 * smb.conf until `smbtuned --resume`, since a record we cannot read may
 * stand for a live trial still in smb.conf. Returns 0 then; <0 only when
 * the file cannot be read or the hold cannot be saved. */
int state_load(const char *dir, struct state *s, struct err *e);

/* Whether r, from state_peek, is what state_load keeps aside as damage:
 * state_parse's -EBADMSG, or a FIFO, directory, device or oversized file
 * in the state file's place (see state_load). A symbolic link there is no
 * damage but a file that cannot be read (-ELOOP): none of ours, it is
 * neither followed nor moved, and nothing starts until it is gone. */
bool state_is_damage(int r);

/* The state file as it is, for a reader that is not the daemon (the
 * editor): no side effect, a damaged file only an error. 0 with an empty
 * state when there is none. */
int state_peek(const char *dir, struct state *s, struct err *e);
int state_save(const char *dir, const struct state *s, struct err *e);

/* A load-modify-save that no other save may come between (`--resume`, the
 * daemon's end of cycle): state_lock, then state_load/state_save, then
 * state_unlock. The lock is an flock on STATE_DIR/state.lock; every
 * state_save takes it unless this process holds it, waiting at most 10 s
 * for a holder (-EBUSY then, the file not written). 0 or <0 with e set. */
int state_lock(const char *dir, struct err *e);
void state_unlock(void);

/* Remove the temporary copies of the state file that a save killed
 * between its write and its rename left (files.h), under the lock (a
 * `--resume` may be saving). 0, or <0 with e set (the lock). */
int state_sweep_tmp(const char *dir, struct err *e);

/* Replace *dst by a copy of src (NULL allowed). */
int state_set_str(char **dst, const char *src);

/* Forget the converged search's reference and its advice (pure): the
 * next cycle searches. */
void state_unconverge(struct state *s);

/* What `smbtuned --resume` does to a state with a hold (pure): the hold
 * and our record of the line go, since the line is the admin's now, and
 * the next cycle searches from it and measures it anew (the incumbent's
 * rates were of the line before the hold). The daemon does the same to its
 * copy when it sees a --resume saved during its cycle. */
void state_end_hold(struct state *s);

#endif
