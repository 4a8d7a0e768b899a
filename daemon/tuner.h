/* tuner: one tuning cycle as a state machine over the lib parts, driven by
 * the sd-event loop. Only the tuner knows the order of things:
 *
 *   recover  finish what a killed run left (a live trial, an unsaved commit)
 *   begin    read smb.conf and the state; hold off when an admin edited our
 *            line; defer while real clients are busy or outside the window
 *   trial    search_ask -> put the candidate where it harms nobody (a shadow
 *            smbd, the probe's own client socket, or live) -> probe ->
 *            search_tell, until the search converges or the budget is spent
 *   commit   compare-and-set the winner into smb.conf, apply, verify
 *   verify   later cycles sample the winner; a drift starts a new search
 *
 * Every trial is bounded by the probe's deadline; nothing (trial value,
 * shadow smbd, probe child, probe file) outlives a cycle, SIGTERM, or, via
 * recover and the sweeps at start, a kill -9. */
#ifndef SMBTUNED_TUNER_H
#define SMBTUNED_TUNER_H

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "tuner_opts.h" /* enum tuner_trials, enum tuner_mode, struct tuner_opts */
#include "err.h"

struct tuner;
struct world;

/* A tuner in the real world (daemon/world.c). */
int tuner_new(sd_event *ev, const struct tuner_opts *o, struct tuner **t, struct err *e);
/* A tuner in the world w (NULL: the real one), which it takes over and
 * frees: for the simulation in tests/unit/test_tuner.c. */
int tuner_new_in(sd_event *ev, const struct tuner_opts *o, const struct world *w, struct tuner **t,
                 struct err *e);
void tuner_free(struct tuner *t);

/* Replace the options (SIGHUP with a good config). Only between cycles
 * (see tuner_busy): the strings are the caller's, read at once. */
void tuner_set_opts(struct tuner *t, const struct tuner_opts *o);

/* A cycle is under way: its probes, trials and edits use the options. */
bool tuner_busy(const struct tuner *t);

/* At start-up: take back a live trial a killed run left in smb.conf (only
 * while our line still holds it), remove leftover shadow smbds. */
int tuner_recover(struct tuner *t, struct err *e);

/* At the daemon's start, after tuner_recover, instead of tuner_kick:
 * when the state file says the next cycle is due later, and no more than
 * an interval from now, and nothing was left pending or held, arm the
 * timer for then, say so (journal and status) and return true; false:
 * the caller starts a cycle now (tuner_kick). */
bool tuner_keep_schedule(struct tuner *t);

/* Start a cycle now (no-op when one runs). */
void tuner_kick(struct tuner *t);

/* Abort what runs and restore: for SIGTERM and SIGINT. A take-back
 * saves what it settles; the rest of a cut cycle (its counters, the
 * clients it watched) is not saved: the state file keeps the last ended
 * cycle's, and the next start runs a cycle at once (a cut one is not
 * kept as a schedule). True when a change of ours that the stop should
 * have taken back may still be in smb.conf (owned_take_back_now). */
bool tuner_stop(struct tuner *t);

/* For --once: 0 when the cycle did what it should, 1 otherwise. */
int tuner_exit_code(const struct tuner *t);

/* A line for `systemctl status` (sd_notify STATUS=). */
const char *tuner_status(const struct tuner *t);
/* fn(ud, status) each time the words of tuner_status() change (the
 * daemon sends them as STATUS=): nothing between cycles wakes the loop
 * to say the same thing again. */
void tuner_on_status(struct tuner *t, void (*fn)(void *ud, const char *status), void *ud);

#endif
