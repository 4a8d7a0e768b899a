/* Unit tests for lib/probe: the socket options check, the errno-to-outcome
 * mapping, the outcome names and the JSON line, the parameters probe_start
 * refuses, its sweep of $TMPDIR and the size of its read calls. The URL
 * and the credentials file have their own tests (test_url.c, test_creds.c);
 * the measurement itself is tested against a real smbd in
 * tests/integration/test_probe.py. */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe.h"
#include "probe_child.h"
#include "probe_made.h"
#include "child.h"
#include "kernel.h"
#include "stuck.h"

static void test_check_socket_options(void **state)
{
    struct err e;

    (void)state;
    assert_int_equal(probe_check_socket_options("TCP_NODELAY SO_RCVBUF=262144", &e), 0);
    assert_int_equal(probe_check_socket_options("", &e), -EINVAL);
    /* A line break or a continuation would add parameters to the private
     * smb.conf: refused. */
    assert_int_equal(probe_check_socket_options("TCP_NODELAY\ninclude = /x", &e), -EINVAL);
    assert_int_equal(probe_check_socket_options("TCP_NODELAY \\", &e), -EINVAL);
    /* A size Samba's client reads otherwise than written (atoi, no `=`)
     * would give the probe the kernel's smallest buffer: refused, naming
     * the token, as smbtuned.conf(5) asks for NAME=VALUE. */
    assert_int_equal(probe_check_socket_options("TCP_NODELAY SO_RCVBUF=256K", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "'SO_RCVBUF=256K'"));
    assert_int_equal(probe_check_socket_options("TCP_NODELAY SO_SNDBUF = 262144", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "'SO_SNDBUF'"));
    assert_int_equal(probe_check_socket_options("SO_RCVBUF=4294967297", &e), -EINVAL);
    /* the last token for a buffer is the one Samba uses */
    assert_int_equal(probe_check_socket_options("SO_RCVBUF=64K SO_RCVBUF=65536", &e), 0);
    assert_int_equal(probe_check_socket_options("TCP_NODELAY SO_SNDBUF=0", &e), 0);
    /* Quotes are Samba's grouping, not a misread size: said so */
    assert_int_equal(probe_check_socket_options("SO_RCVBUF=\"65536\"", &e), -EINVAL);
    assert_non_null(strstr(e.msg, "double quote"));
    assert_null(strstr(e.msg, "Samba reads '"));
}

static void test_classify(void **state)
{
    (void)state;
    assert_int_equal(probe_classify_errno(ECONNREFUSED, true), PROBE_CONNECT_REFUSED);
    assert_int_equal(probe_classify_errno(ENOENT, true), PROBE_SHARE_NOT_FOUND);
    assert_int_equal(probe_classify_errno(ENODEV, true), PROBE_SHARE_NOT_FOUND);
    assert_int_equal(probe_classify_errno(ENOENT, false), PROBE_ERROR);
    assert_int_equal(probe_classify_errno(EPERM, true), PROBE_AUTH_FAILED);
    assert_int_equal(probe_classify_errno(EPERM, false), PROBE_ACCESS_DENIED);
    assert_int_equal(probe_classify_errno(EACCES, false), PROBE_ACCESS_DENIED);
    assert_int_equal(probe_classify_errno(EROFS, false), PROBE_ACCESS_DENIED);
    assert_int_equal(probe_classify_errno(ENOSPC, false), PROBE_DISK_FULL);
    assert_int_equal(probe_classify_errno(EDQUOT, false), PROBE_DISK_FULL);
    assert_int_equal(probe_classify_errno(EIO, false), PROBE_ERROR);
    assert_int_equal(probe_classify_errno(ETIMEDOUT, true), PROBE_ERROR);
}

static void test_outcome_names(void **state)
{
    (void)state;
    /* Outside checks rely on these spellings. */
    assert_string_equal(probe_outcome_name(PROBE_OK), "ok");
    assert_string_equal(probe_outcome_name(PROBE_TIMEOUT), "timeout");
    assert_string_equal(probe_outcome_name(PROBE_CONNECT_REFUSED), "connect_refused");
    assert_string_equal(probe_outcome_name(PROBE_NAME_NOT_FOUND), "name_not_found");
    assert_string_equal(probe_outcome_name(PROBE_AUTH_FAILED), "auth_failed");
    assert_string_equal(probe_outcome_name(PROBE_SHARE_NOT_FOUND), "share_not_found");
    assert_string_equal(probe_outcome_name(PROBE_ACCESS_DENIED), "access_denied");
    assert_string_equal(probe_outcome_name(PROBE_DISK_FULL), "disk_full");
    assert_string_equal(probe_outcome_name(PROBE_ERROR), "error");
    assert_string_equal(probe_outcome_name((enum probe_outcome)99), "error");
}

static void test_json(void **state)
{
    struct probe_result r;
    char line[512];

    (void)state;
    memset(&r, 0, sizeof(r));
    r.outcome = PROBE_TIMEOUT;
    r.write_bytes = 1000000;
    r.write_s = 0.5;
    r.write_mbps = 2.0;
    r.write_startup_bytes = 65536;
    r.write_startup_s = 0.125;
    r.write_wait_s = 0.375;
    r.write_pace_bps = 250000000;
    r.client_rcvbuf = 524288;
    r.client_sndbuf = -1;
    r.loopback = true;
    assert_int_equal(probe_result_json(&r, line, sizeof(line)), 0);
    assert_string_equal(line, "{\"outcome\":\"timeout\",\"write_mbps\":2.0,\"read_mbps\":0.0,"
                              "\"write_bytes\":1000000,\"read_bytes\":0,\"write_s\":0.5,"
                              "\"read_s\":0.0,\"write_startup_bytes\":65536,"
                              "\"write_startup_s\":0.125,\"read_startup_bytes\":0,"
                              "\"read_startup_s\":0.0,\"write_wait_s\":0.375,"
                              "\"read_wait_s\":0.0,\"write_pace_bps\":250000000,"
                              "\"client_rcvbuf\":524288,\"client_sndbuf\":-1,"
                              "\"loopback\":true,\"recycle\":\"none\"}");
    assert_int_equal(probe_result_json(&r, line, 20), -ENOSPC);
    /* One byte short of the line, and just enough. */
    assert_int_equal(probe_result_json(&r, line, strlen(line)), -ENOSPC);
    assert_int_equal(probe_result_json(&r, line, strlen(line) + 1), 0);
}

/* The values are those of the line printed with "%.3f" (rates) and "%.6f"
 * (seconds) before it went through jansson, digit for digit, and byte
 * counts are exact beyond 2^53. */
static void test_json_values(void **state)
{
    struct probe_result r;
    char line[512];

    (void)state;
    memset(&r, 0, sizeof(r));
    r.outcome = PROBE_OK;
    r.write_mbps = 1234.5678;
    r.read_mbps = 0.0004999;
    r.write_bytes = 9007199254740993LL; /* 2^53 + 1: no double holds it */
    r.read_bytes = 68719476736LL;
    r.write_s = 0.1234567;
    r.read_s = 12345.000000499;
    r.read_wait_s = 0.0123456789;
    r.client_rcvbuf = 2304;
    r.client_sndbuf = 8388608;
    assert_int_equal(probe_result_json(&r, line, sizeof(line)), 0);
    assert_string_equal(line, "{\"outcome\":\"ok\",\"write_mbps\":1234.568,\"read_mbps\":0.0,"
                              "\"write_bytes\":9007199254740993,\"read_bytes\":68719476736,"
                              "\"write_s\":0.123457,\"read_s\":12345.0,"
                              "\"write_startup_bytes\":0,\"write_startup_s\":0.0,"
                              "\"read_startup_bytes\":0,\"read_startup_s\":0.0,"
                              "\"write_wait_s\":0.0,\"read_wait_s\":0.012346,"
                              "\"write_pace_bps\":0,\"client_rcvbuf\":2304,"
                              "\"client_sndbuf\":8388608,\"loopback\":false,"
                              "\"recycle\":\"none\"}");
    r.read_mbps = 0.1;
    r.write_mbps = 987654.3216;
    assert_int_equal(probe_result_json(&r, line, sizeof(line)), 0);
    assert_non_null(strstr(line, "\"write_mbps\":987654.322,\"read_mbps\":0.1,"));
}

static void test_start_refuses_bad_params(void **state)
{
    struct probe_params p;
    struct probe_job job;
    struct err e = {{0}};

    (void)state;
    probe_params_default(&p);
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
    p.url = "smb://127.0.0.1/share";
    p.request_size = PROBE_MAX_REQUEST_SIZE + 1;
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
    probe_params_default(&p);
    p.url = "smb://127.0.0.1/share";
    p.socket_options = "TCP_NODELAY\n[x]";
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
    p.socket_options = NULL;
    p.directory = "../up";
    assert_int_equal(probe_start(&p, &job, &e), -EINVAL);
}

/* A pid no process has now. */
static long dead_pid(void)
{
    for (long pid = 4194303; pid > 300; pid--) {
        if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            return pid;
    }
    fail_msg("no free pid");
    return -1;
}

/* dir/rel, in one of a few static buffers. */
static const char *in(const char *dir, const char *rel)
{
    static char buf[4][8192];
    static int i;

    i = (i + 1) % 4;
    if ((size_t)snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, rel) >= sizeof(buf[i]))
        fail_msg("path too long");
    return buf[i];
}

static bool exists_in(const char *dir, const char *rel)
{
    struct stat st;

    return lstat(in(dir, rel), &st) == 0;
}

static void mkdir_in(const char *dir, const char *rel, uid_t owner)
{
    assert_int_equal(mkdir(in(dir, rel), 0755), 0);
    assert_int_equal(lchown(in(dir, rel), owner, owner), 0);
}

static void file_in(const char *dir, const char *rel, uid_t owner)
{
    int fd = open(in(dir, rel), O_WRONLY | O_CREAT | O_EXCL, 0644);

    assert_true(fd >= 0);
    assert_int_equal(fchown(fd, owner, owner), 0);
    close(fd);
}

/* Without a state directory the probe works in $TMPDIR, where anyone can
 * plant a tree named like a dead probe's: someone else's stays, whole; one
 * of ours goes, but not what its links point to; the probe's own goes. */
static void test_tmpdir_sweep_removes_only_ours(void **state)
{
    char tmp[4096], theirs[128], theirs_sub[160], ours[128], link[160], cmd[4200];
    const char *old = getenv("TMPDIR");
    struct probe_params p;
    struct probe_result r;
    struct probe_job job;
    struct err e = {{0}};
    struct pollfd pfd;
    struct dirent *de;
    long pid = dead_pid();
    int n = 0;
    DIR *d;

    (void)state;
    if (geteuid() != 0)
        skip();
    snprintf(tmp, sizeof(tmp), "%s/test_probe_tmp.XXXXXX", old ? old : "/tmp");
    assert_non_null(mkdtemp(tmp));
    snprintf(theirs, sizeof(theirs), PROBE_WORKDIR_PREFIX "%ld-aaaaaa", pid);
    snprintf(theirs_sub, sizeof(theirs_sub), "%s/.smb", theirs);
    snprintf(ours, sizeof(ours), PROBE_WORKDIR_PREFIX "%ld-bbbbbb", pid);
    snprintf(link, sizeof(link), "%s/link", ours);
    mkdir_in(tmp, theirs, 65534);
    mkdir_in(tmp, theirs_sub, 65534);
    file_in(tmp, in(theirs_sub, "smb.conf"), 65534);
    mkdir_in(tmp, "precious", 0);
    file_in(tmp, "precious/f", 0);
    mkdir_in(tmp, ours, 0);
    assert_int_equal(symlink(in(tmp, "precious"), in(tmp, link)), 0);

    setenv("TMPDIR", tmp, 1);
    probe_params_default(&p);
    p.url = "smb://127.0.0.1:1/share"; /* refused at once */
    p.deadline_s = 30;
    assert_int_equal(probe_start(&p, &job, &e), 0);
    pfd.fd = job.fd;
    pfd.events = POLLIN;
    assert_int_equal(poll(&pfd, 1, 30000), 1);
    assert_int_equal(probe_finish(&job, &r, &e), 0);
    if (old)
        setenv("TMPDIR", old, 1);
    else
        unsetenv("TMPDIR");

    assert_int_equal(r.outcome, PROBE_CONNECT_REFUSED);
    assert_true(exists_in(tmp, in(theirs_sub, "smb.conf")));
    assert_false(exists_in(tmp, ours));
    assert_true(exists_in(tmp, "precious/f"));
    /* Nothing of this probe's own is left: theirs and precious only. */
    d = opendir(tmp);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    closedir(d);
    assert_int_equal(n, 2);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
}

/* Read calls last about PROBE_READ_CALL_RTTS round trips at the writes'
 * rate, in whole requests, from one request to PROBE_READ_CALL_MAX. */
static void test_read_call_size(void **state)
{
    const long long M = 1024 * 1024;

    (void)state;
    /* Loopback and LAN: one request per call. */
    assert_int_equal(probe_read_call_size(8 * M, 50e-6, 800e6), 8 * M);
    assert_int_equal(probe_read_call_size(8 * M, 0.001, 117e6), 8 * M);
    /* 45 ms / 11 MB/s: 9.9 MB, rounded up to whole requests. */
    assert_int_equal(probe_read_call_size(8 * M, 0.045, 11e6), 16 * M);
    assert_int_equal(probe_read_call_size(1 * M, 0.045, 11e6), 10 * M);
    /* 40 ms / 1 Gbit/s and beyond: capped, in whole requests. */
    assert_int_equal(probe_read_call_size(8 * M, 0.04, 117e6), PROBE_READ_CALL_MAX);
    assert_int_equal(probe_read_call_size(3 * M, 0.1, 1e9), 63 * M);
    /* Nothing known: one request. */
    assert_int_equal(probe_read_call_size(8 * M, 0, 50e6), 8 * M);
    assert_int_equal(probe_read_call_size(8 * M, 0.04, 0), 8 * M);
    assert_int_equal(probe_read_call_size(4096, 0.04, 0.0 / 0.0), 4096);
}

static struct probe_params timed(long long size, double duration)
{
    struct probe_params p;

    probe_params_default(&p);
    p.size = size;
    p.duration_s = duration;
    return p;
}

/* A direction with a duration ends at it; at its size only once the
 * start-up's round trips have passed; at the cap in any case. Without a
 * duration: at the size, whatever the time. */
static void test_phase_over(void **state)
{
    const long long M = 1024 * 1024;
    struct probe_params p = timed(64 * M, 2);

    (void)state;
    /* wan-100: the clock ends it long before 64 MiB */
    assert_false(probe_phase_over(&p, 20 * M, 1.9, 0.04));
    assert_true(probe_phase_over(&p, 20 * M, 2.0, 0.04));
    /* a long fast path: 64 MiB after 0.6 s, but 50 round trips are 2 s */
    assert_false(probe_phase_over(&p, 64 * M, 0.6, 0.04));
    assert_false(probe_phase_over(&p, 100 * M, 1.5, 0.04));
    assert_true(probe_phase_over(&p, 100 * M, 2.0, 0.04));
    /* a LAN: the size ends it once 50 ms have passed */
    assert_false(probe_phase_over(&p, 64 * M - 1, 0.6, 0.001));
    assert_true(probe_phase_over(&p, 64 * M, 0.6, 0.001));
    assert_false(probe_phase_over(&p, 64 * M, 0.04, 0.001));
    /* no round trip known: the size as without a start-up */
    assert_true(probe_phase_over(&p, 64 * M, 0.01, 0));
    /* the cap, even inside the start-up and the duration */
    p = timed(4 * M, 3600);
    assert_false(probe_phase_over(&p, 64 * M - 1, 1, 0.1));
    assert_true(probe_phase_over(&p, 64 * M, 1, 0.1));
    /* no duration: exactly the size */
    p = timed(64 * M, 0);
    assert_false(probe_phase_over(&p, 64 * M - 1, 100, 0.04));
    assert_true(probe_phase_over(&p, 64 * M, 0.01, 0.04));
}

/* The start-up ends at PROBE_WARMUP_RTTS round trips, never at 0. */
static void test_warmed(void **state)
{
    (void)state;
    assert_false(probe_warmed(0.39, 0.04));
    assert_true(probe_warmed(0.40, 0.04));
    assert_true(probe_warmed(0.001, 50e-6)); /* loopback: after the first call */
    assert_true(probe_warmed(0.001, 0));     /* no round trip known: the first call */
    assert_false(probe_warmed(0, 0));
}

/* A call's window: the duration left, and before the start-up's end no
 * more than the start-up left; never negative. */
static void test_call_window(void **state)
{
    struct probe_params p = timed(64 * 1024 * 1024, 2);

    (void)state;
    assert_true(fabs(probe_call_window(&p, 0.3, 0.04, false) - 0.1) < 1e-9);
    assert_true(fabs(probe_call_window(&p, 0.3, 0.04, true) - 1.7) < 1e-9);
    assert_true(probe_call_window(&p, 0.5, 0.04, false) == 0); /* past it: one unit */
    /* a long path: the duration is the nearer end */
    assert_true(fabs(probe_call_window(&p, 1.9, 0.5, false) - 0.1) < 1e-9);
    assert_true(probe_call_window(&p, 2.5, 0.04, true) == 0);
}

/* probe_phase_rate on a direction without waits. */
static double rate(long long bytes, double secs, long long warm_bytes, double warm_s, long long *sb,
                   double *ss)
{
    struct probe_phase ph = {bytes, warm_bytes, secs, warm_s, 0, 0};
    double ws;
    double r = probe_phase_rate(&ph, sb, ss, &ws);

    assert_true(ws == 0);
    return r;
}

/* The rate after the start-up when that part holds at least half the
 * bytes; the whole direction otherwise; what was left out is said. */
static void test_phase_rate(void **state)
{
    long long sb;
    double ss;

    (void)state;
    /* wan-100: 7 MB in the first 0.85 s, 12 MB in the 1.15 s after */
    assert_true(fabs(rate(19000000, 2.0, 7000000, 0.85, &sb, &ss) - 12000000 / 1.15) < 1e-6);
    assert_int_equal(sb, 7000000);
    assert_true(ss == 0.85);
    /* no start-up marked: the whole */
    assert_true(rate(19000000, 2.0, 0, 0, &sb, &ss) == 9500000);
    assert_int_equal(sb, 0);
    assert_true(ss == 0);
    /* a slow trial's first call was most of it: the whole */
    assert_true(rate(2000000, 2.0, 1048576, 1.9, &sb, &ss) == 1000000);
    assert_int_equal(sb, 0);
    /* exactly half after: still the part after */
    assert_true(rate(2000000, 2.0, 1000000, 1.0, &sb, &ss) == 1000000);
    assert_int_equal(sb, 1000000);
    /* the mark at the end (the last call): the whole */
    assert_true(rate(2000000, 2.0, 2000000, 2.0, &sb, &ss) == 1000000);
    assert_int_equal(sb, 0);
    /* nothing moved or no time: 0 */
    assert_true(rate(0, 2.0, 0, 0, &sb, &ss) == 0);
    assert_true(rate(100, 0, 0, 0, &sb, &ss) == 0);
}

/* The calls' waits are left out of the part the rate covers, and only
 * theirs: wan-1g, 8 MiB writes of 140 ms on the wire and one 40 ms round
 * trip each. */
static void test_phase_rate_waits(void **state)
{
    const double mib8 = 8.0 * 1024 * 1024;
    long long sb;
    double ss, ws;
    /* 0.4 s of start-up (3 MB, 0.1 s of waits), then ten calls */
    struct probe_phase ph = {
        3000000 + (long long)(10 * mib8), 3000000, 0.4 + 10 * 0.18, 0.4, 0.1 + 10 * 0.04, 0.1};

    (void)state;
    assert_true(fabs(probe_phase_rate(&ph, &sb, &ss, &ws) - mib8 / 0.14) < 1e-3);
    assert_int_equal(sb, 3000000);
    assert_true(ss == 0.4);
    assert_true(fabs(ws - 0.4) < 1e-9);
    /* no start-up: every wait out */
    ph.warm_bytes = 0;
    ph.warm_s = ph.warm_wait_s = 0;
    assert_true(fabs(probe_phase_rate(&ph, &sb, &ss, &ws) - (double)ph.bytes / 1.7) < 1e-3);
    assert_true(fabs(ws - 0.5) < 1e-9);
    /* waits of more than half the time: half (a round trip estimate off
     * cannot make a rate more than twice the clock's) */
    ph.wait_s = ph.secs;
    assert_true(fabs(probe_phase_rate(&ph, &sb, &ss, &ws) - 2 * (double)ph.bytes / ph.secs) < 1e-3);
    assert_true(ws == ph.secs / 2);
    ph.wait_s = -1;
    assert_true(fabs(probe_phase_rate(&ph, &sb, &ss, &ws) - (double)ph.bytes / ph.secs) < 1e-3);
    assert_true(ws == 0);
}

/* A call's wait: one round trip; nothing when the call is no longer than
 * the round trip or either is unknown. */
static void test_call_wait(void **state)
{
    (void)state;
    assert_true(probe_call_wait(0.18, 0.04) == 0.04);
    /* a call no longer than the round trip: the round trip is not its */
    assert_true(probe_call_wait(0.04, 0.04) == 0);
    assert_true(probe_call_wait(0.03, 0.04) == 0);
    assert_true(probe_call_wait(0.18, 0) == 0);
    assert_true(probe_call_wait(0, 0.04) == 0);
    assert_true(probe_call_wait(-1, 0.04) == 0);
    assert_true(probe_call_wait(0.18, NAN) == 0);
    assert_true(probe_call_wait(NAN, 0.04) == 0);
}

/* The room: up to the size first, then up to the cap with a duration. */
static void test_phase_room(void **state)
{
    const long long M = 1024 * 1024;
    struct probe_params p = timed(64 * M, 2);

    (void)state;
    assert_int_equal(probe_phase_room(&p, 0), 64 * M);
    assert_int_equal(probe_phase_room(&p, 60 * M), 4 * M);
    assert_int_equal(probe_phase_room(&p, 64 * M), 64 * M * (PROBE_SIZE_CAP_FACTOR - 1));
    assert_int_equal(probe_phase_room(&p, 64 * M * PROBE_SIZE_CAP_FACTOR), 0);
    p = timed(64 * M, 0);
    assert_int_equal(probe_phase_room(&p, 60 * M), 4 * M);
    assert_int_equal(probe_phase_room(&p, 64 * M), 0);
}

/* The share's room: a direction with a duration stops at it when it is
 * less than the cap; it never cuts the size (a probe refuses then). */
static void test_phase_room_of_the_share(void **state)
{
    const long long M = 1024 * 1024;
    struct probe_params p = timed(4 * M, 3600);

    (void)state;
    p.room = 10 * M;
    assert_false(probe_phase_over(&p, 10 * M - 1, 1, 0.1));
    assert_true(probe_phase_over(&p, 10 * M, 1, 0.1));
    assert_int_equal(probe_phase_room(&p, 4 * M), 6 * M);
    assert_int_equal(probe_phase_room(&p, 0), 4 * M);
    /* more room than the cap: the cap */
    p.room = 1024 * M;
    assert_false(probe_phase_over(&p, 64 * M - 1, 1, 0.1));
    assert_true(probe_phase_over(&p, 64 * M, 1, 0.1));
    assert_int_equal(probe_phase_room(&p, 4 * M), 60 * M);
}

/* What a share leaves a probe file: its free space less 5% of it, at
 * most 1 GiB; nothing when the reserve takes it all; unknown when the
 * share said nothing. */
static void test_room(void **state)
{
    const long long M = 1024 * 1024, G = 1024 * M;
    long long reserve = -2;

    (void)state;
    assert_int_equal(probe_room(9 * M, 32 * M, &reserve), 9 * M - 32 * M / 100 * 5);
    assert_int_equal(reserve, 32 * M / 100 * 5);
    /* a large share: the reserve stops at 1 GiB */
    assert_int_equal(probe_room(3 * G, 100 * G, &reserve), 2 * G);
    assert_int_equal(reserve, PROBE_ROOM_RESERVE_MAX);
    /* all of it the reserve's, or less */
    assert_int_equal(probe_room(5 * M, 100 * M, &reserve), 0);
    assert_int_equal(probe_room(0, 100 * M, &reserve), 0);
    /* a share that said nothing, or one of Samba's stand-ins for it (a
     * dfree command printing no sizes: 2 MiB, 1 free; a file system
     * without sizes: 20 MiB) */
    assert_int_equal(probe_room(0, 0, &reserve), -1);
    assert_int_equal(probe_room(1 * M, 2 * M, &reserve), -1);
    assert_int_equal(probe_room(1 * M, 20 * M, &reserve), -1);
    assert_int_equal(probe_room(20 * M, 20 * M + 1, &reserve), 20 * M - (20 * M + 1) / 100 * 5);
    /* more than a long long holds */
    assert_int_equal(probe_room(ULLONG_MAX, ULLONG_MAX, &reserve), LLONG_MAX);
}

/* A call fits the time left at the rate seen, in whole units, at least
 * one; a rate or a duration unknown leaves it. */
static void test_call_fit(void **state)
{
    const long long M = 1024 * 1024, U = PROBE_CALL_UNIT;

    (void)state;
    /* 8 KiB buffers on 40 ms: 1.2 MB/s, 1.1 s left: 1.32 MB, not 8 MiB */
    assert_int_equal(probe_call_fit(8 * M, 1.2e6, 1.1), (1320000 / U + 1) * U);
    /* fast enough: the call stays */
    assert_int_equal(probe_call_fit(8 * M, 11e6, 1.5), 8 * M);
    /* out of time: one unit */
    assert_int_equal(probe_call_fit(8 * M, 11e6, 0), U);
    /* a call smaller than a unit is never made larger */
    assert_int_equal(probe_call_fit(4096, 1e3, 0.1), 4096);
    /* unknown: as it is */
    assert_int_equal(probe_call_fit(8 * M, 0, 1), 8 * M);
    assert_int_equal(probe_call_fit(8 * M, 0.0 / 0.0, 1), 8 * M);
    assert_int_equal(probe_call_fit(8 * M, 1e6, -1), 8 * M);
}

/* The buffer grows to the call, the call never outgrows the buffer. */
static void test_next_read_call(void **state)
{
    const long long M = 1024 * 1024;
    size_t cap = 8 * M;
    unsigned char *buf = malloc(cap);

    (void)state;
    assert_non_null(buf);
    assert_int_equal(probe_next_read_call(&buf, &cap, 8 * M, 50e-6, 800e6), 8 * M);
    assert_int_equal(cap, 8 * M);
    assert_int_equal(probe_next_read_call(&buf, &cap, 8 * M, 0.045, 11e6), 16 * M);
    assert_int_equal(cap, 16 * M);
    buf[cap - 1] = 1; /* it is really that large (ASan, valgrind) */
    assert_int_equal(probe_next_read_call(&buf, &cap, 8 * M, 0.001, 117e6), 8 * M);
    assert_int_equal(cap, 16 * M);
    free(buf);
}

/* The round trip of a real loopback connection, and none without one. */
static void test_conn_min_rtt(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    int ls = socket(AF_INET, SOCK_STREAM, 0), cs = socket(AF_INET, SOCK_STREAM, 0), as, pfd[2];
    char x = 'x';
    double rtt;

    (void)state;
    assert_true(ls >= 0 && cs >= 0);
    assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(ls, 1), 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
    assert_int_equal(connect(cs, (struct sockaddr *)&a, sizeof(a)), 0);
    as = accept(ls, NULL, NULL);
    assert_true(as >= 0);
    assert_int_equal(write(cs, &x, 1), 1);
    assert_int_equal(read(as, &x, 1), 1);
    rtt = probe_conn_min_rtt(cs);
    assert_true(rtt > 0 && rtt < 1.0);
    assert_true(probe_conn_min_rtt(-1) == 0);
    assert_int_equal(pipe(pfd), 0);
    assert_true(probe_conn_min_rtt(pfd[0]) == 0);
    close(pfd[0]);
    close(pfd[1]);
    close(as);
    close(cs);
    close(ls);
}

/* The pacing cap: twice the rate at which a whole request's bytes left
 * (its round trip taken out), only ever raised; calls shorter than a
 * request, wire times of zero or less and paths under 2 ms leave it. */
static void test_pace_cap(void **state)
{
    const long long R = 8 * 1024 * 1024;

    (void)state;
    /* 8 MiB in 107 ms on a 40 ms path: 125 MB/s on the wire */
    assert_true(fabs(probe_pace_cap(0, R, R, 0.107, 0.040) - 2 * R / 0.067) < 1);
    /* a slower call does not lower it, a faster one raises it */
    assert_true(probe_pace_cap(300e6, R, R, 0.5, 0.040) == 300e6);
    assert_true(fabs(probe_pace_cap(100e6, 2 * R, R, 0.14, 0.04) - 4 * R / 0.1) < 1);
    /* a call shorter than a request says little: its round trip */
    assert_true(probe_pace_cap(0, R - 1, R, 0.107, 0.040) == 0);
    assert_true(probe_pace_cap(7e6, 65536, R, 0.041, 0.040) == 7e6);
    /* no wire time: no estimate */
    assert_true(probe_pace_cap(0, R, R, 0.040, 0.040) == 0);
    assert_true(probe_pace_cap(0, R, R, 0.030, 0.040) == 0);
    assert_true(probe_pace_cap(0, R, R, NAN, 0.040) == 0);
    assert_true(probe_pace_cap(0, R, 0, 1, 0.040) == 0);
    /* loopback, a LAN, no round trip known (0): unpaced */
    assert_true(probe_pace_cap(0, R, R, 0.009, 20e-6) == 0);
    assert_true(probe_pace_cap(0, R, R, 0.080, 0.0019) == 0);
    assert_true(probe_pace_cap(0, R, R, 0.5, 0) == 0);
    assert_true(probe_pace_cap(0, R, R, 0.5, NAN) == 0);
    assert_true(fabs(probe_pace_cap(0, R, R, 0.080, 0.002) - 2 * R / 0.078) < 1);
}

/* The cap reaches the socket (the kernel reports it back); past 32 bits it
 * lifts the cap; nothing is set on no socket or no cap. */
static void test_set_pacing(void **state)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    unsigned int v = 0;
    socklen_t l = sizeof(v);

    (void)state;
    assert_true(s >= 0);
    assert_true(probe_set_pacing(s, 250e6) == 250e6);
    assert_int_equal(getsockopt(s, SOL_SOCKET, SO_MAX_PACING_RATE, &v, &l), 0);
    assert_int_equal(v, 250000000u);
    assert_true(probe_set_pacing(s, 5e9) == 0);
    l = sizeof(v);
    assert_int_equal(getsockopt(s, SOL_SOCKET, SO_MAX_PACING_RATE, &v, &l), 0);
    assert_int_equal(v, ~0u);
    assert_true(probe_set_pacing(s, 0) == 0);
    assert_true(probe_set_pacing(-1, 250e6) == 0);
    close(s);
}

/* Where the recycle module's copy is looked for: the repository, the
 * user's, and with a directory the keeptree places; a user that cannot be
 * one path component is left out, and goes in as Samba's %U does. */
static void test_recycle_places(void **state)
{
    char out[PROBE_RECYCLE_PLACES][PROBE_RECYCLE_PATH];
    char long_name[600];

    (void)state;
    assert_int_equal(probe_recycle_places("", "daemon", "f", out), 2);
    assert_string_equal(out[0], ".recycle/f");
    assert_string_equal(out[1], ".recycle/daemon/f");
    assert_int_equal(probe_recycle_places("a/b", "daemon", "f", out), 4);
    assert_string_equal(out[2], ".recycle/a/b/f");
    assert_string_equal(out[3], ".recycle/daemon/a/b/f");
    assert_int_equal(probe_recycle_places(NULL, NULL, "f", out), 1);
    assert_int_equal(probe_recycle_places("d", "", "f", out), 2);
    assert_string_equal(out[1], ".recycle/d/f");
    assert_int_equal(probe_recycle_places("", "..", "f", out), 1);
    assert_int_equal(probe_recycle_places("", ".", "f", out), 1);
    /* a separator or anything Samba's %U would not keep becomes '_' */
    assert_int_equal(probe_recycle_places("", "../x/y z$", "f", out), 2);
    assert_string_equal(out[1], ".recycle/.._x_y_z$/f");
    assert_int_equal(probe_recycle_places("", "d\\u", "f", out), 2);
    assert_string_equal(out[1], ".recycle/d_u/f");
    /* a path that does not fit is left out, not cut */
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(probe_recycle_places("", "u", long_name, out), 0);
}

static void test_recycle_text(void **state)
{
    struct probe_result r;
    char out[1024];

    (void)state;
    memset(&r, 0, sizeof(r));
    assert_string_equal(probe_recycle_name(PROBE_RECYCLE_NONE), "none");
    assert_string_equal(probe_recycle_name(PROBE_RECYCLE_REMOVED), "removed");
    assert_string_equal(probe_recycle_name(PROBE_RECYCLE_LEFT), "left");
    assert_string_equal(probe_recycle_name((enum probe_recycle)77), "none");
    assert_int_equal(probe_recycle_text("smb://h/s", &r, out, sizeof(out)), -ENOENT);
    r.recycle = PROBE_RECYCLE_REMOVED;
    snprintf(r.recycle_path, sizeof(r.recycle_path), ".recycle/x");
    assert_int_equal(probe_recycle_text("smb://h/s", &r, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "smb://h/s keeps deleted files"));
    assert_non_null(strstr(out, "smb://h/s keeps deleted files (Samba's recycle module): add "
                                "'recycle:exclude = .smbtuned-probe-*' to that share"));
    assert_non_null(strstr(out, "went to .recycle/x and the probe deleted it there too"));
    assert_non_null(strstr(out, "'recycle:exclude = .smbtuned-probe-*'"));
    r.recycle = PROBE_RECYCLE_LEFT;
    snprintf(r.recycle_why, sizeof(r.recycle_why), "Permission denied");
    assert_int_equal(probe_recycle_text("smb://h/s", &r, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "could not be deleted there (Permission denied): every probe"));
}

/* A probe child that SIGKILL does not end (its credentials file on a
 * file system that does not answer: tests/unit/stuck.c) holds
 * probe_finish no longer than its bound: an error that says so, the child
 * kept as a stray and reaped once it can go. (Before, probe_finish
 * waited for it without a bound: the alarm would end this test.) While
 * CHILD_STRAYS_MAX of them wait, probe_start refuses another. */
static void test_finish_of_a_stuck_child(void **state)
{
    struct stuck mnt;
    struct probe_params p;
    struct probe_job job;
    struct probe_result r;
    struct err e = {{0}};
    char base[] = "/tmp/test_probe_stuck.XXXXXX", cred[PATH_MAX + 16], cmd[128];
    double t0;

    (void)state;
    stuck_mount_or_skip(&mnt);
    assert_non_null(mkdtemp(base));
    snprintf(cred, sizeof(cred), "%s/cred", mnt.dir);
    probe_params_default(&p);
    p.url = "smb://127.0.0.1:1/share"; /* the credentials come first */
    p.credentials = cred;
    p.deadline_s = 30;
    p.workdir_base = base;
    for (int i = 0; i < CHILD_STRAYS_MAX; i++) {
        int taken = 0;

        assert_int_equal(probe_start(&p, &job, &e), 0);
        /* the child's look-up of the file, read and never answered */
        t0 = child_now();
        while ((taken += stuck_take(&mnt)) == 0 && child_now() - t0 < 30)
            usleep(10000);
        assert_true(taken >= 1);
        alarm(60);
        t0 = child_now();
        assert_int_equal(probe_finish(&job, &r, &e), 0);
        alarm(0);
        assert_true(child_now() - t0 < 20); /* the bound, with room: not a speed */
        assert_int_equal(r.outcome, PROBE_ERROR);
        assert_non_null(strstr(r.cause, "did not end within"));
        assert_int_equal(child_reap_strays(), i + 1);
    }
    assert_int_equal(probe_start(&p, &job, &e), -EAGAIN);
    assert_non_null(strstr(e.msg, "have not ended"));

    stuck_release(&mnt);
    t0 = child_now();
    while (child_reap_strays() > 0 && child_now() - t0 < 30)
        usleep(10000);
    assert_int_equal(child_reap_strays(), 0);
    p.credentials = NULL;
    assert_int_equal(probe_start(&p, &job, &e), 0);
    assert_int_equal(probe_finish(&job, &r, &e), 0);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* Who made a record: a probe of another boot, or one whose pid is now
 * another process, is gone whatever lives under its pid; a record without
 * them is judged by its pid. */
static void write_record(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 300];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void test_made_dead_by_boot_and_start(void **state)
{
    char dir[] = "/tmp/test_probe_made.XXXXXX", boot[64] = "", text[200], cmd[128];
    char names[8][256], me[128], gone[128];
    unsigned long long start;
    long self = (long)getpid();
    FILE *f;
    int fd, n;

    (void)state;
    f = fopen("/proc/sys/kernel/random/boot_id", "r");
    assert_non_null(f);
    assert_non_null(fgets(boot, sizeof(boot), f));
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    assert_int_equal(kernel_proc_start(getpid(), &start), 0);
    assert_non_null(mkdtemp(dir));
    fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);

    /* what probe_made_add writes: this process, alive */
    snprintf(me, sizeof(me), PROBE_FILE_PREFIX "h-%ld-00000000000000a1", self);
    assert_int_equal(probe_made_add(fd, me), 0);
    /* this pid, but made in another boot: a power cut ago */
    snprintf(gone, sizeof(gone), PROBE_FILE_PREFIX "h-%ld-00000000000000a2", self);
    write_record(dir, gone, "boot=00000000-0000-0000-0000-000000000000 start=1\n");
    /* this pid and boot, another start: the pid was taken again */
    snprintf(text, sizeof(text), "boot=%s start=%llu\n", boot, start + 1);
    write_record(dir, PROBE_FILE_PREFIX "h-1-00000000000000a3", "");
    snprintf(names[0], sizeof(names[0]), PROBE_FILE_PREFIX "h-%ld-00000000000000a4", self);
    write_record(dir, names[0], text);
    /* no content: the pid alone (alive: this process; 1 is init) */
    snprintf(names[1], sizeof(names[1]), PROBE_FILE_PREFIX "h-%ld-00000000000000a5", self);
    write_record(dir, names[1], "");

    n = probe_made_dead(fd, names, 8);
    assert_int_equal(n, 2);
    qsort(names, (size_t)n, sizeof(names[0]), by_name);
    assert_string_equal(names[0], gone);
    snprintf(text, sizeof(text), PROBE_FILE_PREFIX "h-%ld-00000000000000a4", self);
    assert_string_equal(names[1], text);
    close(fd);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The record's names: exactly PREFIX<host>-<pid>-<16 hex>, any host. */
static void test_made_pid(void **state)
{
    (void)state;
    assert_int_equal(probe_made_pid(".smbtuned-probe-nas-1-4242-0123456789abcdef"), 4242);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-1-0123456789abcdef"), 1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-a-b-c-77-fedcba9876543210"), 77);
    /* no host, no pid, a pid with a leading 0 or out of range */
    assert_int_equal(probe_made_pid(".smbtuned-probe--4242-0123456789abcdef"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h--0123456789abcdef"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-4242-0123456789abcdef"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-042-0123456789abcdef"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-0-0123456789abcdef"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-99999999999-0123456789abcdef"), -1);
    /* the tag: 16 lower-case hex digits, nothing after */
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-42-0123456789abcde"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-42-0123456789ABCDEF"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-42-0123456789abcdef0"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-42-0123456789abcdefX"), -1);
    assert_int_equal(probe_made_pid(".smbtuned-probe-h-42-3"), -1);
    assert_int_equal(probe_made_pid("smbtuned-probe-h-42-0123456789abcdef"), -1);
    assert_int_equal(probe_made_pid(""), -1);
    assert_int_equal(probe_made_pid("."), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_socket_options),
        cmocka_unit_test(test_made_pid),
        cmocka_unit_test(test_made_dead_by_boot_and_start),
        cmocka_unit_test(test_finish_of_a_stuck_child),
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_outcome_names),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_json_values),
        cmocka_unit_test(test_start_refuses_bad_params),
        cmocka_unit_test(test_tmpdir_sweep_removes_only_ours),
        cmocka_unit_test(test_read_call_size),
        cmocka_unit_test(test_phase_over),
        cmocka_unit_test(test_phase_room),
        cmocka_unit_test(test_phase_room_of_the_share),
        cmocka_unit_test(test_room),
        cmocka_unit_test(test_warmed),
        cmocka_unit_test(test_call_window),
        cmocka_unit_test(test_phase_rate),
        cmocka_unit_test(test_phase_rate_waits),
        cmocka_unit_test(test_call_wait),
        cmocka_unit_test(test_call_fit),
        cmocka_unit_test(test_next_read_call),
        cmocka_unit_test(test_conn_min_rtt),
        cmocka_unit_test(test_pace_cap),
        cmocka_unit_test(test_set_pacing),
        cmocka_unit_test(test_recycle_places),
        cmocka_unit_test(test_recycle_text),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
