/* tuner_files: a search's commit that needed smbd restarted (restart_smbd
 * = yes) met files open on smbd and was not made (owned_files_open). The
 * next search would come to the same commit and the same refusal while
 * files stay open, and a busy file server has some open all day: a full
 * search each interval, trials and all, for nothing. So later cycles ask
 * smbstatus first (in a job: it reads tdb files) and are deferred while
 * any file is open, as a busy cycle is; once none is, they search. The
 * wait ends with a change of the line in force or a reload; it is not
 * kept across a restart of smbtuned (one more search then). */
#include <errno.h>
#include <string.h>

#include "files.h"
#include "job.h"
#include "journal.h"
#include "smbstatus.h"
#include "tuner_int.h"

struct files_reply {
    int r;
    char msg[sizeof(((struct err *)0)->msg)];
};

static int files_job(void *arg, int out_fd)
{
    const struct tuner *t = arg;
    struct files_reply rep = {0};
    struct err e = {{0}};

    rep.r = owned_files_open(&t->o, &e);
    memcpy(rep.msg, e.msg, sizeof(rep.msg));
    return files_write_all(out_fd, &rep, sizeof(rep));
}

static void deferred(struct tuner *t, const char *why)
{
    journal_log(LOG_INFO, "tuning deferred: the last search's commit needs smbd restarted, and %s",
                why);
    tuner_set_status(t, "deferred: files open on smbd, whose restart the last search's commit "
                        "needs");
    tuner_cycle_end(t, true);
}

static void files_done(struct job *j, const struct job_result *jr, void *ud)
{
    struct tuner *t = ud;
    const struct files_reply *rep = (const void *)jr->data;

    (void)j;
    t->files_job = NULL;
    if (!jr->ok || jr->len != sizeof(*rep)) {
        /* not known: as when the commit asked */
        deferred(t, jr->timed_out ? "smbstatus did not answer in time"
                                  : "whether files are open is not known (the check failed)");
        return;
    }
    if (rep->r < 0) {
        deferred(t, rep->msg);
        return;
    }
    journal_log(LOG_INFO, "no file open on smbd now: searching again");
    t->files_wait = false;
    tuner_cycle_search(t);
}

void tuner_files_then_search(struct tuner *t)
{
    struct err e;

    /* another line in force, or --once: what the refusal rested on is gone */
    if (t->files_wait && (t->o.once || !search_config_eq(t->files_from, t->inc0)))
        t->files_wait = false;
    if (!t->files_wait) {
        tuner_cycle_search(t);
        return;
    }
    tuner_set_status(t, "starting: asking smbstatus for files open on smbd");
    if (job_start(t->ev, files_job, t, SMBSTATUS_TIMEOUT_S + 10.0, files_done, t, &t->files_job,
                  &e) < 0) {
        deferred(t, e.msg);
        return;
    }
}

void tuner_files_forget(struct tuner *t)
{
    t->files_wait = false;
    if (t->files_job != NULL) {
        job_cancel(t->files_job);
        t->files_job = NULL;
    }
}
