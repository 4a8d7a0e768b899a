/* probe: the parent side of a measurement: checks the parameters, makes
 * the child's private directory and client configuration, forks the
 * measuring child (probe_child.c), collects its result at the end or at
 * the deadline, and cleans up after killed probes. */
#include "probe.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "files.h"
#include "kernel.h"
#include "parse.h"
#include "probe_child.h"
#include "probe_made.h"
#include "rmtree.h"
#include "sockopts.h"
#include "url.h"

/* How long a cleanup-only child may take after a timeout. */
#define CLEANUP_DEADLINE_S 15.0

int probe_check_socket_options(const char *s, struct err *e)
{
    size_t i, n = strlen(s);
    struct sockopts so;
    int r = 0;

    if (n == 0)
        return err_set(e, -EINVAL, "socket options may not be empty (use TCP_NODELAY)");
    for (i = 0; i < n; i++) {
        if (!isprint((unsigned char)s[i]) || s[i] == '\\')
            return err_set(e, -EINVAL, "socket options contain a control character or backslash");
    }
    /* Samba's tokenizer groups words in double quotes into one option and
     * drops the quotes; smbtuned's reading splits on blanks alone, and
     * would misjudge such a value (as smb.conf's reader refuses it too). */
    if (strchr(s, '"') != NULL)
        return err_set(e, -EINVAL,
                       "socket options hold a double quote, which Samba reads as grouping words "
                       "into one option: remove the quotes");
    /* Samba's client reads a buffer size with atoi, and a name without
     * `=` as 1: `SO_RCVBUF=256K` or `SO_RCVBUF = 262144` gives the probe
     * the kernel's smallest buffer, and every rate it measures is that. */
    if (sockopts_parse(s, &so) < 0)
        return err_set(e, -ENOMEM, "socket options: out of memory");
    for (int b = SOCKOPTS_RCVBUF; b <= SOCKOPTS_SNDBUF && r == 0; b++) {
        struct sockopts_size z = sockopts_get(&so, (enum sockopts_buf)b);
        const char *name = sockopts_name((enum sockopts_buf)b);

        if (z.broken)
            r = err_set(e, -EINVAL,
                        "socket options: Samba reads '%s' as %s=%d: write %s=BYTES, a whole "
                        "number without a K or M suffix and without spaces around '='",
                        z.token, name, z.value, name);
    }
    sockopts_free(&so);
    return r;
}

void probe_params_default(struct probe_params *p)
{
    memset(p, 0, sizeof(*p));
    p->size = PROBE_DEFAULT_SIZE;
    p->request_size = PROBE_DEFAULT_REQUEST_SIZE;
    p->deadline_s = PROBE_DEFAULT_DEADLINE_S;
    p->duration_s = PROBE_DEFAULT_DURATION_S;
    p->socket_options = PROBE_DEFAULT_SOCKET_OPTIONS;
}

/* Private directories are named smbtuned-probe-<pid of the parent>-XXXXXX;
 * remove those whose parent is gone (killed before probe_finish()). Only
 * ours: rmtree leaves alone a directory of someone else's (in /tmp anyone
 * can plant one with a dead pid in its name) and never follows a link. */
static void remove_stale_workdirs(int basefd)
{
    static const char prefix[] = PROBE_WORKDIR_PREFIX;
    int fd = fcntl(basefd, F_DUPFD_CLOEXEC, 0);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    struct dirent *de;

    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return;
    }
    while ((de = readdir(d)) != NULL) {
        const char *rest;
        pid_t pid;

        if (parse_pid_name(de->d_name, prefix, &pid, &rest) < 0 || rest == NULL ||
            kernel_pid_alive(pid))
            continue;
        rmtree_at(basefd, de->d_name, NULL);
    }
    closedir(d);
}

/* Where the private directories are made, open: <workdir_base>/probe,
 * which we create 0700 and accept only as a directory of ours that nobody
 * else can write (not a symlink); without a workdir_base, $TMPDIR or /tmp.
 * The path goes into out. */
static int open_workdir_base(const struct probe_params *p, char *out, size_t len, struct err *e)
{
    const char *tmp = getenv("TMPDIR");
    int fd;

    if (p->workdir_base == NULL || p->workdir_base[0] == '\0') {
        if (tmp == NULL || tmp[0] == '\0')
            tmp = "/tmp";
        if ((size_t)snprintf(out, len, "%s", tmp) >= len)
            return err_set(e, -ENAMETOOLONG, "TMPDIR too long");
        fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            return err_set(e, -errno, "%s: %s", out, strerror(errno));
        return fd;
    }
    /* what the probe writes lives in the state directory: private */
    fd = files_private_dir(p->workdir_base, FILES_DIR_MAKE, e);
    if (fd < 0)
        return fd;
    close(fd);
    if ((size_t)snprintf(out, len, "%s/%s", p->workdir_base, PROBE_WORKDIR_SUBDIR) >= len)
        return err_set(e, -ENAMETOOLONG, "work directory name too long");
    fd = files_private_dir(out, FILES_DIR_MAKE | FILES_DIR_OWN, e);
    return fd;
}

static int write_client_conf(const char *workdir, const char *socket_options, struct err *e)
{
    static const char *const subdirs[] = {".smb",    "lock", "state",  "cache",
                                          "private", "pid",  "ncalrpc"};
    char path[4200];
    FILE *f;
    size_t i;

    for (i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", workdir, subdirs[i]);
        if (mkdir(path, 0700) < 0)
            return err_set(e, -errno, "%s: %s", path, strerror(errno));
    }
    snprintf(path, sizeof(path), "%s/.smb/smb.conf", workdir);
    f = fopen(path, "wx");
    if (f == NULL)
        return err_set(e, -errno, "%s: %s", path, strerror(errno));
    /* Everything the client would otherwise take from a system file:
     * socket options (the point), name resolution limited to the system
     * resolver (no NetBIOS broadcasts), SMB2 or later (large requests),
     * and its state directories under our private directory. */
    fprintf(f,
            "[global]\n"
            "   socket options = %s\n"
            "   name resolve order = host\n"
            "   disable netbios = yes\n"
            "   client min protocol = SMB2\n"
            "   load printers = no\n"
            "   lock directory = %s/lock\n"
            "   state directory = %s/state\n"
            "   cache directory = %s/cache\n"
            "   private dir = %s/private\n"
            "   pid directory = %s/pid\n"
            "   ncalrpc dir = %s/ncalrpc\n",
            socket_options, workdir, workdir, workdir, workdir, workdir, workdir);
    /* fclose flushes the buffered text: a full disk shows here, and the
     * journal must say so (errno is the failed write's). */
    if (fclose(f) != 0)
        return err_set(e, -errno, "%s: write failed: %s", path, strerror(errno));
    return 0;
}

/* How long probe_finish waits for a child it killed to be reaped. */
#define PROBE_REAP_WAIT_S 1.0

/* The record of the files made for p's place (probe_made.h): base/made
 * and base/made/<key>, ours alone, made when absent, its path into out; a
 * new one says which place it is for. 0, or <0 with e set. */
static int make_made_dir(const struct probe_params *p, const char *base, char *out, size_t len,
                         struct err *e)
{
    char key[PROBE_MADE_KEY_LEN + 1];
    int made, fd, f;

    probe_made_key(p->place ? p->place : p->url, p->directory, key);
    if ((size_t)snprintf(out, len, "%s/%s", base, PROBE_MADE_SUBDIR) >= len)
        return err_set(e, -ENAMETOOLONG, "work directory name too long");
    made = files_private_dir(out, FILES_DIR_MAKE | FILES_DIR_OWN, e);
    if (made < 0)
        return made;
    if ((size_t)snprintf(out, len, "%s/%s/%s", base, PROBE_MADE_SUBDIR, key) >= len) {
        close(made);
        return err_set(e, -ENAMETOOLONG, "work directory name too long");
    }
    fd = files_private_dir(out, FILES_DIR_MAKE | FILES_DIR_OWN, e);
    /* a new place's directory as durable as the records made in it (an
     * fsync with nothing to write costs little) */
    if (fd >= 0 && fsync(made) < 0) {
        int r = -errno;

        close(fd);
        fd = err_set(e, r, "%s/%s: %s", base, PROBE_MADE_SUBDIR, strerror(-r));
    }
    close(made);
    if (fd < 0)
        return fd;
    /* For the admin who looks (README.Debian): no secret, a URL holds
     * none (url.h refuses '@'). */
    f = openat(fd, PROBE_MADE_PLACE_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
               0600);
    if (f >= 0) {
        dprintf(f, "%s%s%s\n", p->place ? p->place : p->url, p->directory ? " directory " : "",
                p->directory ? p->directory : "");
        fsync(f);
        close(f);
    }
    close(fd);
    return 0;
}

static int start(const struct probe_params *p, bool cleanup_only, struct probe_job *job,
                 struct err *e)
{
    char base[4096];
    const char *so = p->socket_options ? p->socket_options : PROBE_DEFAULT_SOCKET_OPTIONS;
    struct probe_child_args c;
    int fds[2], r, basefd;
    pid_t parent = getpid();

    memset(job, 0, sizeof(*job));
    job->fd = -1;
    job->pid = -1;
    memset(&c, 0, sizeof(c));
    c.p = p;
    c.cleanup_only = cleanup_only;
    if (p->url == NULL || p->url[0] == '\0')
        return err_set(e, -EINVAL, "no URL to probe");
    r = url_parse(p->url, &c.url, e);
    if (r < 0)
        return r;
    if (p->directory != NULL) {
        r = url_check_directory(p->directory, e);
        if (r < 0)
            return r;
    }
    if (url_format_smbc(&c.url, p->directory, c.dir_url, sizeof(c.dir_url)) < 0)
        return err_set(e, -ENAMETOOLONG, "URL too long");
    r = probe_check_socket_options(so, e);
    if (r < 0)
        return r;
    if (p->size < 1 || p->request_size < 1 || p->request_size > PROBE_MAX_REQUEST_SIZE)
        return err_set(e, -EINVAL, "size must be positive, request size from 1 to %lld",
                       PROBE_MAX_REQUEST_SIZE);
    if (!(p->deadline_s > 0))
        return err_set(e, -EINVAL, "the deadline must be positive");
    if (!(p->duration_s >= 0 && p->duration_s <= PROBE_MAX_DURATION_S))
        return err_set(e, -EINVAL, "the duration must be from 0 to %.0f s", PROBE_MAX_DURATION_S);

    /* Each child that SIGKILL could not end is still there (child.h):
     * while they fill the strays, another would only join them unseen. */
    if (child_reap_strays() >= CHILD_STRAYS_MAX)
        return err_set(e, -EAGAIN,
                       "%d processes killed earlier (probes or credentials checks) have not "
                       "ended: they wait in the kernel (a file system that does not answer?)",
                       CHILD_STRAYS_MAX);
    basefd = open_workdir_base(p, base, sizeof(base), e);
    if (basefd < 0)
        return basefd;
    remove_stale_workdirs(basefd);
    close(basefd);
    /* The record of the probe files made lives beside the private
     * directories, in the state directory only (never in /tmp). */
    if (p->workdir_base != NULL && p->workdir_base[0] != '\0') {
        r = make_made_dir(p, base, c.made_dir, sizeof(c.made_dir), e);
        if (r < 0)
            return r;
    }
    if ((size_t)snprintf(job->workdir, sizeof(job->workdir), "%s/%s%ld-XXXXXX", base,
                         PROBE_WORKDIR_PREFIX, (long)parent) >= sizeof(job->workdir))
        return err_set(e, -ENAMETOOLONG, "work directory name too long");
    /* mkdir with a random name, exclusive, mode 0700: safe in /tmp too. */
    if (mkdtemp(job->workdir) == NULL) {
        r = err_set(e, -errno, "cannot make a private directory in %s: %s", base, strerror(errno));
        job->workdir[0] = '\0';
        return r;
    }
    r = write_client_conf(job->workdir, so, e);
    if (r < 0)
        goto fail;
    job->shm = mmap(NULL, sizeof(struct probe_shared), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (job->shm == MAP_FAILED) {
        job->shm = NULL;
        r = err_set(e, -errno, "mmap: %s", strerror(errno));
        goto fail;
    }
    c.sh = job->shm;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        r = err_set(e, -errno, "pipe: %s", strerror(errno));
        goto fail;
    }
    job->deadline = child_now() + p->deadline_s;
    c.deadline = job->deadline;
    job->pid = fork();
    if (job->pid < 0) {
        r = err_set(e, -errno, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        goto fail;
    }
    if (job->pid == 0) {
        close(fds[0]);
        probe_child_main(&c, job->workdir, fds[1], parent);
    }
    close(fds[1]);
    job->fd = fds[0];
    return 0;
fail:
    if (job->shm != NULL)
        munmap(job->shm, sizeof(struct probe_shared));
    job->shm = NULL;
    rmtree_path(job->workdir, NULL);
    return r;
}

int probe_start(const struct probe_params *p, struct probe_job *job, struct err *e)
{
    return start(p, false, job, e);
}

static double span(int64_t t0, int64_t t1)
{
    return t0 > 0 && t1 > t0 ? (double)(t1 - t0) / 1e9 : 0.0;
}

/* What the child published of a direction, for probe_phase_rate: its
 * bytes in secs, and its start-up mark and waits in its slots. warm_t is
 * stored last (probe_child.h): once it is seen, the mark is complete. */
static struct probe_phase phase_of(long long bytes, double secs, const int64_t *t0,
                                   const int64_t *warm_bytes, const int64_t *warm_t,
                                   const int64_t *wait, const int64_t *warm_wait)
{
    int64_t warm = probe_shared_peek(warm_t);

    return (struct probe_phase){
        .bytes = bytes,
        .secs = secs,
        .warm_bytes = warm ? probe_shared_peek(warm_bytes) : 0,
        .warm_s = warm ? span(probe_shared_peek(t0), warm) : 0,
        .wait_s = (double)probe_shared_peek(wait) / 1e9,
        .warm_wait_s = warm ? (double)probe_shared_peek(warm_wait) / 1e9 : 0,
    };
}

double probe_kill_time(const struct probe_job *job)
{
    const struct probe_shared *sh = job->shm;

    if (sh != NULL && probe_shared_peek(&sh->measured) &&
        !__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE))
        return job->deadline + PROBE_LOOK_GRACE_S;
    return job->deadline;
}

int probe_finish(struct probe_job *job, struct probe_result *r, struct err *e)
{
    struct probe_shared *sh = job->shm;
    struct probe_phase wph, rph;
    bool done, late, reaped;
    int64_t end;
    int ws = 0;

    memset(r, 0, sizeof(*r));
    r->client_rcvbuf = r->client_sndbuf = -1;
    if (job->pid <= 0 || sh == NULL)
        return err_set(e, -EINVAL, "no probe running");
    late = child_now() >= job->deadline;
    end = probe_mono_ns();
    /* Done or not, the child has nothing left to do for us: SIGKILL is
     * harmless after `done` and the deadline's enforcement before it.
     * `done` is read after the kill: one that came between a read and
     * the kill would otherwise be lost. */
    kill(job->pid, SIGKILL);
    /* Not without a bound: a child in the kernel on a file system that
     * does not answer (its credentials file on a hung mount) would hold
     * the caller, the daemon's loop, for as long. It is then left to
     * child.h's strays, and is no result unless it said `done`. */
    reaped = child_reap_within(job->pid, PROBE_REAP_WAIT_S, &ws);
    /* `done` is stored last and never undone: final even before the
     * reap (a slow exit under memory pressure). */
    done = __atomic_load_n(&sh->done, __ATOMIC_ACQUIRE);
    /* The child wrote them with snprintf; terminated here all the same,
     * since they are read as strings whatever it wrote. */
    sh->cause[sizeof(sh->cause) - 1] = '\0';
    sh->recycle_path[sizeof(sh->recycle_path) - 1] = '\0';
    sh->recycle_why[sizeof(sh->recycle_why) - 1] = '\0';
    if (done) {
        r->outcome = (enum probe_outcome)sh->outcome;
        snprintf(r->cause, sizeof(r->cause), "%s", sh->cause);
        r->recycle = (enum probe_recycle)sh->recycle;
        snprintf(r->recycle_path, sizeof(r->recycle_path), "%s", sh->recycle_path);
        snprintf(r->recycle_why, sizeof(r->recycle_why), "%s", sh->recycle_why);
    } else if (!reaped) {
        r->outcome = PROBE_ERROR;
        snprintf(r->cause, sizeof(r->cause),
                 "the probe process did not end within %.0f s of SIGKILL: it waits in the "
                 "kernel (a file system that does not answer: its credentials file on a hung "
                 "mount?)",
                 PROBE_REAP_WAIT_S);
    } else if (probe_shared_peek(&sh->measured)) {
        /* Killed while it looked for a recycle copy after its delete, past
         * its grace (a server that stopped answering): the measurement
         * stands; the look is not reported (no copy known). */
        r->outcome = (enum probe_outcome)sh->outcome;
        snprintf(r->cause, sizeof(r->cause), "%s", sh->cause);
    } else if (late) {
        r->outcome = PROBE_TIMEOUT;
        snprintf(r->cause, sizeof(r->cause), "the deadline passed while %s",
                 probe_shared_peek(&sh->read_t0)    ? "reading"
                 : probe_shared_peek(&sh->write_t0) ? "writing"
                 : probe_shared_peek(&sh->stage) >= PROBE_STAGE_ROOM
                     ? "asking the share for its free space"
                 : probe_shared_peek(&sh->stage) >= PROBE_STAGE_CREATING ? "creating the probe file"
                 : probe_shared_peek(&sh->stage) >= PROBE_STAGE_REACHED  ? "looking in the share"
                                                                         : "connecting");
    } else {
        r->outcome = PROBE_ERROR;
        if (WIFSIGNALED(ws) && WTERMSIG(ws) != SIGKILL)
            snprintf(r->cause, sizeof(r->cause), "the probe process died of signal %d",
                     WTERMSIG(ws));
        else
            snprintf(r->cause, sizeof(r->cause), "the probe process ended without a result");
    }
    r->write_bytes = probe_shared_peek(&sh->write_bytes);
    r->write_done = probe_shared_peek(&sh->write_t1) != 0;
    r->read_bytes = probe_shared_peek(&sh->read_bytes);
    r->write_s = span(probe_shared_peek(&sh->write_t0),
                      probe_shared_peek(&sh->write_t1) ? probe_shared_peek(&sh->write_t1) : end);
    r->read_s = span(probe_shared_peek(&sh->read_t0),
                     probe_shared_peek(&sh->read_t1) ? probe_shared_peek(&sh->read_t1) : end);
    if (r->outcome != PROBE_OK && r->outcome != PROBE_TIMEOUT) {
        /* A failed measurement has no rate; its byte counts stay as a
         * record of how far it got. */
        r->write_s = r->read_s = 0;
    }
    wph = phase_of(r->write_bytes, r->write_s, &sh->write_t0, &sh->write_warm_bytes,
                   &sh->write_warm_t, &sh->write_wait, &sh->write_warm_wait);
    rph = phase_of(r->read_bytes, r->read_s, &sh->read_t0, &sh->read_warm_bytes, &sh->read_warm_t,
                   &sh->read_wait, &sh->read_warm_wait);
    r->write_mbps =
        probe_phase_rate(&wph, &r->write_startup_bytes, &r->write_startup_s, &r->write_wait_s) /
        1e6;
    r->read_mbps =
        probe_phase_rate(&rph, &r->read_startup_bytes, &r->read_startup_s, &r->read_wait_s) / 1e6;
    r->write_pace_bps = probe_shared_peek(&sh->write_pace);
    r->stage = (enum probe_stage)probe_shared_peek(&sh->stage);
    r->killed = !done;
    r->client_rcvbuf = sh->client_rcvbuf ? sh->client_rcvbuf : -1;
    r->client_sndbuf = sh->client_sndbuf ? sh->client_sndbuf : -1;
    r->loopback = sh->loopback == 1;

    close(job->fd);
    munmap(sh, sizeof(*sh));
    rmtree_path(job->workdir, NULL);
    job->fd = -1;
    job->shm = NULL;
    job->pid = -1;
    return 0;
}

static int wait_job(struct probe_job *job)
{
    for (;;) {
        struct pollfd pfd = {job->fd, POLLIN, 0};
        double left = probe_kill_time(job) - child_now();
        int n;

        if (left <= 0)
            return 0;
        n = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

int probe_cleanup(const struct probe_params *p, struct err *e)
{
    struct probe_params q = *p;
    struct probe_result r;
    struct probe_job job;
    int ret;

    q.deadline_s = CLEANUP_DEADLINE_S;
    ret = start(&q, true, &job, e);
    if (ret < 0)
        return ret;
    wait_job(&job);
    ret = probe_finish(&job, &r, e);
    /* A clean-up that never reached the share (a peer gone from the
     * network) removed nothing and looked for nothing: the caller must be
     * able to say so, and to tell it from one that failed on the way. */
    if (ret == 0 && r.outcome != PROBE_OK) {
        if (r.stage == PROBE_STAGE_CONTACT)
            ret = err_set(e, -ENOTCONN, "the share could not be reached (%s)", r.cause);
        else
            ret = err_set(e, -EIO, "the clean-up failed (%s)", r.cause);
    }
    return ret;
}

int probe_run(const struct probe_params *p, struct probe_result *r, struct err *tidy, struct err *e)
{
    struct probe_job job;
    int ret;

    tidy->msg[0] = '\0';
    ret = probe_start(p, &job, e);
    if (ret < 0)
        return ret;
    wait_job(&job);
    ret = probe_finish(&job, r, e);
    /* A measurement does not look for killed probes' files (probe_child.c
     * says why): a clean-up child does, once the share was reached, which
     * also takes the file of a child killed at its deadline. Best effort,
     * bounded; the caller says when it failed. */
    if (ret == 0 && r->stage >= PROBE_STAGE_REACHED && probe_cleanup(p, tidy) < 0 &&
        tidy->msg[0] == '\0')
        snprintf(tidy->msg, sizeof(tidy->msg), "the clean-up failed");
    return ret;
}
