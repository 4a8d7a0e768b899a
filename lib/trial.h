/* trial: where a candidate is tried without touching production clients.
 *
 * A shadow smbd is a private smbd started for one candidate `socket options`
 * value. Its config includes the production smb.conf (all shares, users and
 * passwords) and then overrides, in a second [global] section, the port,
 * the interfaces, every directory that holds per-instance state, and
 * `socket options`. It listens on a free port of 127.0.0.1 only; a probe
 * then measures smb://127.0.0.1:PORT/SHARE.
 *
 * With an own share (no url configured: the daemon measures against a
 * directory of its own, STATE_DIR/share), the shadow also serves that
 * directory as [TRIAL_OWN_SHARE], guests only, and has a private dir and
 * state directory of its own too: it writes nothing in production's
 * Samba directories (trial_render.c says why each one is as it is).
 *
 * One smbd per candidate, because Linux applies explicit buffer sizes to
 * the listening socket at start-up and accepted sockets inherit them: only
 * a fresh listener really measures AUTO (no SO_RCVBUF/SO_SNDBUF tokens,
 * kernel autotuning).
 *
 * Each shadow lives in a run directory BASE/shadow-OWNERPID-XXXXXX that
 * holds its smb.conf, its log (smbd's stdout and stderr), its state
 * directories and trial.pid, which records who owns it; a run killed with
 * SIGKILL is cleaned up by trial_shadow_sweep() at the next start.
 */
#ifndef SMBTUNE_TRIAL_H
#define SMBTUNE_TRIAL_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "err.h"

/* The smbd binary (Debian's path); PATH is searched when it is missing. */
#define TRIAL_SMBD "/usr/sbin/smbd"
/* The run directory's record of its owner and its smbd. */
#define TRIAL_PIDFILE "trial.pid"
/* Run directories are BASE/TRIAL_DIR_PREFIX OWNERPID-XXXXXX. */
#define TRIAL_DIR_PREFIX "shadow-"
#define TRIAL_BASE_DIR "shadow" /* the run directories' base, in state_dir */
/* smbd's messaging socket in a run directory, its pid at 7 digits. */
#define TRIAL_MSG_SOCK_SUFFIX "/lock/msg.sock/1234567"
/* The longest state_dir shadow trials can use. A shadow smbd's messaging
 * socket is STATE_DIR/shadow/RUN_DIR/lock/msg.sock/PID, and a Unix socket
 * path holds 107 bytes; pids are counted at 7 digits (pid_max's ceiling,
 * 4194304), so the bound does not change with the machine: 56 bytes. */
#define TRIAL_SOCK_BELOW_STATE_DIR                                                                 \
    "/" TRIAL_BASE_DIR "/" TRIAL_DIR_PREFIX "1234567-XXXXXX" TRIAL_MSG_SOCK_SUFFIX
#define TRIAL_STATE_DIR_MAX ((int)(107 - (sizeof(TRIAL_SOCK_BELOW_STATE_DIR) - 1)))
/* Fresh ports tried when the one picked was taken before smbd bound it. */
#define TRIAL_PORT_ATTEMPTS 5
/* The own share's name is TRIAL_OWN_SHARE-<16 random hex digits>, new for
 * each shadow: the share's sessions run as root (trial_render.c), so only
 * who knows the name (smbtuned: it is in no command line, and the share is
 * not listed) may use it, not any local user who finds the port. */
#define TRIAL_OWN_SHARE "smbtuned-probe"
#define TRIAL_SHARE_NAME_MAX 48

/* The daemon's own share: the directory, and the name it is served as. */
struct trial_share {
    const char *dir;
    const char *name; /* letters, digits and '-' */
};
/* Seconds between SIGTERM and SIGKILL when a shadow is stopped. */
#define TRIAL_STOP_TIMEOUT_S 10.0

/* A stop under way: SIGTERM to a process group, SIGKILL when its grace
 * runs out (trial.c). */
struct trial_stop {
    pid_t pgid;
    bool ours; /* the leader is our child, reaped at the end */
    int phase;
    double since;     /* when the phase began (child_now()) */
    double grace_s;   /* the phase's time before SIGKILL */
    bool killed;      /* the leader needed SIGKILL */
    bool killed_rest; /* the rest of its group outlived it and needed SIGKILL */
    bool stuck;       /* the leader outlived SIGKILL's grace too */
};

struct trial_shadow {
    pid_t pid;           /* smbd's parent process; also its process group and session */
    int port;            /* on 127.0.0.1 */
    bool reaped;         /* by someone else (trial_shadow_poll: -ECHILD) */
    bool stopping;       /* trial_shadow_stop_begin() was called */
    double stop_grace_s; /* SIGTERM to SIGKILL; 0: TRIAL_STOP_TIMEOUT_S (tests shorten it) */
    struct trial_stop stop;
    char run_dir[PATH_MAX];
    char conf[PATH_MAX];
    char log[PATH_MAX];
    char share[TRIAL_SHARE_NAME_MAX]; /* the own share's name; "" without one */
};

/* What trial.pid says: the smbtuned that made the run directory and the
 * smbd it started (smbd_pid 0 until it is forked). A start time goes with
 * each pid so that a recycled pid is never taken for ours. */
struct trial_owner {
    pid_t owner_pid;
    unsigned long long owner_start;
    pid_t smbd_pid;
    unsigned long long smbd_start;
};

/* Pure: the shadow's smb.conf text (malloc'ed into *text). prod_conf,
 * run_dir and own->dir must be absolute paths without newlines or `%`
 * (Samba would substitute it); the value must not contain a newline or
 * end in `\`. own: the own share to serve too, or NULL for production's
 * shares only. */
int trial_shadow_render(const char *prod_conf, const char *run_dir, int port,
                        const char *sockopts_value, const struct trial_share *own, char **text,
                        struct err *e);

/* Pure: trial.pid's contents to and from text. format writes into buf. */
int trial_owner_parse(const char *text, struct trial_owner *o);
int trial_owner_format(const struct trial_owner *o, char *buf, size_t len);

/* Make a run directory under base_dir (created 0700 if missing; refused
 * unless ours alone: our uid's, writable by it only, no link), write the
 * config for a fresh port, fork smbd and return at once: t->pid and
 * t->port are set, the shadow is not ready yet. For an event loop: call
 * trial_shadow_poll() from a timer until it returns 1 or fails. On failure
 * nothing is left behind. own_share: NULL, or the own share's directory,
 * an existing directory of our uid, not a symlink (it is served as root);
 * its name, made here, is in t->share. */
int trial_shadow_spawn(const char *prod_conf, const char *base_dir, const char *sockopts_value,
                       const char *own_share, struct trial_shadow *t, struct err *e);

/* Whether the shadow refused a connection from 127.0.0.1 by smb.conf's
 * hosts lists, [global]'s or a share's (Samba's "Denied connection from
 * ... (127.0.0.1)" in its log, at any debug level), which a shadow keeps.
 * Reads the log's last 64 KiB. */
bool trial_shadow_denied(const struct trial_shadow *t);

/* Non-blocking (at most a few ms): 1 when smbd listens on its port and
 * accepts a connection, 0 not yet, -EADDRINUSE when the port was taken by
 * someone else (stop it and spawn again), another negative errno when smbd
 * died (the reason ends with the last lines of its log; smbd is left a
 * zombie, and the stop, which must follow, reaps it). Only the stop reaps
 * t->pid: the caller must not (no sd_event child source for it). */
int trial_shadow_poll(struct trial_shadow *t, struct err *e);

/* Blocking convenience for --once and the tests: spawn and poll until
 * ready, a new port when the one picked was taken (TRIAL_PORT_ATTEMPTS
 * times), at most ready_timeout_s seconds per attempt. On failure the
 * shadow is stopped and its run directory removed. */
int trial_shadow_start(const char *prod_conf, const char *base_dir, const char *sockopts_value,
                       const char *own_share, double ready_timeout_s, struct trial_shadow *t,
                       struct err *e);

/* SIGTERM to the shadow's process group, SIGKILL after
 * TRIAL_STOP_TIMEOUT_S, reap, remove the run directory. Safe to call on a
 * shadow that already died, was already stopped, or whose stop in steps
 * (below) is under way: it finishes that one. Blocks up to about twice
 * TRIAL_STOP_TIMEOUT_S when smbd ignores SIGTERM. -EBUSY when smbd did
 * not end even TRIAL_STOP_TIMEOUT_S after SIGKILL (stuck in the kernel):
 * it is left, unreaped, with its run directory (the next start's sweep
 * finds them). */
int trial_shadow_stop(struct trial_shadow *t, struct err *e);

/* The same stop in steps, for an event loop: a shadow that does not heed
 * SIGTERM (stopped, hung in I/O) must not hold the loop up for
 * TRIAL_STOP_TIMEOUT_S. begin sends SIGTERM; step, called from a timer,
 * never blocks: 0 while the shadow's processes are still there, 1 once
 * they are gone and its run directory is removed, a negative errno (e
 * set) when the removal failed. t->stop.killed says whether SIGKILL was
 * needed; t->stop.stuck that even SIGKILL has not ended smbd yet (the
 * steps go on until it does: it stays ours to reap). t may be copied (struct assignment) before or
 * after begin. */
void trial_shadow_stop_begin(struct trial_shadow *t);
int trial_shadow_stop_step(struct trial_shadow *t, struct err *e);

/* Remove what a killed run left under base_dir: every run directory whose
 * owner is no longer alive; its smbd, when still alive (same pid and start
 * time, a session leader named smbd), is killed with its process group
 * first. Run directories of live owners (this process included) are left
 * alone. A missing base_dir is not an error; one that is not ours alone
 * (our uid's, writable by it only, no link at its name) is refused with
 * nothing done, as trial_shadow_spawn refuses it. */
int trial_shadow_sweep(const char *base_dir, struct err *e);

#endif
