/* stuck: see stuck.h. The FUSE protocol is the kernel's own
 * (linux/fuse.h); only its first message, INIT, is answered. */
#include "stuck.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* A read of /dev/fuse takes a buffer this large at least (the kernel's
 * FUSE_MIN_READ_BUFFER is 8192; max_write below is 4096). */
#define STUCK_BUF 16384

/* Answer the kernel's INIT, which comes first, or no other request is
 * ever sent (they would wait for it, and that wait can be killed). */
static int answer_init(int fd)
{
    static char buf[STUCK_BUF];
    const struct fuse_in_header *in = (const void *)buf;
    const struct fuse_init_in *ii = (const void *)(in + 1);
    struct {
        struct fuse_out_header h;
        struct fuse_init_out o;
    } rep;
    ssize_t n = read(fd, buf, sizeof(buf));

    if (n < (ssize_t)(sizeof(*in) + sizeof(*ii)) || in->opcode != FUSE_INIT)
        return -EPROTO;
    memset(&rep, 0, sizeof(rep));
    rep.h.len = sizeof(rep);
    rep.h.unique = in->unique;
    rep.o.major = FUSE_KERNEL_VERSION;
    rep.o.minor = ii->minor < 31 ? ii->minor : 31;
    rep.o.max_readahead = ii->max_readahead;
    rep.o.max_write = 4096;
    /* lookups in one directory all reach us, none waits on another's */
    rep.o.flags = ii->flags & FUSE_PARALLEL_DIROPS;
    if (write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
        return -EPROTO;
    return 0;
}

/* The mount is the test's own: in a mount namespace of its process (and
 * its children), so that no other process on the machine (a walker of
 * /tmp) meets a file that never answers, and a test killed half-way
 * leaves no mount behind. */
static int private_mounts(void)
{
    static bool done;

    if (done)
        return 0;
    if (unshare(CLONE_NEWNS) < 0)
        return -errno;
    /* source and type are ignored here, but valgrind reads them */
    if (mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) < 0)
        return -errno;
    done = true;
    return 0;
}

int stuck_mount(struct stuck *s)
{
    const char *tmp = getenv("TMPDIR");
    char opts[128];
    int r;

    s->fd = -1;
    s->dir[0] = '\0';
    r = private_mounts();
    if (r < 0)
        return r;
    snprintf(s->dir, sizeof(s->dir), "%s/stuck.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(s->dir) == NULL) {
        s->dir[0] = '\0';
        return -errno;
    }
    s->fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (s->fd < 0) {
        r = -errno;
        stuck_release(s);
        return r;
    }
    snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", s->fd);
    if (mount("smbtuned-test", s->dir, "fuse", MS_NOSUID | MS_NODEV, opts) < 0) {
        r = -errno;
        close(s->fd);
        s->fd = -1;
        stuck_release(s);
        return r;
    }
    r = answer_init(s->fd);
    if (r >= 0 && fcntl(s->fd, F_SETFL, O_NONBLOCK) < 0)
        r = -errno;
    if (r < 0)
        stuck_release(s);
    return r;
}

int stuck_take(struct stuck *s)
{
    static char buf[STUCK_BUF];
    const struct fuse_in_header *in = (const void *)buf;
    ssize_t got;
    int n = 0;

    /* A signal to a waiting process adds an INTERRUPT request for its
     * own: not counted, not answered either. */
    while (s->fd >= 0 && (got = read(s->fd, buf, sizeof(buf))) >= (ssize_t)sizeof(*in))
        n += in->opcode != FUSE_INTERRUPT;
    return n;
}

void stuck_release(struct stuck *s)
{
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
    if (s->dir[0] != '\0') {
        /* after the close, nothing waits on it; lazily, since a process
         * may not have left it yet */
        umount2(s->dir, MNT_DETACH);
        rmdir(s->dir);
        s->dir[0] = '\0';
    }
}

void stuck_mount_or_skip(struct stuck *s)
{
    const char *req = getenv("SMBTUNED_REQUIRE_FUSE");

    if (stuck_mount(s) == 0)
        return;
    if (req != NULL && req[0] != '\0' && strcmp(req, "0") != 0)
        fail_msg("no FUSE mount could be made (root and /dev/fuse are needed), and "
                 "SMBTUNED_REQUIRE_FUSE is set");
    skip();
}
