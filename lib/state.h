/* state: what smbtuned must remember across restarts, in STATE_DIR/state.
 *
 * A text file of `key value` lines (values C-escaped), replaced atomically.
 * Unknown keys are ignored so that an older smbtuned reads a newer file.
 * The parse and format are pure; state_load/state_save touch the disk. */
#ifndef SMBTUNE_STATE_H
#define SMBTUNE_STATE_H

#include <stdbool.h>

#include "smbconf.h"
#include "util.h"

struct state {
    /* the configuration in force, as far as smbtuned knows, and its rates */
    bool have_incumbent;
    long rcvbuf, sndbuf; /* 0: autotuning */
    double write_mbps, read_mbps;
    /* the socket options value smbtuned last wrote, and where */
    char *last_written;
    /* an admin changed our line: hands off until `smbtuned --resume` */
    bool hold;
    char *hold_reason;
    /* what the measurements were made on: a change means search again */
    char *kernel;
    char *samba;
    char *smb_conf;
    /* a step that must be undone if we died in it (a live trial): the
     * edit that put the trial value in, taken back by compare-and-set */
    bool pending;
    bool pending_commit; /* the edit is a commit, not a trial: keep it */
    struct smbconf_edit pending_edit;
    long cycles;
};

int state_parse(const char *text, const char *name, struct state *s, struct err *e);
/* malloc'ed text; NULL when out of memory */
char *state_format(const struct state *s);
void state_free(struct state *s);

/* STATE_DIR/state; a missing file is an empty state. */
int state_load(const char *dir, struct state *s, struct err *e);
int state_save(const char *dir, const struct state *s, struct err *e);

/* Replace *dst by a copy of src (NULL allowed). */
int state_set_str(char **dst, const char *src);

#endif
