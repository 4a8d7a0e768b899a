/* probe_child: the measuring child (see probe_child.h). It runs in a
 * process of its own that nothing can dump or trace: it reads the
 * credentials file, logs on with libsmbclient, creates the probe file,
 * has probe_transfer.c write it and read it back, deletes it and
 * publishes what it saw in probe_shared; or, as a clean-up, removes the
 * files of killed probes instead (probe_leftovers.c). */
#include "probe_child_int.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "connect_guard.h"
#include "creds.h"
#include "netaddr.h"
#include "probe_made.h"
#include "smbc_api.h"

/* libsmbclient, loaded in this child only (smbc_api.h says why). */
static struct smbc_api api;
/* The url's host as the probe looks it up, before it connects (the guard's
 * addresses) and after a refusal (refused()). */
static const struct addrinfo lookup_hints = {.ai_socktype = SOCK_STREAM};

/* A random name collides only when someone planted it on purpose after
 * reading ours, or by a 2^-64 chance: a few new names are enough. */
#define NAME_ATTEMPTS 8

int64_t probe_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void auth_fn(SMBCCTX *ctx, const char *srv, const char *shr, char *wg, int wglen, char *un,
                    int unlen, char *pw, int pwlen)
{
    const struct creds *cr = api.getOptionUserData(ctx);

    (void)srv;
    (void)shr;
    /* Guest: an empty user and password give an anonymous session, which
     * the server maps to its guest account on a guest share. */
    snprintf(un, (size_t)unlen, "%s", cr ? cr->username : "");
    snprintf(pw, (size_t)pwlen, "%s", cr ? cr->password : "");
    if (cr && cr->domain[0])
        snprintf(wg, (size_t)wglen, "%s", cr->domain);
}

/* The TCP socket libsmbclient connected (it does not expose it): the
 * stream socket with a peer among our descriptors; its buffers, and
 * whether it stays on this machine: a url that names this machine by a
 * name or address other than loopback still measures the loopback device
 * (netaddr.h), which the daemon must know (facts_trials_on_loopback).
 * Asked here, in the child, where the name was resolved: the daemon's
 * loop resolves nothing. */
static void read_client_buffers(struct child *c)
{
    int fd;

    c->sh->client_rcvbuf = c->sh->client_sndbuf = -1;
    c->sh->loopback = 0;
    c->sock = -1;
    for (fd = 0; fd < 1024; fd++) {
        int dom, type, rcv, snd;
        socklen_t l = sizeof(int);
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);

        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 ||
            (dom != AF_INET && dom != AF_INET6))
            continue;
        l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM ||
            getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
            continue;
        l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &l) < 0)
            continue;
        l = sizeof(int);
        if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &l) < 0)
            continue;
        c->sh->client_rcvbuf = rcv;
        c->sh->client_sndbuf = snd;
        c->sh->loopback = netaddr_fd_same_host(fd) == 1;
        c->sock = fd;
    }
}

/* PREFIX<host>-<pid>-<16 hex digits>: unpredictable, so that nobody can
 * plant the names of future probes (an exclusive create would fail on
 * each), and still carrying the pid, by which remove_leftovers() tells
 * a recorded file of a live probe from a killed one's. */
static int probe_file_name(const struct child *c, char *out, size_t len)
{
    uint64_t tag;

    if (getrandom(&tag, sizeof(tag), 0) != (ssize_t)sizeof(tag))
        return -errno;
    if ((size_t)snprintf(out, len, "%s%s-%ld-%016llx", PROBE_FILE_PREFIX, c->host, (long)getpid(),
                         (unsigned long long)tag) >= len)
        return -ENAMETOOLONG;
    return 0;
}

/* Create the probe file under a fresh name, exclusively; a name that exists
 * is someone else's and gets another try. */
static enum probe_outcome create_probe_file(struct child *c, char *file_url, size_t len,
                                            SMBCFILE **f)
{
    smbc_open_fn open_fn = api.getFunctionOpen(c->ctx);
    char name[256];
    int i, er = EEXIST;

    for (i = 0; i < NAME_ATTEMPTS; i++) {
        int r = probe_file_name(c, name, sizeof(name));

        if (r < 0)
            return fail(c, PROBE_ERROR, "naming the probe file: %s", strerror(-r));
        if ((size_t)snprintf(file_url, len, "%s/%s", c->dir_url, name) >= len)
            return fail(c, PROBE_ERROR, "URL too long");
        /* The name is recorded before the file can exist: a probe killed
         * from here on leaves a file a later clean-up may remove. */
        if (c->made >= 0 && (r = probe_made_add(c->made, name)) < 0)
            return fail(c, PROBE_ERROR, "recording the probe file's name in %s: %s", c->made_dir,
                        strerror(-r));
        publish(&c->sh->stage, PROBE_STAGE_CREATING);
        *f = open_fn(c->ctx, file_url, O_WRONLY | O_CREAT | O_EXCL, 0600);
        if (*f != NULL)
            return PROBE_OK;
        er = errno;
        if (er != EEXIST)
            break;       /* it may have been made all the same: the record stays */
        forget(c, name); /* someone else's: not ours to remove */
    }
    file_url[0] = '\0';
    return fail(c, probe_classify_errno(er, false), "creating the probe file: %s%s", strerror(er),
                er == EEXIST ? " (every fresh name was taken)" : "");
}

/* c->dir_url as the admin wrote it: for an IPv6 literal, dir_url holds
 * the name only libsmbclient knows (url_format_smbc()). */
static const char *shown_dir(const struct child *c, char *buf, size_t len)
{
    return url_format(&c->url, c->own.directory, buf, len) == 0 ? buf : c->dir_url;
}

static unsigned long long times_or_max(unsigned long long a, unsigned long long b)
{
    unsigned long long n;

    return __builtin_mul_overflow(a, b, &n) ? ULLONG_MAX : n;
}

/* Where the room is short, as the admin finds it: the own share's
 * directory (its share name, the shadow's secret, stays out of the
 * journal), else the url. */
static const char *shown_place(const struct child *c, char *buf, size_t len)
{
    const struct probe_params *p = &c->own;

    if (p->place != NULL && strcmp(p->place, PROBE_PLACE_OWN_SHARE) == 0 &&
        p->workdir_base != NULL) {
        snprintf(buf, len, "smbtuned's own share (%s/share)", p->workdir_base);
        return buf;
    }
    return shown_dir(c, buf, len);
}

/* The share's room for the probe file (probe_room), asked of its handle
 * right after it was made (smbc_statvfs would open the directory, and
 * libsmbclient's opendir lists it: see remove_leftovers): a sample that
 * cannot write `size` bytes and leave the reserve free does not start
 * (users of the share would meet a full disk while it runs, and with the
 * own share, /var would fill); one with a duration stops at the room
 * (c->own.room). Over SMB2 libsmbclient asks about the share's root, not
 * the file: a directory in the url or `directory` may be another file
 * system mounted there, so a probe into one is not asked. A share that
 * says nothing of its space (the call fails, or the answer is one of
 * Samba's stand-ins: probe_room) is probed as before: a disk that fills
 * ends the write (ENOSPC). */
static enum probe_outcome check_room(struct child *c, SMBCFILE *f)
{
    smbc_fstatvfs_fn fstatvfs_fn = api.getFunctionFstatVFS(c->ctx);
    struct probe_params *q = &c->own;
    struct statvfs st;
    unsigned long long unit, avail;
    long long room, reserve;
    char shown[4096];

    if (!c->at_root)
        return PROBE_OK;
    publish(&c->sh->stage, PROBE_STAGE_ROOM);
    if (fstatvfs_fn == NULL || fstatvfs_fn(c->ctx, f, &st) < 0)
        return PROBE_OK;
    /* libsmbclient gives SMB's allocation unit as bytes a sector (f_bsize)
     * times sectors a unit (f_frsize); an answer by SMB1's UNIX extensions
     * leaves f_frsize 0 and f_bsize the block. */
    unit = (unsigned long long)st.f_bsize * (st.f_frsize ? st.f_frsize : 1);
    avail = times_or_max(unit, st.f_bavail);
    room = probe_room(avail, times_or_max(unit, st.f_blocks), &reserve);
    if (room < 0)
        return PROBE_OK;
    if (room < q->size)
        return fail(c, PROBE_DISK_FULL,
                    "not enough free space on %s: %.1f MiB free, and a sample, which writes "
                    "%.1f MiB, must leave %.1f MiB free (%d%% of the share, at most %lld GiB): "
                    "no sample",
                    shown_place(c, shown, sizeof(shown)), (double)avail / 1048576.0,
                    (double)q->size / 1048576.0, (double)reserve / 1048576.0,
                    PROBE_ROOM_RESERVE_PCT, PROBE_ROOM_RESERVE_MAX >> 30);
    q->room = room;
    return PROBE_OK;
}

/* Say why the first contact failed. libsmbclient reports a refused logon
 * and a share that refuses the user alike (EACCES), so on that error the
 * IPC$ share, which every logged-on user may connect to, tells them
 * apart. */
static enum probe_outcome connect_failure(struct child *c, int er)
{
    const struct creds *cr = c->have_creds ? &c->creds : NULL;
    const char *who = cr ? cr->username : "guest";
    struct url ipc = c->url;
    char url[4096];
    struct stat st;
    enum probe_outcome o = probe_classify_errno(er, true);

    if (o == PROBE_ACCESS_DENIED || o == PROBE_AUTH_FAILED) {
        snprintf(ipc.share, sizeof(ipc.share), "IPC$");
        ipc.dir[0] = '\0';
        if (url_format_smbc(&ipc, NULL, url, sizeof(url)) == 0 &&
            api.getFunctionStat(c->ctx)(c->ctx, url, &st) < 0 &&
            (errno == EACCES || errno == EPERM))
            return fail(c, PROBE_AUTH_FAILED, "the server refused the logon as %s (%s)", who,
                        cr ? "wrong user or password?" : "no guest access");
        return fail(c, PROBE_ACCESS_DENIED, "share '%s' refuses %s: %s", c->url.share, who,
                    strerror(er));
    }
    switch (o) {
    case PROBE_CONNECT_REFUSED:
        return fail(c, o, "nothing listens on %s port %u", c->url.host,
                    c->url.port ? c->url.port : 445);
    case PROBE_SHARE_NOT_FOUND:
        return fail(c, o, "the server has no share '%s'", c->url.share);
    default:
        return fail(c, o, "connecting: %s", strerror(er));
    }
}

static enum probe_outcome measure(struct child *c)
{
    smbc_stat_fn stat_fn;
    smbc_unlink_fn unlink_fn;
    const struct probe_params *p = &c->own;
    struct addrinfo *ai = NULL;
    struct url share_only = c->url;
    char share_url[4096], file_url[4352], shown[4096];
    struct stat st;
    enum probe_outcome o;
    SMBCFILE *f = NULL;
    const char *name;
    int r;

    /* Set-up: the parent made the record's directory ours alone (probe.c). */
    if (c->made_dir[0] != '\0' && (c->made = probe_made_open(c->made_dir)) < 0)
        return fail(c, PROBE_ERROR, "%s: %s", c->made_dir, strerror(-c->made));
    /* Resolve the name ourselves first: libsmbclient reports an unknown
     * host with the same errno as an unknown share (and its set-up below
     * need not run for a host that is not there). Its own resolution is
     * limited to the same resolver (`name resolve order = host`). The
     * look-up is the first step of the contact with the share: a host
     * that cannot be found is out of reach. */
    publish(&c->sh->stage, PROBE_STAGE_CONTACT);
    r = getaddrinfo(c->url.host, NULL, &lookup_hints, &ai);
    if (r != 0)
        return fail(c, PROBE_NAME_NOT_FOUND, "cannot resolve host '%s': %s", c->url.host,
                    r == EAI_SYSTEM ? strerror(errno) : gai_strerror(r));
    /* From here on, this process connects to those addresses only: a DFS
     * referral must not take the user and password to another server
     * (connect_guard.h). */
    r = connect_guard_on(ai, c->url.port);
    freeaddrinfo(ai);
    if (r < 0)
        return fail(c, PROBE_ERROR,
                    "cannot restrict the probe's connections to %s: %s (is connect() exported "
                    "from this executable?)",
                    c->url.host, strerror(-r));
    /* our own set-up again, until the connection */
    publish(&c->sh->stage, PROBE_STAGE_SETUP);

    /* The password enters this process only here, right before the logon,
     * after probe_child_main() made it undumpable. The file was checked by the
     * parent; it is checked again, as it may have changed since. */
    if (p->credentials != NULL) {
        struct err e = {{0}};

        if (creds_load(p->credentials, 0, &c->creds, &e) < 0)
            return fail(c, PROBE_ERROR, "%s", e.msg);
        c->have_creds = true;
    }

    {
        struct err e = {{0}};

        if (smbc_api_load(&api, &e) < 0)
            return fail(c, PROBE_ERROR, "%s", e.msg);
    }
    c->ctx = api.new_context();
    if (c->ctx == NULL)
        return fail(c, PROBE_ERROR, "cannot create a libsmbclient context: %s", strerror(errno));
    api.setDebug(c->ctx, 0);
    api.setOptionDebugToStderr(c->ctx, 1);
    api.setOptionUseKerberos(c->ctx, 0);
    api.setOptionFallbackAfterKerberos(c->ctx, 0);
    api.setOptionUseCCache(c->ctx, 0);
    /* With credentials, a wrong password must fail, not turn into an
     * anonymous session that fails later for another reason. */
    api.setOptionNoAutoAnonymousLogin(c->ctx, c->have_creds);
    api.setOptionUserData(c->ctx, c->have_creds ? &c->creds : NULL);
    api.setFunctionAuthDataWithContext(c->ctx, auth_fn);
    /* The parent's deadline is the limit; libsmbclient's own per-request
     * timeout must not fire first and look like an error. */
    api.setTimeout(c->ctx, (int)(p->deadline_s * 1000) + 10000);
    if (api.init_context(c->ctx) == NULL)
        return fail(c, PROBE_ERROR, "cannot initialise libsmbclient: %s", strerror(errno));

    /* First contact: connection, session and tree connect, on the share's
     * root, so that a failure here is about the server, the user or the
     * share, and one later is about the directory or the file. */
    share_only.dir[0] = '\0';
    if (url_format_smbc(&share_only, NULL, share_url, sizeof(share_url)) < 0)
        return fail(c, PROBE_ERROR, "URL too long");
    stat_fn = api.getFunctionStat(c->ctx);
    publish(&c->sh->stage, PROBE_STAGE_CONTACT);
    if (stat_fn(c->ctx, share_url, &st) < 0)
        return connect_failure(c, errno);
    publish(&c->sh->stage, PROBE_STAGE_REACHED);
    read_client_buffers(c);
    c->at_root = !c->dir_url[0] || strcmp(c->dir_url, share_url) == 0;
    if (!c->at_root && stat_fn(c->ctx, c->dir_url, &st) < 0) {
        int er = errno;

        return fail(c, er == ENOENT ? PROBE_ERROR : probe_classify_errno(er, false),
                    "directory %s: %s", shown_dir(c, shown, sizeof(shown)), strerror(er));
    }

    /* A clean-up removes the files of killed probes instead
     * (probe_leftovers.c). */
    if (c->cleanup_only)
        return probe_leftovers_remove(c);

    o = create_probe_file(c, file_url, sizeof(file_url), &f);
    if (o != PROBE_OK)
        return o;
    /* no room: the empty file is deleted as a measured one is */
    o = check_room(c, f);
    if (o == PROBE_OK)
        o = probe_transfer(c, f, file_url);
    else
        api.getFunctionClose(c->ctx)(c->ctx, f);
    unlink_fn = api.getFunctionUnlink(c->ctx);
    name = strrchr(file_url, '/') + 1;
    if (unlink_fn(c->ctx, file_url) < 0) {
        int er = errno;

        /* still there: its record stays, for a clean-up */
        if (er != ENOENT)
            return o == PROBE_OK ? fail(c, probe_classify_errno(er, false),
                                        "deleting the probe file: %s", strerror(er))
                                 : o;
        forget(c, name);
        return o;
    }
    /* Deleted: in a share with the recycle module only moved, after a
     * failed measurement too. The record goes once the copy was looked
     * for: a probe killed in the look leaves it to a clean-up's. */
    o = probe_recycle_after_delete(c, o, name);
    forget(c, name);
    return o;
}

/* This host's name as it goes into probe file names: it tells an admin
 * which machine a file a probe left came from. (A clean-up goes by its
 * record, probe_made.h, not by the name.) */
static void own_host(char *out, size_t len)
{
    char h[256] = "";
    size_t i;

    if (gethostname(h, sizeof(h) - 1) < 0 || h[0] == '\0')
        snprintf(h, sizeof(h), "localhost");
    for (i = 0; h[i] && i + 1 < len; i++)
        out[i] = isalnum((unsigned char)h[i]) || h[i] == '.' || h[i] == '_' ? h[i] : '_';
    out[i] = '\0';
}

/* The failure of a probe whose connection the guard refused. The host
 * looked up again: libsmbclient looks it up itself, and a name whose
 * addresses changed since ours gives it one the guard refuses, no
 * referral; an address the name does not have now came from a server
 * (an msdfs link or proxy share). A literal address never moves. */
static enum probe_outcome refused(struct child *c)
{
    struct addrinfo *now = NULL;
    bool moved = getaddrinfo(c->url.host, NULL, &lookup_hints, &now) == 0 &&
                 connect_guard_refused_among(now);

    if (now != NULL)
        freeaddrinfo(now);
    if (moved)
        return fail(c, PROBE_ERROR,
                    "%s is now at %s, not at the address the probe resolved a moment before: "
                    "not connected (did its address change?)",
                    c->url.host, connect_guard_refused());
    return fail(c, PROBE_ERROR,
                "the server referred the probe to %s (a DFS link or an msdfs proxy share): not "
                "followed, the probe logs on to %s only; point url at the share that holds the "
                "directory",
                connect_guard_refused(), c->url.host);
}

void probe_child_main(const struct probe_child_args *a, const char *workdir, int notify_fd,
                      pid_t parent)
{
    struct rlimit no_core = {0, 0};
    struct child child = {.own = *a->p,
                          .url = a->url,
                          .sh = a->sh,
                          .cleanup_only = a->cleanup_only,
                          .deadline = a->deadline,
                          .api = &api};
    struct child *c = &child;

    /* This process will hold the password: no core dump of it, and no
     * ptrace or /proc/PID/mem by anyone but root (not dumpable). */
    if (prctl(PR_SET_DUMPABLE, 0) < 0 || setrlimit(RLIMIT_CORE, &no_core) < 0)
        _exit(1);
    /* Die with the parent; a clean signal mask and handlers (sd-event
     * blocks some). Nothing of ours may reach the caller's stdout
     * (--json): keep only the notify pipe as fd 3 and stderr for
     * libsmbclient's level-0 log. The private client configuration:
     * libsmbclient reads $HOME/.smb/smb.conf, and only when that fails
     * /etc/samba/smb.conf; an environment of our own also keeps out USER,
     * PASSWD, LIBSMB_PROG and the other variables it would honour. */
    struct child_spec spec = {.parent = parent,
                              .fd_in = -1,
                              .fd_out = -1,
                              .fd_err = CHILD_KEEP,
                              .fd_extra = notify_fd,
                              .home = workdir};

    if (child_setup(&spec) < 0)
        _exit(1);
    /* SIGPIPE would kill us on a reset connection; an error return is
     * what we want. */
    signal(SIGPIPE, SIG_IGN);

    snprintf(c->dir_url, sizeof(c->dir_url), "%s", a->dir_url);
    snprintf(c->made_dir, sizeof(c->made_dir), "%s", a->made_dir);
    own_host(c->host, sizeof(c->host));
    c->made = -1;
    c->sh->outcome = measure(c);
    /* A failure that came of a refused connection says so, not what
     * libsmbclient made of it ("No such file or directory"). */
    if (c->sh->outcome != PROBE_OK && connect_guard_refused() != NULL)
        c->sh->outcome = refused(c);
    /* The outcome is final: published before the logoff, which waits on
     * the server. If that hangs (a server gone silent after a failure),
     * the parent's deadline still reads this outcome, not a timeout. */
    __atomic_store_n(&c->sh->done, 1, __ATOMIC_RELEASE);
    if (c->ctx != NULL)
        api.free_context(c->ctx, 1);
    creds_clear(&c->creds);
    if (write(3, "x", 1) < 0)
        _exit(1);
    _exit(0);
}
