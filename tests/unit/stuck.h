/* stuck: files whose open never returns and which SIGKILL does not end,
 * as on a hung NFS or FUSE mount: a FUSE mount of the test's own, in a
 * directory of its own, whose server (the test) reads each request and
 * never answers it. The kernel then waits for the answer without regard
 * to signals (fuse's request_wait_answer once the request has been read).
 * Root only, and /dev/fuse. */
#ifndef SMBTUNED_TEST_STUCK_H
#define SMBTUNED_TEST_STUCK_H

#include <limits.h>

struct stuck {
    int fd; /* /dev/fuse: readable when a request waits */
    char dir[PATH_MAX];
};

/* Mount it at a new directory under TMPDIR (or /tmp): 0, or -errno (not
 * root, no FUSE here: the caller skips). Any name in dir is such a file. */
int stuck_mount(struct stuck *s);

/* stuck_mount, or skip the calling cmocka test when it cannot be made
 * (not root, no FUSE in this container), unless SMBTUNED_REQUIRE_FUSE is
 * set (scripts/test, as CI runs it): there a skip would hide that the
 * stuck tests never ran, and the test fails instead. */
void stuck_mount_or_skip(struct stuck *s);

/* Read the requests that wait, answering none (never blocks): how many,
 * not counting the kernel's INTERRUPTs (one per signal to a waiter). */
int stuck_take(struct stuck *s);

/* Close the connection (every open waiting on it fails, so its process
 * can end), unmount and remove the directory. Idempotent. */
void stuck_release(struct stuck *s);

#endif
