/* trial_stop: stopping a shadow smbd and its process group, step by step
 * from a timer or blocking, and the sweep at start-up of the shadows a
 * killed predecessor left. */
#include "trial.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "files.h"
#include "kernel.h"
#include "parse.h"
#include "rmtree.h"
#include "trial_int.h"

/* The phases of a stop (struct trial_stop). */
enum {
    STOP_LEADER_TERM, /* SIGTERM sent; waiting for the leader to exit */
    STOP_LEADER_KILL, /* SIGKILL sent; waiting for the leader to exit */
    STOP_GROUP_TERM,  /* the leader has exited; waiting for the rest of its group */
    STOP_GROUP_KILL,  /* SIGKILL sent to the rest */
    STOP_STUCK,       /* not even SIGKILL ended the leader: waiting for it to exit */
    STOP_DONE,
};
/* How long smbd's children get to leave after their parent. */
#define GROUP_GRACE_S 1.0

/* Begin to stop process group pgid: SIGTERM, then SIGKILL after grace_s.
 * ours: its leader is our child, not yet reaped (perhaps a zombie). The
 * leader is reaped only at the end: while it is a zombie its pid, and so
 * the group's number, cannot be given to anyone else, and -pgid reaches
 * only what is left of the shadow. A group whose leader is not ours (the
 * sweep) is signalled only while it has members: Linux keeps the number
 * from reuse while a group of that number has any. */
static void stop_begin(struct trial_stop *s, pid_t pgid, bool ours, double grace_s)
{
    *s = (struct trial_stop){.pgid = pgid, .ours = ours, .grace_s = grace_s, .since = child_now()};
    if (!ours && !kernel_pgrp_alive(pgid)) {
        s->phase = STOP_DONE;
        return;
    }
    kill(-pgid, SIGTERM);
    /* Before setsid the child is not yet a group leader. */
    if (ours)
        kill(pgid, SIGTERM);
    s->phase = ours ? STOP_LEADER_TERM : STOP_GROUP_TERM;
}

static void stop_next(struct trial_stop *s, int phase, double grace_s, double now)
{
    s->phase = phase;
    s->grace_s = grace_s;
    s->since = now;
}

/* Our leader has exited (a zombie, left unreaped: WNOWAIT), or someone
 * else reaped it. */
static bool leader_exited(pid_t pid)
{
    siginfo_t si = {0};

    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return errno == ECHILD;
    return si.si_pid == pid;
}

/* The end: our leader, a zombie by now unless SIGKILL could not end it,
 * is reaped. */
static bool stop_done(struct trial_stop *s)
{
    int ws;

    s->phase = STOP_DONE;
    if (s->ours)
        while (waitpid(s->pgid, &ws, WNOHANG) < 0 && errno == EINTR)
            ;
    return true;
}

/* One look, never blocking: true once the stop is over (the group empty
 * and the leader reaped, or given up on after SIGKILL and its grace). */
static bool stop_step(struct trial_stop *s)
{
    double now = child_now();

    switch (s->phase) {
    case STOP_LEADER_TERM:
    case STOP_LEADER_KILL:
        if (leader_exited(s->pgid)) {
            stop_next(s, STOP_GROUP_TERM, GROUP_GRACE_S, now);
            /* often the group's last: no need to wait for the next look */
            return stop_step(s);
        }
        if (now - s->since < s->grace_s)
            return false;
        if (s->phase == STOP_LEADER_TERM) {
            kill(-s->pgid, SIGKILL);
            kill(s->pgid, SIGKILL);
            s->killed = true;
            stop_next(s, STOP_LEADER_KILL, s->grace_s, now);
        } else {
            /* Not even SIGKILL ended it (stuck in the kernel, a hard
             * mount): SIGKILL acts once its I/O returns. Nothing more to
             * send; it is looked at until it exits, and then reaped, its
             * group and run directory cleared as usual. A blocking
             * caller gives up here (s->stuck). */
            s->stuck = true;
            stop_next(s, STOP_STUCK, 0, now);
        }
        return false;
    case STOP_STUCK:
        if (leader_exited(s->pgid)) {
            stop_next(s, STOP_GROUP_TERM, GROUP_GRACE_S, now);
            return stop_step(s);
        }
        return false;
    case STOP_GROUP_TERM:
    case STOP_GROUP_KILL:
        if (!kernel_pgrp_alive(s->pgid))
            return stop_done(s);
        if (now - s->since < s->grace_s)
            return false;
        if (s->phase == STOP_GROUP_KILL)
            return stop_done(s);
        kill(-s->pgid, SIGKILL);
        s->killed_rest = true;
        stop_next(s, STOP_GROUP_KILL, GROUP_GRACE_S, now);
        return false;
    default:
        return true;
    }
}

/* The blocking form, for the sweep at start-up: a group not ours to reap. */
static void kill_group(pid_t pgid, double grace_s)
{
    struct trial_stop s;

    stop_begin(&s, pgid, false, grace_s);
    while (!stop_step(&s))
        usleep(10000);
}

void trial_shadow_stop_begin(struct trial_shadow *t)
{
    if (t->pid <= 0 || t->stopping)
        return;
    /* One that died by itself is a zombie, ours (trial_shadow_poll leaves
     * it unreaped): SIGTERM finds only its children, and they have the
     * group's short grace after it. One reaped by someone else is not
     * ours to pin: its group gets that grace too. */
    stop_begin(&t->stop, t->pid, !t->reaped,
               t->reaped             ? GROUP_GRACE_S
               : t->stop_grace_s > 0 ? t->stop_grace_s
                                     : TRIAL_STOP_TIMEOUT_S);
    t->stopping = true;
}

int trial_shadow_stop_step(struct trial_shadow *t, struct err *e)
{
    int r = 0;

    if (t->stopping && !stop_step(&t->stop))
        return 0;
    t->stopping = false;
    t->pid = 0;
    t->reaped = false;
    if (t->run_dir[0] != '\0') {
        /* Only what is ours, never through a link (rmtree.h). */
        r = rmtree_path(t->run_dir, e);
        t->run_dir[0] = '\0';
    }
    return r < 0 ? r : 1;
}

int trial_shadow_stop(struct trial_shadow *t, struct err *e)
{
    int r;

    trial_shadow_stop_begin(t);
    while ((r = trial_shadow_stop_step(t, e)) == 0) {
        if (t->stop.stuck)
            return err_set(e, -EBUSY,
                           "shadow smbd (pid %d) did not end even after SIGKILL (stuck in the "
                           "kernel?): left, with its run directory %s",
                           (int)t->pid, t->run_dir);
        usleep(10000);
    }
    return r < 0 ? r : 0;
}

/* The names smbd's processes go by (/proc/PID/comm): smbd, its children
 * (smbd[ADDRESS]), smbd-notifyd and cleanupd (Samba 4.17). */
static const char *const smbd_comms[] = {"smbd", "cleanupd", NULL};

/* One run directory found by the sweep: clean it up unless its owner is
 * alive. Returns 0 when it was removed or left to its owner. */
static int sweep_one(int base_fd, const char *base_dir, const char *name, struct err *e)
{
    struct trial_owner own = {0};
    struct err e2 = {{0}};
    char path[PATH_MAX], pidfile[PATH_MAX], *text = NULL;
    const char *rest;
    size_t len;
    pid_t v;
    struct stat st;
    int r;

    /* Only names of our shape: shadow-PID-XXXXXX (mkdtemp's letters and
     * digits), a directory, no link. */
    if (parse_pid_name(name, TRIAL_DIR_PREFIX, &v, &rest) < 0 || rest == NULL ||
        strlen(rest) != 6 ||
        strspn(rest, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                     "0123456789") != 6)
        return 0;
    if (fstatat(base_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    if (trial_path_join(path, sizeof(path), base_dir, name) < 0 ||
        trial_path_join(pidfile, sizeof(pidfile), path, TRIAL_PIDFILE) < 0)
        return 0;
    if (files_read_own(pidfile, &text, &len, NULL) == 0 && trial_owner_parse(text, &own) == 0 &&
        own.owner_pid == v) {
        if (kernel_pid_is(own.owner_pid, own.owner_start))
            return 0; /* a live run's shadow */
        if (own.smbd_pid > 0 && kernel_pid_is(own.smbd_pid, own.smbd_start)) {
            struct kernel_proc sp;

            char comm[32];

            /* We made it a session leader: the group is its own, with
             * what smbd runs (a share's preexec script too). A record
             * naming a live leader that is not an smbd is not ours to act
             * on: another program's, or a record we did not write. */
            if (kernel_proc_read(own.smbd_pid, &sp) == 0 && sp.pgrp == own.smbd_pid &&
                kernel_proc_comm(own.smbd_pid, comm, sizeof(comm)) == 0 &&
                strcmp(comm, "smbd") == 0)
                kill_group(own.smbd_pid, TRIAL_STOP_TIMEOUT_S);
        } else if (own.smbd_pid > 0 && kill(own.smbd_pid, 0) < 0 && errno == ESRCH &&
                   kernel_pgrp_only(own.smbd_pid, own.smbd_pid, smbd_comms)) {
            /* The leader is gone but its group is not: smbd's children,
             * if they are smbds in the session it made. A group of that
             * number and anything else is another program's: the number
             * came round again (a reboot since the record, or a long
             * time), and a leaderless group proves nothing by itself. */
            kill_group(own.smbd_pid, TRIAL_STOP_TIMEOUT_S);
        }
    } else if (kill(v, 0) == 0 || errno != ESRCH) {
        /* No record yet (or unreadable): its owner may be creating it right
         * now. Without a start time only a dead pid proves it is stale. */
        free(text);
        return 0;
    }
    free(text);
    /* Relative to the open base: a name swapped for a symlink, or a
     * directory that is not ours, stays (rmtree.h). */
    r = rmtree_at(base_fd, name, &e2);
    if (r < 0)
        return err_set(e, r, "cannot remove %s: %s", path, e2.msg);
    return 0;
}

int trial_shadow_sweep(const char *base_dir, struct err *e)
{
    struct dirent *de;
    DIR *d;
    int fd, r = 0;

    /* A base directory that is not ours alone is not swept (open_base). */
    fd = trial_open_base(base_dir, false, e);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    d = fdopendir(fd);
    if (d == NULL) {
        r = err_set(e, -errno, "cannot open %s: %s", base_dir, strerror(errno));
        close(fd);
        return r;
    }
    while ((de = readdir(d)) != NULL) {
        int r1;

        if (strncmp(de->d_name, TRIAL_DIR_PREFIX, strlen(TRIAL_DIR_PREFIX)) != 0)
            continue;
        /* Go on after a failure: one stuck directory must not keep the
         * others (and their smbd processes) around. */
        r1 = sweep_one(dirfd(d), base_dir, de->d_name, e);
        if (r1 < 0 && r == 0)
            r = r1;
    }
    closedir(d);
    return r;
}
