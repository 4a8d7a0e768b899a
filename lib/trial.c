/* trial: the shadow smbd, a private smbd per candidate on a private port. */
#include "trial.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "files.h"
#include "journal.h"
#include "kernel.h"
#include "parse.h"
#include "trial_int.h"

/* How often the blocking start looks at the shadow, in seconds. */
#define POLL_INTERVAL_S 0.05
/* The last bytes of the shadow's log quoted in an error. */
#define LOG_TAIL_BYTES 600
/* How much of the log's end is searched for a line (log_has). */
#define LOG_SCAN_BYTES 65536
/* smbd's messaging socket is LOCKDIR/msg.sock/PID, a unix socket whose
 * path must fit sun_path (108 bytes with its NUL; pids have up to 7
 * digits): a longer one makes smbd exit with status 1 and no reason. */
#define SUN_PATH_MAX 108

/* Directories of per-instance state, each private to one shadow; with the
 * own share, the logons' and permissions' too (trial_render.c says why). */
static const char *const private_dirs[] = {"pid", "lock", "cache", "ncalrpc"};
static const char *const own_share_dirs[] = {"state", "private"};

int trial_path_join(char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);

    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int trial_owner_format(const struct trial_owner *o, char *buf, size_t len)
{
    int n = snprintf(buf, len, "owner %d %llu\nsmbd %d %llu\n", (int)o->owner_pid, o->owner_start,
                     (int)o->smbd_pid, o->smbd_start);

    return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

int trial_owner_parse(const char *text, struct trial_owner *o)
{
    char opid[16], ostart[24], spid[16], sstart[24];
    long long op, os, sp, ss;

    if (sscanf(text, "owner %15s %23s smbd %15s %23s", opid, ostart, spid, sstart) != 4)
        return -EINVAL;
    /* smbd's pid is 0 until it is forked; an owner always has one. */
    if (parse_long(opid, 1, INT_MAX, &op) < 0 || parse_long(ostart, 0, LLONG_MAX, &os) < 0 ||
        parse_long(spid, 0, INT_MAX, &sp) < 0 || parse_long(sstart, 0, LLONG_MAX, &ss) < 0)
        return -EINVAL;
    o->owner_pid = (pid_t)op;
    o->owner_start = (unsigned long long)os;
    o->smbd_pid = (pid_t)sp;
    o->smbd_start = (unsigned long long)ss;
    return 0;
}

static int owner_write(const char *run_dir, const struct trial_owner *o, struct err *e)
{
    char path[PATH_MAX], buf[128];
    int r;

    r = trial_owner_format(o, buf, sizeof(buf));
    if (r == 0)
        r = trial_path_join(path, sizeof(path), run_dir, TRIAL_PIDFILE);
    if (r == 0)
        r = files_write_atomic(path, buf, strlen(buf), NULL);
    if (r < 0)
        return err_set(e, r, "cannot write %s/" TRIAL_PIDFILE ": %s", run_dir, strerror(-r));
    return 0;
}

/* A port of 127.0.0.1 that was free a moment ago. Someone may take it
 * before smbd binds it: the caller then tries another. */
static int pick_port(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r = 0;

    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0)
        r = -errno;
    else
        *port = ntohs(a.sin_port);
    close(fd);
    return r;
}

/* The last len - 1 bytes of the shadow's log, NUL-terminated after them
 * ("" when it cannot be read); returns how many, and *cut whether they
 * begin inside a line (the log holds more of it before them). smbd
 * writes the log without a size limit (max log size = 0), and a refused
 * connection adds a line each, so only the tail is read, whatever its
 * size. The run directory is ours (mode 0700): no link in it is someone
 * else's, O_NOFOLLOW all the same. */
static size_t log_read_tail(const char *log, char *buf, size_t len, bool *cut)
{
    char before = '\n'; /* the byte before the tail: none, a line's end */
    struct stat sb;
    ssize_t n = 0;
    off_t from = 0;
    int fd;

    fd = open(log, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        from = sb.st_size > (off_t)(len - 1) ? sb.st_size - (off_t)(len - 1) : 0;
        n = pread(fd, buf, len - 1, from);
        if (from > 0 && pread(fd, &before, 1, from - 1) != 1)
            before = '\n';
    }
    if (fd >= 0)
        close(fd);
    n = n > 0 ? n : 0;
    buf[n] = '\0';
    *cut = n > 0 && before != '\n';
    return (size_t)n;
}

/* The last lines of the shadow's log, for an error message. */
static void log_tail(const char *log, char *buf, size_t len)
{
    char text[LOG_TAIL_BYTES + 1];
    const char *from = text, *nl;
    bool cut;

    log_read_tail(log, text, sizeof(text), &cut);
    /* Start at a line boundary when the cut fell inside a line. */
    if (cut && (nl = strchr(text, '\n')) != NULL && nl[1] != '\0')
        from = nl + 1;
    snprintf(buf, len, "%s", from);
}

/* Whether a line of the log's last LOG_SCAN_BYTES holds needle, and
 * and_needle after it (unless NULL). A line is searched as bytes: a NUL
 * in the log hides nothing after it. */
static bool log_has(const char *log, const char *needle, const char *and_needle)
{
    char *text = malloc(LOG_SCAN_BYTES + 1);
    const char *line, *end, *at;
    bool has = false, cut;
    size_t n;

    if (text == NULL)
        return false;
    n = log_read_tail(log, text, LOG_SCAN_BYTES + 1, &cut);
    for (line = text; line < text + n && !has; line = end + 1) {
        end = memchr(line, '\n', (size_t)(text + n - line));
        if (end == NULL)
            end = text + n;
        at = memmem(line, (size_t)(end - line), needle, strlen(needle));
        has = at != NULL && (and_needle == NULL || memmem(at, (size_t)(end - at), and_needle,
                                                          strlen(and_needle)) != NULL);
    }
    free(text);
    return has;
}

bool trial_shadow_denied(const struct trial_shadow *t)
{
    /* lib/util/access.c, allow_access(): "Denied connection from NAME
     * (ADDR)" at level 0; the shadow listens on 127.0.0.1 alone */
    return t->log[0] != '\0' && log_has(t->log, "Denied connection from ", "(127.0.0.1)");
}

/* In the child, between fork and exec. */
static void child_exec(const struct trial_shadow *t, pid_t parent)
{
    /* Debug level 1 whatever production says: enough for the log tail of
     * a failed start to say why, little enough not to slow the measurement. */
    char *argv[] = {"smbd",           "--foreground", "--no-process-group", "--debug-stdout",
                    "--debuglevel=1", "-s",           (char *)t->conf,      NULL};
    int log = open(t->log, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0600);
    /* A session of its own: smbd's parent signals its whole process group
     * on SIGTERM, and stop signals the group to reach smbd's children. The
     * shadow must not outlive smbtuned (PDEATHSIG). */
    struct child_spec spec = {.parent = parent,
                              .new_session = true,
                              .fd_in = -1,
                              .fd_out = log,
                              .fd_err = log,
                              .fd_extra = -1};

    if (log < 0 || child_setup(&spec) < 0)
        _exit(127);
    execv(TRIAL_SMBD, argv);
    execvp("smbd", argv);
    _exit(127);
}

/* The subdirectories names[n] of the run directory. private dir must be
 * 0700 or smbd refuses it; the others are smbd's to open up as it needs. */
static int make_subdirs(const char *run_dir, const char *const *names, size_t n, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        char sub[PATH_MAX];
        mode_t mode = strcmp(names[i], "private") == 0 ? 0700 : 0755;

        /* The template left room for these names. */
        if (trial_path_join(sub, sizeof(sub), run_dir, names[i]) < 0 || mkdir(sub, mode) < 0)
            return err_set(e, -errno, "cannot create %s/%s: %s", run_dir, names[i],
                           strerror(errno));
    }
    return 0;
}

int trial_open_base(const char *base_dir, bool make, struct err *e)
{
    return files_private_dir(base_dir, FILES_DIR_OWN | (make ? FILES_DIR_MAKE : 0), e);
}

static int make_run_dir(const char *base_dir, bool own_share, struct trial_shadow *t, struct err *e)
{
    int r;

    if (trial_path_check("shadow base directory", base_dir, e) < 0)
        return -EINVAL;
    r = trial_open_base(base_dir, true, e);
    if (r < 0)
        return r;
    close(r);
    /* The owner's pid in the name: the sweep can tell a live run's
     * directory even before trial.pid is written. */
    if (snprintf(t->run_dir, sizeof(t->run_dir), "%s/" TRIAL_DIR_PREFIX "%d-XXXXXX", base_dir,
                 (int)getpid()) >= (int)sizeof(t->run_dir) - 32)
        return err_set(e, -ENAMETOOLONG, "shadow base directory name too long: %s", base_dir);
    if (strlen(t->run_dir) + strlen(TRIAL_MSG_SOCK_SUFFIX) >= SUN_PATH_MAX) {
        size_t room = SUN_PATH_MAX - 1 - strlen(TRIAL_MSG_SOCK_SUFFIX) -
                      (strlen(t->run_dir) - strlen(base_dir));

        t->run_dir[0] = '\0';
        return err_set(e, -ENAMETOOLONG,
                       "shadow base directory %s is too long for smbd's messaging socket: "
                       "%zu bytes at most",
                       base_dir, room);
    }
    if (mkdtemp(t->run_dir) == NULL) {
        r = -errno;
        t->run_dir[0] = '\0';
        return err_set(e, r, "cannot create a run directory under %s: %s", base_dir, strerror(-r));
    }
    r = make_subdirs(t->run_dir, private_dirs, sizeof(private_dirs) / sizeof(private_dirs[0]), e);
    if (r == 0 && own_share)
        r = make_subdirs(t->run_dir, own_share_dirs,
                         sizeof(own_share_dirs) / sizeof(own_share_dirs[0]), e);
    if (r < 0)
        return r;
    if (trial_path_join(t->conf, sizeof(t->conf), t->run_dir, "smb.conf") < 0 ||
        trial_path_join(t->log, sizeof(t->log), t->run_dir, "smbd.log") < 0)
        return err_set(e, -ENAMETOOLONG, "run directory name too long: %s", t->run_dir);
    return 0;
}

/* A fresh name for the own share (trial.h): 64 random bits. */
static int share_name(char *buf, size_t len, struct err *e)
{
    unsigned char b[8];

    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return err_set(e, -errno, "getrandom: %s", strerror(errno));
    snprintf(buf, len, TRIAL_OWN_SHARE "-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7]);
    return 0;
}

/* The own share's directory is served as root (trial_render.c): it must be
 * a directory of ours, not a link to somewhere else. */
static int own_share_check(const char *dir, struct err *e)
{
    struct stat st;

    if (lstat(dir, &st) < 0)
        return err_set(e, -errno, "own share %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return err_set(e, -EPERM, "own share %s is not a directory of uid %d", dir, (int)geteuid());
    return 0;
}

int trial_shadow_spawn(const char *prod_conf, const char *base_dir, const char *sockopts_value,
                       const char *own_share, struct trial_shadow *t, struct err *e)
{
    struct trial_owner own = {0};
    struct trial_share sh = {0};
    struct kernel_proc me;
    char *text = NULL;
    pid_t parent = getpid(), pid;
    int r;

    memset(t, 0, sizeof(*t));
    r = kernel_proc_read(parent, &me);
    if (r < 0)
        return err_set(e, r, "cannot read /proc/%d/stat", (int)parent);
    r = pick_port(&t->port);
    if (r < 0)
        return err_set(e, r, "cannot pick a free port on 127.0.0.1: %s", strerror(-r));
    /* Check the inputs before anything is created. */
    if (own_share != NULL) {
        r = share_name(t->share, sizeof(t->share), e);
        if (r < 0)
            return r;
        sh.dir = own_share;
        sh.name = t->share;
    }
    r = trial_shadow_render(prod_conf, "/", t->port, sockopts_value, own_share ? &sh : NULL, &text,
                            e);
    if (r < 0)
        return r;
    if (own_share != NULL && own_share_check(own_share, e) < 0) {
        free(text);
        return -EPERM;
    }
    free(text);
    text = NULL;
    r = make_run_dir(base_dir, own_share != NULL, t, e);
    if (r < 0)
        goto fail;
    own.owner_pid = parent;
    own.owner_start = me.start_time;
    r = owner_write(t->run_dir, &own, e);
    if (r < 0)
        goto fail;
    r = trial_shadow_render(prod_conf, t->run_dir, t->port, sockopts_value, own_share ? &sh : NULL,
                            &text, e);
    if (r < 0)
        goto fail;
    r = files_write_atomic(t->conf, text, strlen(text), NULL);
    free(text);
    if (r < 0) {
        err_set(e, r, "cannot write %s: %s", t->conf, strerror(-r));
        goto fail;
    }
    pid = fork();
    if (pid < 0) {
        r = err_set(e, -errno, "fork: %s", strerror(errno));
        goto fail;
    }
    if (pid == 0)
        child_exec(t, parent);
    t->pid = pid;
    journal_log(LOG_DEBUG, "shadow smbd (pid %d) on 127.0.0.1:%d: socket options = %s", (int)pid,
                t->port, sockopts_value);
    /* Recorded after the fork: if we are killed in between, PDEATHSIG
     * ends smbd and the sweep finds a directory with a dead owner. The
     * child's start time is final once fork returned. */
    if (kernel_proc_read(pid, &me) == 0) {
        own.smbd_pid = pid;
        own.smbd_start = me.start_time;
        r = owner_write(t->run_dir, &own, e);
        if (r < 0)
            goto fail;
    }
    return 0;
fail:
    trial_shadow_stop(t, NULL);
    return r;
}

/* A TCP connection to 127.0.0.1:port completes within a few ms. */
static bool connects(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), err = 0;
    socklen_t elen = sizeof(err);
    bool ok = false;

    if (fd < 0)
        return false;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
        ok = true;
    } else if (errno == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};

        ok = poll(&p, 1, 20) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 &&
             err == 0;
    }
    close(fd);
    return ok;
}

int trial_shadow_poll(struct trial_shadow *t, struct err *e)
{
    char tail[LOG_TAIL_BYTES + 1];
    unsigned long inode;
    siginfo_t si = {0};

    if (t->pid <= 0 || t->reaped)
        return err_set(e, -ESRCH, "shadow smbd is not running");
    /* Left a zombie (WNOWAIT) until the stop reaps it: the pid, which is
     * also the group's number, stays ours for the stop's signals. */
    if (waitid(P_PID, (id_t)t->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD) {
        /* Someone else reaped it (a child source in the caller's loop). */
        t->reaped = true;
        log_tail(t->log, tail, sizeof(tail));
        return err_set(e, -ECHILD, "shadow smbd (%s) is gone:\n%s", t->conf, tail);
    }
    if (si.si_pid == t->pid) {
        log_tail(t->log, tail, sizeof(tail));
        /* smbd exits when it cannot bind its one port ("No sockets
         * available to bind to"), after logging why. */
        if (log_has(t->log, "Address already in use", NULL))
            return err_set(e, -EADDRINUSE, "shadow smbd: port %d was taken:\n%s", t->port, tail);
        if (si.si_code == CLD_EXITED)
            return err_set(e, -ECHILD, "shadow smbd (%s) exited with status %d:\n%s", t->conf,
                           si.si_status, tail);
        return err_set(e, -ECHILD, "shadow smbd (%s) died of signal %d:\n%s", t->conf, si.si_status,
                       tail);
    }
    /* Connecting is not enough: another program may hold the port picked,
     * and then smbd is about to fail. The listener must be smbd's. */
    if (kernel_loopback_listener(t->port, &inode) < 0 || !kernel_pid_has_socket(t->pid, inode))
        return 0;
    return connects(t->port) ? 1 : 0;
}

int trial_shadow_start(const char *prod_conf, const char *base_dir, const char *sockopts_value,
                       const char *own_share, double ready_timeout_s, struct trial_shadow *t,
                       struct err *e)
{
    int r = -EADDRINUSE;

    for (int attempt = 0; attempt < TRIAL_PORT_ATTEMPTS && r == -EADDRINUSE; attempt++) {
        double deadline;

        r = trial_shadow_spawn(prod_conf, base_dir, sockopts_value, own_share, t, e);
        if (r < 0)
            return r;
        deadline = child_now() + ready_timeout_s;
        while ((r = trial_shadow_poll(t, e)) == 0 && child_now() < deadline)
            usleep((useconds_t)(POLL_INTERVAL_S * 1e6));
        if (r == 1)
            return 0;
        if (r == 0) {
            char tail[LOG_TAIL_BYTES + 1];

            log_tail(t->log, tail, sizeof(tail));
            r = err_set(e, -ETIMEDOUT, "shadow smbd (%s, port %d) not listening after %.0f s:\n%s",
                        t->conf, t->port, ready_timeout_s, tail);
        }
        trial_shadow_stop(t, NULL);
    }
    return r;
}
