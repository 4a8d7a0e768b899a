/* --resume: a hold handed back to smbtuned, under the state file's lock. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "config.h"
#include "journal.h"
#include "smbconf.h"
#include "sockopts.h"
#include "state.h"

/* An edit by hand of smbtuned's line becomes a hold at the daemon's next
 * cycle (owned_read.c, check_ours). An admin who runs --resume right after
 * the edit means the same as after that cycle: tune from the line as it is
 * now. The line in force, read as --status reads it (in this process,
 * under the edit lock: cmd_resume). NULL when it cannot be read: the next
 * cycle says why. */
static char *line_now(const char *smb_conf)
{
    struct smbconf c;
    struct err e;
    char *v;

    if (smbconf_load(&c, smb_conf, &e) < 0)
        return NULL;
    v = strdup(c.value);
    smbconf_free(&c);
    return v;
}

/* Under the state's lock: end the hold, or the record of our line that an
 * edit by hand (now: the line in force, NULL if unread) made stale. */
static int resume_locked(const struct config *cfg, const char *now)
{
    struct state st;
    struct err e = {{0}};
    char conf[sizeof(cfg->tune.smb_conf) + 32];
    bool damaged, held, edited;
    int r;

    /* No save of the daemon's may come between our load and our save:
     * the counters and the schedule it saved would be lost. No state
     * directory: smbtuned never ran, so it holds nothing. */
    r = state_lock(cfg->tune.state_dir, &e);
    if (r == -ENOENT) {
        printf("smbtuned was not holding off\n");
        return 0;
    }
    /* A damaged file (state_peek says so, under the lock) becomes a hold
     * in state_load, whose reason asks the admin to check the line first,
     * since it may have stood for a live trial still in smb.conf: that
     * hold is not ended in the same breath. The next --resume ends it. */
    damaged = r == 0 && state_is_damage(state_peek(cfg->tune.state_dir, &st, NULL));
    if (r == 0)
        state_free(&st); /* zeroed by a failed parse: free again is safe */
    if (r < 0 || state_load(cfg->tune.state_dir, &st, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        state_unlock();
        return CMD_EXIT_FAILURE;
    }
    r = CMD_EXIT_OK;
    /* A step in flight (a live trial, a commit not yet checked) is
     * settled first: its take-back or check is what finds an edit then. */
    edited = !st.hold && !st.pending && now != NULL && st.last_written != NULL &&
             !sockopts_same(now, st.last_written);
    if (damaged) {
        fprintf(stderr, "smbtuned: %s; the hold stays until the next --resume\n",
                st.hold_reason ? st.hold_reason : "the state file was damaged");
        r = CMD_EXIT_FAILURE;
    } else if (!st.hold && !edited) {
        printf("smbtuned was not holding off%s\n",
               st.pending ? " (it has a step in flight, see --status: an edit by hand found when "
                            "it settles it makes it hold off; --resume then)"
                          : "");
    } else {
        /* What the hold was is said first: the reason may ask for a look
         * at smb.conf. The admin's value becomes the one smbtuned starts
         * from. */
        if (edited)
            printf("socket options edited by hand: it is '%s', not '%s' as smbtuned wrote it; "
                   "smbtuned had not held off for it yet\n",
                   now, st.last_written);
        else
            printf("smbtuned held off: %s\n", st.hold_reason ? st.hold_reason : "by request");
        held = st.hold;
        state_end_hold(&st);
        if (state_save(cfg->tune.state_dir, &st, &e) < 0) {
            fprintf(stderr, "smbtuned: %s\n", e.msg);
            r = CMD_EXIT_FAILURE;
        } else {
            snprintf(conf, sizeof(conf), "SMBTUNED_SMB_CONF=%s", cfg->tune.smb_conf);
            journal_event(JOURNAL_ID_RESUME, LOG_NOTICE, (const char *const[]){conf, NULL},
                          "%s by --resume: smb.conf is tuned again from the next cycle",
                          held ? "hold ended" : "edit by hand taken as the line to tune from");
            printf("smbtuned tunes smb.conf again from its next cycle (SIGHUP to start it "
                   "now)\n");
        }
    }
    state_unlock();
    state_free(&st);
    return r;
}

int cmd_resume(const struct opts *o)
{
    struct config cfg;
    struct err e = {{0}};
    char *now;
    int lock, r;

    if (cmd_load_config(o, &cfg, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return CMD_EXIT_CONFIG;
    }
    /* The line is read under the edit lock, which every write of the
     * daemon's holds, and its state file under the state's lock after
     * that (the order the daemon's jobs take them in): a write of ours
     * half-way (a commit written, its restart not yet decided: it may go
     * back) shows as the record it saved first, pending, never as an edit
     * by hand. Not under the state's lock: a read of smb.conf that hangs
     * (an include on a hung mount) would hold up the daemon's loop at its
     * next save; its jobs wait for the edit lock in their own process. */
    lock = smbconf_lock(cfg.tune.state_dir, &e);
    if (lock == -ENOENT) {
        /* no state directory: smbtuned never ran, so it holds nothing */
        printf("smbtuned was not holding off\n");
        return 0;
    }
    if (lock < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return CMD_EXIT_FAILURE;
    }
    now = line_now(cfg.tune.smb_conf);
    r = resume_locked(&cfg, now);
    free(now);
    close(lock);
    return r;
}
