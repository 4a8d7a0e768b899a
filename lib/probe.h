/* probe: one throughput measurement of an SMB share with libsmbclient.
 *
 * A measurement writes to a fresh file in the target directory, reads it
 * back and deletes the file; write and read rates are reported separately.
 * Each direction moves `size` bytes, or, with a duration, lasts at most
 * `duration_s` seconds and at least the connection's start-up
 * (probe_phase_over). It runs in a forked child with a hard deadline:
 *
 *   probe_start()   forks the child; returns its pid, a pipe fd that becomes
 *                   readable when the child is done (or dies), and the
 *                   deadline (CLOCK_MONOTONIC seconds, child_now()).
 *   probe_finish()  after the fd is readable or the deadline has passed:
 *                   kills the child if it is still running, reaps it and
 *                   fills the result. A timeout is an outcome, not an error:
 *                   the rates then count the bytes moved before the deadline.
 *   probe_run()     both, blocking, for the command line.
 *
 * The child uses a fresh libsmbclient context (a new TCP connection that
 * sees the server's current socket options) and a private client
 * configuration: HOME points at a directory of its own whose .smb/smb.conf
 * holds only what the caller chose, so neither /etc/samba/smb.conf nor the
 * caller's ~/.smb/smb.conf reaches the client socket. The parent must never
 * create a libsmbclient context itself: the library's configuration is
 * process-wide and a forked child would inherit it.
 *
 * The rooms: probe.c the parent (checks, private directory, fork, collect,
 * clean-up), probe_child.c the measuring child (the only libsmbclient
 * user), probe_transfer.c its writing and reading back of the probe file,
 * probe_calls.c the size of its read calls, probe_result.c the
 * outcomes and the JSON line; the target's URL
 * is url.h's, the credentials file creds.h's.
 */
#ifndef SMBTUNE_PROBE_H
#define SMBTUNE_PROBE_H

#include <stdbool.h>
#include <string.h>
#include <sys/types.h>

#include "err.h"
#include "url.h"

/* The spellings are an interface: outside checks rely on them. */
enum probe_outcome {
    PROBE_OK,
    PROBE_TIMEOUT,
    PROBE_CONNECT_REFUSED,
    PROBE_NAME_NOT_FOUND,
    PROBE_AUTH_FAILED,
    PROBE_SHARE_NOT_FOUND,
    PROBE_ACCESS_DENIED,
    PROBE_DISK_FULL,
    PROBE_ERROR,
};

/* Defaults, chosen from the measurements in bench/README.md: 8 MiB calls
 * (SMB2's largest request, which Samba's default `smb2 max write/read`
 * allow) keep the probe at 93-97% of smbclient on a 40 ms / 100 Mbit/s
 * path, where 1 MiB calls reach 70% and 64 KiB calls 10%: libsmbclient
 * sends one write request per call and waits for it. Read calls span
 * several requests where the path is long (probe_read_call_size). */
#define PROBE_DEFAULT_SIZE (64LL * 1024 * 1024)
#define PROBE_DEFAULT_REQUEST_SIZE (8LL * 1024 * 1024)
#define PROBE_DEFAULT_DEADLINE_S 60.0
/* Each direction lasts at most this long (bench/README.md: with 64 MiB and
 * no time limit, a sample took 12 s on a 40 ms / 100 Mbit/s path, and a
 * trial of 8 KiB buffers ran to its 60 s deadline). */
#define PROBE_DEFAULT_DURATION_S 2.0
#define PROBE_MAX_DURATION_S 3600.0
#define PROBE_DEFAULT_SOCKET_OPTIONS "TCP_NODELAY"
#define PROBE_MAX_REQUEST_SIZE (8LL * 1024 * 1024)
/* Probe files are PREFIX<host>-<pid>-<16 hex digits from getrandom>: a
 * name nobody can plant in advance. Each is recorded in the state
 * directory before it is made (probe_made.h); the pid lets a clean-up
 * tell a killed probe's recorded file (pid gone) from a running one's. */
#define PROBE_FILE_PREFIX ".smbtuned-probe-"
#define PROBE_WORKDIR_SUBDIR "probe"
#define PROBE_PLACE_OWN_SHARE "smbtuned's own share"
#define PROBE_WORKDIR_PREFIX "smbtuned-probe-"

/* A `socket options` value the probe can write into its private smb.conf:
 * printable characters only (a line break or a trailing backslash would
 * smuggle in other parameters), not empty. Pure. */
int probe_check_socket_options(const char *s, struct err *e);

struct probe_params {
    const char *url; /* smb://host[:port]/share[/dir] (url.h) */
    const char
        *directory; /* extra directory inside the URL's path (url_check_directory), or NULL */
    /* Credentials file (creds.h: smbclient -A format, owned by root,
     * 0600), read by the probe child right before it logs on; NULL: guest. */
    const char *credentials;
    long long size;         /* bytes written, then read back (see duration_s) */
    long long request_size; /* bytes per write/read call */
    double deadline_s;      /* hard limit on the whole measurement */
    /* At most this many seconds each way, 0: none (exactly `size` bytes).
     * With one, a long path's direction also runs past `size` until its
     * start-up is over (probe_phase_over), up to PROBE_SIZE_CAP_FACTOR
     * times `size`. */
    double duration_s;
    /* Bytes a direction may move at most: the room the share leaves the
     * probe file (probe_room), set by the probe child on its own copy of
     * these. 0: no bound but the size's. */
    long long room;
    const char *socket_options; /* the client's `socket options` (NULL: TCP_NODELAY) */
    /* The state directory: the private client directories are made in
     * its subdirectory `probe` (created 0700; refused when it is a symlink
     * or not ours). NULL: $TMPDIR or /tmp, which others can write too. */
    const char *workdir_base;
    /* Where the probe file goes, as the record of files made names it
     * (probe_made.h): the same for every probe of one place, whatever
     * port serves it (the configured URL when the probe goes to a shadow
     * smbd; PROBE_PLACE_OWN_SHARE for the own share). NULL: the url. */
    const char *place;
    unsigned seq; /* the caller's measurement counter (not in the file name: see above) */
};

void probe_params_default(struct probe_params *p);

/* The steps of a probe, published as each begins: the one it was in when
 * it ended (the name's look-up, a contact, comes before the set-up, which
 * then goes on until the connection). */
enum probe_stage {
    PROBE_STAGE_SETUP,    /* its own set-up: name, credentials, libsmbclient */
    PROBE_STAGE_CONTACT,  /* connection, logon and tree connect to the share */
    PROBE_STAGE_REACHED,  /* the share answered */
    PROBE_STAGE_CREATING, /* its file's create is sent */
    PROBE_STAGE_ROOM,     /* its file made, the share asked for its free space */
};

/* What became of the copy of the probe file that a share with Samba's
 * recycle module (`vfs objects = recycle`) keeps when the probe deletes
 * it: the module moves a deleted file into the share's repository instead
 * of deleting it, so that every sample would leave up to `size` bytes
 * there for ever. The probe looks for the copy where the module puts it
 * by default (probe_recycle_places in probe_child.h), with a stat of each
 * place, never a listing. The spellings are an interface (the JSON line). */
enum probe_recycle {
    PROBE_RECYCLE_NONE,    /* no copy where one would be (or not looked: see the cause) */
    PROBE_RECYCLE_REMOVED, /* a copy was there, and the probe deleted it */
    PROBE_RECYCLE_LEFT,    /* a copy is there that the probe could not delete */
};

struct probe_result {
    enum probe_outcome outcome;
    long long write_bytes, read_bytes;
    double write_s, read_s;
    double write_mbps, read_mbps; /* 10^6 bytes per second */
    /* What the rates leave out as TCP's start-up (probe_phase_rate): the
     * first bytes and seconds of each direction; 0 when nothing. */
    long long write_startup_bytes, read_startup_bytes;
    double write_startup_s, read_startup_s;
    /* What the rates leave out as the calls' waits for their last answer
     * (probe_call_wait): seconds of each direction after its start-up. */
    double write_wait_s, read_wait_s;
    bool write_done; /* the writing ended by itself (the reading began) */
    /* The pacing cap the probe's socket had when the writing ended
     * (probe_pace_cap in probe_child.h), bytes/s; 0 when none was set. */
    long long write_pace_bps;
    /* What getsockopt says the client socket has once connected (twice the
     * requested size when one was set), -1 when unknown. */
    int client_rcvbuf, client_sndbuf;
    /* The connection stayed on this machine (the peer a loopback address,
     * or one of this machine's own: netaddr_same_host), so it ran over the
     * loopback device whatever the url's host; false when it went
     * elsewhere or its socket was not found. */
    bool loopback;
    /* How far it got: from PROBE_STAGE_CREATING on, unless it ended ok
     * by itself (it removed the file then), its file may be left in the
     * share. */
    enum probe_stage stage;
    /* Killed before it ended by itself: an ok outcome then is one
     * measured before (its look for a recycle copy cut short), and its
     * file's record may remain. */
    bool killed;
    char cause[512]; /* why, for any outcome but ok; no secret */
    enum probe_recycle recycle;
    /* With a copy found: its path inside the share (".recycle/<name>"),
     * and with PROBE_RECYCLE_LEFT why it stays. */
    char recycle_path[512];
    char recycle_why[128];
};

struct probe_shared;

struct probe_job {
    pid_t pid;
    int fd;          /* readable when the child is done or dead */
    double deadline; /* child_now() time after which probe_finish() kills */
    struct probe_shared *shm;
    char workdir[4096];
};

/* What a child whose measurement is over may still take past its deadline
 * for the look after a recycle copy (probe_recycle.c): a few calls of a
 * round trip or two. Without it a sample that ended in the deadline's last
 * moments left its copy in the share without a word. */
#define PROBE_LOOK_GRACE_S 3.0

int probe_start(const struct probe_params *p, struct probe_job *job, struct err *e);

/* When probe_finish() is to kill the child: its deadline, or, once it has
 * measured and looks for a recycle copy, PROBE_LOOK_GRACE_S after it. A
 * caller that waits calls it again when that time comes. */
double probe_kill_time(const struct probe_job *job);

/* Collect the measurement. Call once the fd is readable or the deadline has
 * passed; it kills the child if it still runs and then waits for it. Frees
 * the job's resources (fd, memory, private directory). Returns 0 with the
 * outcome in r, or a negative errno when the result cannot be had. */
int probe_finish(struct probe_job *job, struct probe_result *r, struct err *e);

/* Remove the files that killed probes recorded (probe_made.h) and left in
 * the target directory (a short child of its own, at most a few seconds; a
 * measurement never does: probe_child.c says why). For the start, and
 * after a probe was killed at its deadline or by a stop. -ENOTCONN when the share
 * could not be reached: nothing was removed, nor looked for; -EIO when it
 * failed otherwise. */
int probe_cleanup(const struct probe_params *p, struct err *e);

/* probe_start + wait + probe_finish. Then, once the share was reached, a
 * short cleanup-only child removes the files killed probes left, this
 * one's after a timeout included; when that fails, why goes into tidy
 * (not NULL: its msg is "" when it did not fail). */
int probe_run(const struct probe_params *p, struct probe_result *r, struct err *tidy,
              struct err *e);

const char *probe_outcome_name(enum probe_outcome o);

/* "none", "removed" or "left" (the JSON line's `recycle`). */
const char *probe_recycle_name(enum probe_recycle v);

/* What to tell the admin about a recycle copy of a probe of `url`: the
 * share keeps deleted files, where the copy went, whether the probe could
 * remove it, and the fix (PROBE_RECYCLE_EXCLUDE in that share, or a share
 * without the module). Written to out; returns 0, or -ENOENT when there
 * is nothing to say (PROBE_RECYCLE_NONE). Said once per run by its
 * callers, not once per sample. Pure. */
#define PROBE_RECYCLE_EXCLUDE "recycle:exclude = " PROBE_FILE_PREFIX "*"
int probe_recycle_text(const char *url, const struct probe_result *r, char *out, size_t len);

/* One JSON object on one line (no newline), the result's keys in a fixed
 * order, rates with 3 decimals and seconds with 6 (as `--probe --json`
 * prints them). -ENOSPC when out is too small. */
int probe_result_json(const struct probe_result *r, char *out, size_t outlen);

/* Map an errno from libsmbclient to an outcome, given whether the failing
 * call was the first contact with the share (connection, session, tree
 * connect) or a file operation after it. Pure. */
enum probe_outcome probe_classify_errno(int err, bool connecting);

#endif
