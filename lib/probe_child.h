/* probe_child: the measuring child of a probe, the only process of ours
 * that uses libsmbclient and holds the password. Internal to the probe:
 * lib/probe.c forks and collects it, nothing else includes this.
 *
 * The parent and the child share one struct probe_shared (MAP_SHARED |
 * MAP_ANONYMOUS). The child publishes progress as it goes, so that the
 * parent can report a lower bound when it has to kill the child at the
 * deadline; times are CLOCK_MONOTONIC nanoseconds, 0 = not yet. `done` is
 * stored last, with release order: once the parent sees it, the rest is
 * complete. */
#ifndef SMBTUNE_PROBE_CHILD_H
#define SMBTUNE_PROBE_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "probe.h"
#include "url.h"

struct probe_shared {
    int64_t write_bytes, read_bytes;
    int64_t write_t0, write_t1, read_t0, read_t1;
    /* The end of each direction's start-up (probe_warmed): the bytes by
     * then, and the time (stored last; 0 = not reached). */
    int64_t write_warm_bytes, write_warm_t, read_warm_bytes, read_warm_t;
    /* The waits of each direction's calls so far (probe_call_wait; only
     * with a duration), and by the end of its start-up (stored before its
     * time), ns. */
    int64_t write_wait, write_warm_wait, read_wait, read_warm_wait;
    /* The pacing cap on the probe's socket when the writing ended
     * (probe_pace_cap), bytes/s; 0: none set. */
    int64_t write_pace;
    /* How far the child got (enum probe_stage), published before each
     * step: a killed child's stage holds too. */
    int64_t stage;
    /* Set once the measurement is over and its file deleted, with outcome
     * and cause stored before it: a child killed at the deadline while it
     * looks for a recycle copy (probe_recycle.c) still measured. */
    int64_t measured;
    int done;
    int outcome;
    int client_rcvbuf, client_sndbuf;
    /* 1: the connection stays on this machine (netaddr_fd_same_host);
     * 0: it does not, or its socket was not found */
    int loopback;
    char cause[512];
    /* enum probe_recycle and its details (struct probe_result's); read
     * once `done` is seen. */
    int recycle;
    char recycle_path[512];
    char recycle_why[128];
};

/* What the parent hands the child across the fork, all checked. */
struct probe_child_args {
    const struct probe_params *p;
    struct url url;     /* p->url, parsed */
    char dir_url[4096]; /* the probe file's directory, as libsmbclient reads it */
    bool cleanup_only;  /* only remove leftovers of killed probes, measure nothing */
    /* The record of the probe files made (probe_made.h), made by the
     * parent ours alone; "": none kept (no state directory) */
    char made_dir[4096];
    double deadline; /* child_now() time at which the parent kills the child */
    struct probe_shared *sh;
};

/* Bytes for each read call, a multiple of `request` from `request` to
 * PROBE_READ_CALL_MAX, given the connection's round trip and the rate the
 * writes just saw (bytes/s). libsmbclient's smbc_read passes a whole call
 * to cli_pull, which splits it into requests of the server's largest read
 * and keeps them all in flight (credits permitting), but the pipe drains
 * at the end of every call: about one round trip lost per call. A call
 * that lasts PROBE_READ_CALL_RTTS round trips loses about 1/20 of them.
 * (Writes get no such choice: smbc_write sends one request at a time
 * whatever its size, cli_smb2_writeall.) Loopback and LAN keep calls of
 * `request` bytes: there a deeper pipeline only costs memory and cache.
 * Pure. */
#define PROBE_READ_CALL_RTTS 20
#define PROBE_READ_CALL_MAX (64LL * 1024 * 1024)
long long probe_read_call_size(long long request, double rtt_s, double rate_bps);

/* When a direction with a duration is over (p->duration_s > 0), having
 * moved `bytes` in `elapsed_s` on a connection whose round trip is
 * `rtt_s`: at the duration; or once `size` bytes are moved, but not before
 * PROBE_STARTUP_RTTS round trips have passed: TCP's slow start doubles the
 * window once a round trip, and on a long fast path 64 MiB are gone before
 * it is over (0.6 s at 1 Gbit/s and 40 ms, of which slow start is a third,
 * so buffers that differ in the steady rate measured alike); or at
 * PROBE_SIZE_CAP_FACTOR times `size`, which bounds the file, or at
 * p->room when that is less (probe_room). Without a duration: at `size`
 * bytes, as before there was one. Pure. */
#define PROBE_STARTUP_RTTS 50
#define PROBE_SIZE_CAP_FACTOR 16
bool probe_phase_over(const struct probe_params *p, long long bytes, double elapsed_s,
                      double rtt_s);

/* Whether a direction `elapsed_s` into it, at the end of a call, is past
 * TCP's start-up: PROBE_WARMUP_RTTS round trips (slow start doubles the
 * window each round trip: 14 KB to the 5 MB of 1 Gbit/s at 40 ms is 9),
 * and never before its first call has ended. Pure. */
#define PROBE_WARMUP_RTTS 10
bool probe_warmed(double elapsed_s, double rtt_s);

/* The seconds the next call of a direction with a duration may take,
 * `elapsed_s` into it: what the duration has left, and before the end of
 * the start-up (warm false) no more than the start-up has left, so that
 * the start-up ends near its PROBE_WARMUP_RTTS round trips and not at the
 * end of a call sized by its own slow rates (at 100 Mbit/s and 40 ms that
 * was 0.9 s of 2). Never negative. Pure. */
double probe_call_window(const struct probe_params *p, double elapsed_s, double rtt_s, bool warm);

/* What a direction published, in bytes and seconds: `bytes` in `secs`;
 * its start-up over after warm_bytes in warm_s (0, 0: not reached); and
 * wait_s, the round trips its calls spent waiting for their last answer
 * (see probe_call_wait), warm_wait_s of them by the end of the start-up. */
struct probe_phase {
    long long bytes, warm_bytes;
    double secs, warm_s, wait_s, warm_wait_s;
};

/* The rate of a direction (bytes/s): over the part after the start-up
 * when that part holds at least half the bytes (else the whole direction:
 * a slow trial's first call may be most of it), its calls' waits left out
 * (a client with several requests in flight overlaps them; see
 * probe_call_wait), at most half its time: a rate at most twice the one
 * the clock saw, whatever a round trip estimate got wrong. *startup_bytes
 * and *startup_s say what was left out as the start-up, *wait_s as waits
 * (0 when nothing). Pure. */
double probe_phase_rate(const struct probe_phase *ph, long long *startup_bytes, double *startup_s,
                        double *wait_s);

/* The seconds of a call that took call_s on a path of rtt_s that are
 * spent waiting for the call's last answer with nothing to send, where
 * a client with requests in flight would be sending. libsmbclient's
 * smbc_write sends one request at a time and smbc_read drains its
 * pipeline at the end of each call, so every call ends with an idle round
 * trip that smbclient, the kernel's cifs and Windows, keeping requests in
 * flight, do not have: on a 40 ms path at 60 MB/s, an 8 MiB write loses
 * 40 ms in 180, and the probe wrote at 78-87% of smbclient's put
 * (bench/README.md). Taken out, the rate is the connection's while it
 * carries data, the rate its buffers decide.
 *
 * One round trip, the connection's smallest, so never more than the
 * wait was. That is the whole wait where the link is the limit. A call
 * of n windows smaller than the path's bandwidth-delay product spends
 * part of every round trip held back, and a client with requests in
 * flight, held back the same way, would not fill its last round trip
 * either: its rate is overstated, by at most n / (n - 1 + window /
 * product) (2 for a window of half an 8 MiB request on a path of a far
 * larger product; 1.09 for 4 MiB windows at 1 Gbit/s and 40 ms). Sizes
 * compare closer to the truth than with the wait in all the same: two
 * sizes 10% apart below the product measure about 5% apart, where with
 * the wait in they measured 3% apart (bench/README.md). The kernel's
 * counters of a sender held back cannot tell those calls apart:
 * tcpi_sndbuf_limited counts the writer blocked on a full buffer, which
 * an 8 MiB request is whether or not the buffer limits what is in
 * flight, and it outranks tcpi_rwnd_limited (one counter runs at a
 * time). 0 when the call is no longer than the round trip (no call is:
 * the round trip is then not this call's) or either is unknown (NaN).
 * Pure. */
double probe_call_wait(double call_s, double rtt_s);

/* The bytes a direction may still move after `bytes`: up to `size` first
 * (so that a short path moves exactly that), then up to the cap. Pure. */
long long probe_phase_room(const struct probe_params *p, long long bytes);

/* The room a share leaves a probe file, from what it says of itself
 * (SMB's FileFsFullSizeInformation through smbc_fstatvfs): `avail` bytes
 * free for the probe's user (less root's reserve and a quota, as smbd
 * counts them), of `total`. A probe file must leave a reserve free:
 * PROBE_ROOM_RESERVE_PCT of the share, at most PROBE_ROOM_RESERVE_MAX, so
 * that a sample never fills the disk users write to (with the own share,
 * the state directory's file system, /var). Returns the bytes a file may
 * take, 0 when the reserve takes all; -1 when the share said nothing: a
 * total of PROBE_ROOM_UNSAID_MAX or less, which covers Samba's stand-ins
 * (a `dfree command` that prints no sizes: 2 MiB of which 1 free; a file
 * system that gives none: 20 MiB) and a share no sample fits anyway.
 * *reserve gets the reserve. Pure. */
#define PROBE_ROOM_RESERVE_PCT 5
#define PROBE_ROOM_RESERVE_MAX (1024LL * 1024 * 1024)
#define PROBE_ROOM_UNSAID_MAX (20ULL * 1024 * 1024)
long long probe_room(unsigned long long avail, unsigned long long total, long long *reserve);

/* A call of n bytes cut to what rate_bps moves in the left_s seconds the
 * duration has left, in whole PROBE_CALL_UNIT bytes, at least one unit:
 * the last call of a slow trial then ends near the duration instead of
 * running on for its whole size (an 8 MiB write at the 1.2 MB/s of 8 KiB
 * buffers on a 40 ms path takes 7 s). n unchanged when the rate is unknown
 * (0) or there is no duration (left_s < 0). Pure. */
#define PROBE_CALL_UNIT (64LL * 1024)
long long probe_call_fit(long long n, double rate_bps, double left_s);

/* The first call of a direction with a duration: at most this many bytes,
 * since no rate of that direction is known yet to fit it to the duration. */
#define PROBE_FIRST_CALL (1024LL * 1024)

/* The pacing cap (bytes/s) for the probe's own socket after a write call
 * of `bytes` that took call_s seconds on a path of rtt_s: the larger of
 * `cap` (0: none yet) and PROBE_PACE_FACTOR times the rate at which the
 * call's data left, bytes / (call_s - rtt_s); calls shorter than a whole
 * request leave it as it is. Why: libsmbclient sends one write request at
 * a time, so each request starts with the socket empty and no
 * acknowledgements coming, and TCP sends what its window allows in one
 * burst, faster than the path drains it (unpaced with cubic; bbr, still in
 * its start-up after request upon request, paces at almost 3 times its
 * estimate). From SO_SNDBUF 4 MiB on, that burst overflowed the
 * bottleneck's queue of a 40 ms / 1 Gbit/s path (649 to 2774 segments
 * retransmitted per 2 s write, none at 2 MiB) and the probe ranked 2 MiB
 * first, where a pipelined sender (smbd answering reads), clocked by its
 * acknowledgements, gains up to 8 MiB. Paced at twice the rate of the
 * fastest request, the burst no longer outruns the path (none
 * retransmitted, with bbr or cubic, at caps of 1.1 to 2 times the link)
 * and a rate the path can carry is not held back: the cap only grows, so a
 * slow call does not lower it. Paths under PROBE_PACE_MIN_RTT (loopback,
 * a LAN) are left unpaced: a burst there is small against the queues on
 * the way, and the kernel's pacing cost loopback 40% of its write rate
 * (530 against 900 MB/s). Pure. */
#define PROBE_PACE_FACTOR 2.0
#define PROBE_PACE_MIN_RTT 0.002
double probe_pace_cap(double cap, long long bytes, long long request, double call_s, double rtt_s);

/* Set the pacing cap on fd (SO_MAX_PACING_RATE, which also turns on the
 * kernel's own pacing of TCP without the fq qdisc); a cap beyond what the
 * option's 32 bits hold lifts it. Returns the cap set, 0 when none (not
 * supported: the writes go unpaced, as before). */
double probe_set_pacing(int fd, double cap);

/* The connection's smallest round trip in seconds (TCP_INFO on fd), 0 when
 * unknown (which keeps read calls at one request). */
double probe_conn_min_rtt(int fd);

/* The next read call's size at rate_bps (the faster of the writes' and the
 * reads' so far, so that slow writes do not shorten the calls of fast
 * reads): grows *buf (*cap bytes) to it, or, without the memory, stays
 * within *cap. */
size_t probe_next_read_call(unsigned char **buf, size_t *cap, long long request, double rtt_s,
                            double rate_bps);

/* Where Samba's recycle module puts the probe file `name` of directory
 * `dir` inside the share ("" for its root) once deleted, as it is mostly
 * set up: its default repository PROBE_RECYCLE_DIR (`recycle:repository`
 * unset, or `.recycle/%U` for the probe's anonymous guest session, whose
 * %U is empty), and PROBE_RECYCLE_DIR/<user> (`.recycle/%U` or `%u` for a
 * logged-on user, `%u` for the guest: its account, `nobody` by default);
 * with a directory also the `recycle:keeptree` places, which keep it
 * under the repository. `user` goes in as Samba's %U does (letters,
 * digits and "._-$" kept, anything else '_'); NULL, empty, "." or ".."
 * leaves its places out. The first place comes first on purpose: in a
 * `.recycle/%U` share a delete of `.recycle/<name>` by another user moves
 * the file on to `.recycle/<user>/<name>`, looked at next. At most
 * PROBE_RECYCLE_PLACES paths of PROBE_RECYCLE_PATH bytes; returns how
 * many (a path that does not fit is left out). Pure. */
#define PROBE_RECYCLE_DIR ".recycle"
#define PROBE_RECYCLE_GUEST "nobody"
#define PROBE_RECYCLE_PLACES 4
#define PROBE_RECYCLE_PATH 512
int probe_recycle_places(const char *dir, const char *user, const char *name,
                         char (*out)[PROBE_RECYCLE_PATH]);

/* CLOCK_MONOTONIC in nanoseconds: the clock of probe_shared's times. */
int64_t probe_mono_ns(void);

/* A slot of probe_shared written by the child, read while it runs. */
static inline int64_t probe_shared_peek(const int64_t *slot)
{
    return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
}

/* The child, right after fork: makes itself undumpable, sets itself up
 * (child_setup: HOME=workdir, notify_fd as fd 3, dies with parent),
 * measures, fills a->sh, writes a byte on fd 3 and exits. */
void probe_child_main(const struct probe_child_args *a, const char *workdir, int notify_fd,
                      pid_t parent) __attribute__((noreturn));

#endif
