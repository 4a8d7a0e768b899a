/* The daemon and --once. One sd-event loop: a timer starts
 * each cycle, signals are event sources, the probe child is an io source
 * with a deadline. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "cmd.h"
#include "build.h"
#include "conf_check.h"
#include "config.h"
#include "files.h"
#include "job.h"
#include "journal.h"
#include "place.h"
#include "report.h"
#include "runlock.h"
#include "smbconf.h"
#include "state.h"
#include "tuner.h"

struct daemon {
    const struct opts *o;
    sd_event *ev;
    struct tuner *tuner;
    struct config cfg;
    struct tuner_opts topts;
    sd_event_source *hup_retry; /* a SIGHUP waits for the cycle to end */
    /* A SIGHUP's check of smb.conf under way (in a job: a hung mount
     * must not stop the loop), of the configuration in next; hup_again:
     * another SIGHUP came meanwhile, and the file may have changed. */
    struct conf_check check;
    struct daemon *next;
    bool hup_again;
    bool hup_told; /* the wait for a cycle was said for this reload */
};

static int on_term(sd_event_source *s, const struct signalfd_siginfo *si, void *ud)
{
    struct daemon *d = ud;
    bool left;

    journal_log(LOG_NOTICE, "signal %d: stopping; any trial is taken back first",
                (int)si->ssi_signo);
    sd_notify(0, "STOPPING=1");
    /* A change that could not be taken back (the journal said why) ends
     * the service failed, so that `systemctl status` shows it too, not
     * only the journal; the next start takes it back. */
    left = tuner_stop(d->tuner);
    if (left)
        journal_log(LOG_ERR,
                    "stopped before a change of smbtuned's in %s was settled: the next "
                    "start takes a trial back and checks a commit",
                    d->topts.smb_conf);
    sd_event_exit(d->ev, left || d->o->once ? 1 : 0);
    return 0;
}

/* SIGHUP: read the config again; a bad one is refused and the old one
 * stays in force. The state file is read at the next cycle anyway, which
 * is where `--resume` clears the hold. */
static int on_hup_retry(sd_event_source *s, uint64_t usec, void *ud);

/* A new state directory takes a restart, so a reload that would change it
 * is refused (true, and said so): the run lock (lib/runlock.h) is held on
 * the old one, taken once at the start; tuner_recover(), which settles a
 * pending edit recorded in the state file, ran on the old one only; and
 * the own share's files live there. The place named is the line of next's
 * state_dir, or the file when the line is gone (the default). */
static bool state_dir_changed(const struct daemon *d, const struct daemon *next)
{
    const char *where = next->cfg.tune.state_dir_where;

    /* next's config, not its options: this comes before cmd_opts(),
     * whose checks of a state_dir (its length for shadow trials) would
     * otherwise hide that no state_dir of the reload is taken at all */
    if (strcmp(d->topts.state_dir, next->cfg.tune.state_dir) == 0)
        return false;
    journal_log(LOG_ERR,
                "SIGHUP: %s: tune: state_dir changed from '%s' to '%s': a new state directory "
                "takes a restart (systemctl restart smbtuned); keeping the configuration in force",
                where[0] != '\0' ? where : d->o->config_file, d->topts.state_dir,
                next->cfg.tune.state_dir);
    return true;
}

/* The reload waits for the cycle under way (a retry each second). */
static void hup_wait(struct daemon *d, bool say)
{
    if (say && !d->hup_told)
        journal_log(LOG_INFO, "SIGHUP: reloading once the cycle under way ends");
    d->hup_told = d->hup_told || say;
    if (d->hup_retry == NULL)
        sd_event_add_time_relative(d->ev, &d->hup_retry, CLOCK_MONOTONIC, 1000000, 100000,
                                   on_hup_retry, d);
}

static void hup_refused(struct daemon *d, const char *msg)
{
    journal_log(LOG_ERR, "SIGHUP: %s; keeping the configuration in force", msg);
    sd_notify(0, "READY=1");
    d->hup_told = false;
}

static void hup_begin(struct daemon *d, bool say);

/* The SIGHUP's check of smb.conf has ended: the configuration in d->next
 * is taken, or refused. */
static void hup_checked(void *ud, int r, const char *msg)
{
    struct daemon *d = ud;
    struct daemon *next = d->next;
    struct err e = {{0}};

    d->next = NULL;
    if (r < 0) {
        hup_refused(d, msg);
    } else if (tuner_busy(d->tuner)) {
        /* a cycle began while the check ran: the whole reload again once
         * it ends (the files may change meanwhile); READY=1 meanwhile, or
         * systemd would see a reload that lasts the cycle */
        sd_notify(0, "READY=1");
        hup_wait(d, true);
    } else {
        d->cfg = next->cfg;
        /* next's options, made again into d: checked, so it cannot fail */
        if (cmd_opts(d->o, &d->cfg, &d->topts, CMD_FILL_AGAIN, &e) < 0)
            journal_log(LOG_ERR, "SIGHUP: %s", e.msg);
        tuner_set_opts(d->tuner, &d->topts);
        d->hup_told = false;
        journal_log(LOG_NOTICE, "configuration reloaded from %s", d->o->config_file);
        sd_notify(0, "READY=1");
        tuner_kick(d->tuner);
    }
    free(next);
    if (d->hup_again) {
        d->hup_again = false;
        hup_begin(d, true);
    }
}

/* A config file read at the start (or at the last reload) and gone at a
 * SIGHUP: the built-in defaults would stand in for it without a word, and
 * `mode = advise` would become tune. Refused; a restart without the file
 * takes the defaults, as the first start did. */
static int file_gone(const struct daemon *d, const struct daemon *next, struct err *e)
{
    if (!d->cfg.from_file || next->cfg.from_file)
        return 0;
    return err_set(e, -ENOENT,
                   "%s is gone (it was read before): its settings stay in force; restart "
                   "smbtuned to run on the built-in defaults",
                   d->o->config_file);
}

/* A reload: say, whether a wait for the cycle under way is told (once per
 * SIGHUP, not at every retry). */
static void hup_begin(struct daemon *d, bool say)
{
    struct daemon *next;
    struct err e = {{0}};

    /* One check at a time; the SIGHUP that came during it reloads again
     * after it, reading the files as they are then. */
    if (d->check.job != NULL) {
        d->hup_again = true;
        return;
    }
    /* The tuner's options point into d->cfg: a cycle under way (a live
     * trial, a commit) must finish on the file, state directory and trial
     * mode it began with, so the reload waits for it. */
    if (tuner_busy(d->tuner)) {
        hup_wait(d, say);
        return;
    }
    /* This reload serves an earlier SIGHUP still waiting too: its retry
     * would only reload once more after the next cycle, and kick one. */
    d->hup_retry = sd_event_source_disable_unref(d->hup_retry);
    sd_notify(0, "RELOADING=1");
    next = malloc(sizeof(*next));
    if (next == NULL) {
        hup_refused(d, "out of memory");
        return;
    }
    *next = *d;
    if (cmd_load_config(d->o, &next->cfg, &e) < 0 || file_gone(d, next, &e) < 0 ||
        state_dir_changed(d, next) ||
        cmd_opts(next->o, &next->cfg, &next->topts, CMD_FILL_RELOAD, &e) < 0) {
        /* (state_dir_changed says why itself) */
        if (e.msg[0] != '\0')
            journal_log(LOG_ERR, "SIGHUP: %s; keeping the configuration in force", e.msg);
        sd_notify(0, "READY=1");
        d->hup_told = false;
        free(next);
        return;
    }
    /* What -t refuses (systemctl reload runs it first), a plain kill -HUP
     * must refuse too: an smb.conf that cannot be read or is refused as a
     * configuration would only make every cycle fail. (Not testparm's
     * verdict, which -t asks for too: it may take up to 60 s; each cycle
     * reports it.) In a job: an include on a hung mount blocks its read,
     * and the loop (its watchdog pings, SIGTERM) must go on. */
    d->next = next;
    if (conf_check_start(&d->check, d->ev, &next->topts, CONF_CHECK_DEADLINE_S, hup_checked, d,
                         &e) < 0) {
        char msg[sizeof(e.msg) + 64];

        snprintf(msg, sizeof(msg), "checking %s: %s", next->topts.smb_conf, e.msg);
        d->next = NULL;
        free(next);
        hup_refused(d, msg);
    }
}

static int on_hup(sd_event_source *s, const struct signalfd_siginfo *si, void *ud)
{
    (void)s;
    (void)si;
    hup_begin(ud, true);
    return 0;
}

static int on_hup_retry(sd_event_source *s, uint64_t usec, void *ud)
{
    struct daemon *d = ud;

    d->hup_retry = sd_event_source_disable_unref(d->hup_retry);
    hup_begin(d, false);
    return 0;
}

/* STATUS= when the tuner's words change (and with READY=1): no timer, so
 * that between cycles nothing wakes the loop (bench/daemon-footprint). */
static void on_status(void *ud, const char *status)
{
    sd_notifyf(0, "STATUS=%s", status);
}

/* The exit status of a start refused for error r. 78 (EX_CONFIG) says the
 * configuration is wrong, and the unit's RestartPreventExitStatus=78 then
 * leaves smbtuned down until an admin acts. A check that could not be
 * made says nothing of the configuration (no answer in time from a slow
 * mount at boot, a file not ready, out of processes, memory or
 * descriptors, an I/O error): 1, which systemd retries. */
static int start_exit(int r)
{
    switch (r) {
    case -ETIMEDOUT:
    case -EAGAIN:
    case -EINTR:
    case -EIO:
    case -ENOMEM:
    case -EMFILE:
    case -ENFILE:
        return CMD_EXIT_FAILURE;
    default:
        return CMD_EXIT_CONFIG;
    }
}

/* A run refused before its cycle: the line on stderr, and with --once
 * --json one object on stdout all the same (report_print_failure), result
 * "error"; mode NULL when the config was refused. Returns code. */
static int refused(const struct opts *o, int code, const char *mode, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int refused(const struct opts *o, int code, const char *mode, const char *fmt, ...)
{
    char msg[PATH_MAX + 1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "smbtuned: %s\n", msg);
    if (o->once && o->json)
        report_print_failure(stdout, NULL, "error", msg, mode, 0);
    return code;
}

/* A refused start takes nothing back: a live trial that a killed run left
 * stays in smb.conf, and after exit 78 systemd does not try again
 * (RestartPreventExitStatus=78). Said after the refusal, so that the
 * admin who fixes the configuration knows what waits for the next start.
 * Only read (state_peek): a refused start changes nothing. */
static void say_left_trial(const char *state_dir)
{
    struct err e = {{0}};
    struct state st;
    pid_t pid;

    /* a run that holds the state directory (the service, when this is an
     * admin's --once or a second start) takes its own trial back */
    if (runlock_holder(state_dir, &pid, &e) == 1 || state_peek(state_dir, &st, NULL) < 0)
        return;
    if (st.pending && !st.pending_commit && !st.pending_unrestarted)
        fprintf(stderr,
                "smbtuned: note: %s/state records a live trial that a stopped run left in %s: "
                "it stays in force until smbtuned starts and takes it back (smbtuned --status "
                "says more)\n",
                state_dir, st.pending_edit.file);
    state_free(&st);
}

/* One cycle runner per state directory (lib/runlock.h): a second daemon,
 * or an admin's --once while the service runs, would search beside the
 * first, and on its commit put the shared state file on hold. The lock's
 * descriptor, or -1 once refused() has said why. */
static int run_lock(const struct opts *o, const char *mode, const char *state_dir)
{
    struct err e = {{0}};
    char who[32] = "";
    pid_t holder;
    int fd = runlock_take(state_dir, &holder, &e);

    if (fd >= 0)
        return fd;
    if (fd != -EBUSY) {
        refused(o, 1, mode, "%s", e.msg);
        return -1;
    }
    if (holder > 0)
        snprintf(who, sizeof(who), " (pid %ld)", (long)holder);
    refused(o, 1, mode,
            "another smbtuned%s is tuning with state directory %s: stop it first (systemctl "
            "stop smbtuned) or use another --state-dir",
            who, state_dir);
    return -1;
}

int cmd_run(const struct opts *o)
{
    struct daemon d = {.o = o};
    struct err e = {{0}};
    char target[PATH_MAX + 64];
    const char *mode;
    sigset_t ss;
    bool scheduled;
    int r, lock;

    if ((r = cmd_load_config(o, &d.cfg, &e)) < 0) {
        /* which state directory the file names is unknown: the default,
         * or --state-dir's */
        r = refused(o, start_exit(r), NULL, "%s", e.msg);
        say_left_trial(o->state_dir);
        return r;
    }
    if ((r = cmd_opts(o, &d.cfg, &d.topts, CMD_FILL_START, &e)) < 0) {
        r = refused(o, start_exit(r), NULL, "%s", e.msg);
        say_left_trial(d.cfg.tune.state_dir);
        return r;
    }
    /* The daemon refuses what -t refuses, before READY=1 and with -t's
     * exit status (but for testparm's verdict, which each cycle reports,
     * the state directory, exit 1 below, and a check that got no answer,
     * start_exit()): the unit has no
     * ExecStartPre= check any more, and
     * RestartPreventExitStatus=78 keeps systemd from retrying such a start
     * for ever. (--once reports it as its cycle's failure.) */
    if (!o->once && (r = conf_check(&d.topts, &e)) < 0) {
        r = refused(o, start_exit(r), NULL, "%s", e.msg);
        say_left_trial(d.topts.state_dir);
        return r;
    }
    mode = d.topts.mode == TUNER_ADVISE ? "advise" : "tune";
    r = files_private_dir(d.topts.state_dir, FILES_DIR_MAKE, &e);
    if (r < 0)
        return refused(o, 1, mode, "state directory: %s", e.msg);
    close(r);
    /* Before anything reads or writes the state file or smb.conf
     * (tuner_recover does both); held until the process ends. */
    lock = run_lock(o, mode, d.topts.state_dir);
    if (lock < 0)
        return 1;
    /* What a killed run's atomic writes left next to the state file and
     * the backups (a failure here is the lock's, which the first save
     * reports anyway). */
    if (state_sweep_tmp(d.topts.state_dir, &e) < 0)
        journal_log(LOG_WARNING, "%s", e.msg);
    smbconf_backup_sweep(d.topts.state_dir);
    /* Signals arrive as events; block them for the default handlers.
     * SIGCHLD too: the jobs' child sources (lib/job.h) need it blocked. */
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGHUP);
    sigaddset(&ss, SIGCHLD);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    r = sd_event_default(&d.ev);
    if (r < 0) {
        close(lock);
        return refused(o, 1, mode, "sd-event: %s", strerror(-r));
    }
    sd_event_add_signal(d.ev, NULL, SIGTERM, on_term, &d);
    sd_event_add_signal(d.ev, NULL, SIGINT, on_term, &d);
    if (!o->once) {
        sd_event_add_signal(d.ev, NULL, SIGHUP, on_hup, &d);
    }
    /* WATCHDOG_USEC from systemd: the loop pings it while it turns. */
    sd_event_set_watchdog(d.ev, true);

    if (tuner_new(d.ev, &d.topts, &d.tuner, &e) < 0 || tuner_recover(d.tuner, &e) < 0) {
        r = refused(o, 1, mode, "%s", e.msg);
        tuner_free(d.tuner);
        job_stuck_free();
        sd_event_unref(d.ev);
        close(lock);
        return r;
    }
    if (d.topts.own_share)
        snprintf(target, sizeof(target),
                 "its own share %s/" PLACE_OWN_SHARE_DIR
                 " (no url: served by shadow smbds on 127.0.0.1)",
                 d.topts.state_dir);
    else
        snprintf(target, sizeof(target), "%s", d.topts.probe.url);
    {
        char conf[PATH_MAX + 32], tgt[sizeof(target) + 32];
        const char *fields[] = {conf, tgt, "SMBTUNED_VERSION=" SMBTUNED_VERSION, NULL};

        snprintf(conf, sizeof(conf), "SMBTUNED_SMB_CONF=%s", d.topts.smb_conf);
        snprintf(tgt, sizeof(tgt), "SMBTUNED_TARGET=%s", target);
        journal_event(JOURNAL_ID_START, LOG_INFO, fields, "smbtuned %s: %s, target %s",
                      SMBTUNED_VERSION, d.topts.mode == TUNER_TUNE ? "tuning" : "advising", target);
    }
    /* A restart (boot, a package upgrade, Restart=on-failure) keeps the
     * schedule of the state file rather than search at once, moving
     * gigabytes minutes after the last cycle. --once runs now; SIGHUP
     * still starts a cycle at once (on_hup). Before READY, whose STATUS
     * says it. */
    scheduled = !o->once && tuner_keep_schedule(d.tuner);
    /* STATUS with READY: `systemctl status` says what it does from the
     * first moment; then each change of it (on_status). */
    sd_notifyf(0, "READY=1\nSTATUS=%s", tuner_status(d.tuner));
    if (!o->once)
        tuner_on_status(d.tuner, on_status, NULL);
    if (!scheduled)
        tuner_kick(d.tuner);
    r = sd_event_loop(d.ev);
    if (o->once && r == 0)
        r = tuner_exit_code(d.tuner);
    sd_event_source_disable_unref(d.hup_retry);
    conf_check_cancel(&d.check);
    free(d.next);
    tuner_free(d.tuner);
    /* jobs killed but stuck in the kernel are left to init */
    job_stuck_free();
    sd_event_unref(d.ev);
    /* Last: a trial taken back at the stop (tuner_free) is still ours. */
    close(lock);
    return r < 0 ? 1 : r;
}
