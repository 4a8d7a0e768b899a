/* --resume: a hold handed back to smbtuned, under the state file's lock. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "cmd.h"
#include "config.h"
#include "journal.h"
#include "state.h"

int cmd_resume(const struct opts *o)
{
    struct config cfg;
    struct state st;
    struct err e = {{0}};
    char conf[sizeof(cfg.tune.smb_conf) + 32];
    bool damaged;
    int r;

    if (cmd_load_config(o, &cfg, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return CMD_EXIT_CONFIG;
    }
    /* No save of the daemon's may come between our load and our save:
     * the counters and the schedule it saved would be lost. No state
     * directory: smbtuned never ran, so it holds nothing. */
    r = state_lock(cfg.tune.state_dir, &e);
    if (r == -ENOENT) {
        printf("smbtuned was not holding off\n");
        return 0;
    }
    /* A damaged file (state_peek says so, under the lock) becomes a hold
     * in state_load, whose reason asks the admin to check the line first,
     * since it may have stood for a live trial still in smb.conf: that
     * hold is not ended in the same breath. The next --resume ends it. */
    damaged = r == 0 && state_is_damage(state_peek(cfg.tune.state_dir, &st, NULL));
    if (r == 0)
        state_free(&st); /* zeroed by a failed parse: free again is safe */
    if (r < 0 || state_load(cfg.tune.state_dir, &st, &e) < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        state_unlock();
        return CMD_EXIT_FAILURE;
    }
    if (damaged) {
        state_unlock();
        fprintf(stderr, "smbtuned: %s; the hold stays until the next --resume\n",
                st.hold_reason ? st.hold_reason : "the state file was damaged");
        state_free(&st);
        return CMD_EXIT_FAILURE;
    }
    if (!st.hold) {
        state_unlock();
        printf("smbtuned was not holding off\n");
        state_free(&st);
        return 0;
    }
    /* The admin's value becomes the one smbtuned starts from. What the
     * hold was is said first: the reason may ask for a look at smb.conf. */
    printf("smbtuned held off: %s\n", st.hold_reason ? st.hold_reason : "by request");
    snprintf(conf, sizeof(conf), "SMBTUNED_SMB_CONF=%s", cfg.tune.smb_conf);
    state_end_hold(&st);
    r = state_save(cfg.tune.state_dir, &st, &e);
    state_unlock();
    state_free(&st);
    if (r < 0) {
        fprintf(stderr, "smbtuned: %s\n", e.msg);
        return 1;
    }
    journal_event(JOURNAL_ID_RESUME, LOG_NOTICE, (const char *const[]){conf, NULL},
                  "hold ended by --resume: smb.conf is tuned again from the next cycle");
    printf("smbtuned tunes smb.conf again from its next cycle (SIGHUP to start it now)\n");
    return 0;
}
