/* measure: one probe (lib/probe.h) as sources of the sd-event loop: its
 * child's pipe, its deadline, and the removal of the file a killed probe
 * leaves in the share. */
#ifndef SMBTUNED_MEASURE_H
#define SMBTUNED_MEASURE_H

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "probe.h"
#include "search.h"

struct measure;

/* r: 0 with the result (its outcome may be a failure or a timeout), or
 * -errno when there is none; why says why then. */
typedef void (*measure_fn)(void *ud, int r, const struct probe_result *res, const char *why);

int measure_new(sd_event *ev, struct measure **mp);
void measure_free(struct measure *m); /* kills a probe under way */

/* Start a probe with p (its strings are copied by probe_start). done is
 * called from the loop once it ends or its deadline passes. */
int measure_start(struct measure *m, const struct probe_params *p, measure_fn done, void *ud);

/* Kill the probe under way, if any, without calling done. */
void measure_kill(struct measure *m);

/* A killed or failed probe's file is removed by a clean-up child, never
 * by a measurement (probe_child.c says why): at the end of a cycle, or at
 * a stop, remove what is owed (with p's target). In a job when wait is
 * false, in place when true. */
void measure_tidy(struct measure *m, const struct probe_params *p, bool wait);

/* Have the next tidy look for a leftover file (a killed predecessor's). */
void measure_dirty(struct measure *m);

bool measure_running(const struct measure *m);

/* The search's sample of a probe's result: the rates, and a timeout in
 * the write half (the writing had not ended) leaves the read unmeasured;
 * one in the read half makes the read a lower bound. */
void measure_sample(const struct probe_result *r, struct search_sample *x);

/* A trial far below the incumbent ends at its deadline: the time the
 * incumbent would need at the rates below which a sample ends its trial
 * (search_abort_rates: MB/s, 0 when none); with a duration, three times
 * it. Shortens p->deadline_s to it; returns whether it did. */
bool measure_cut_deadline(struct probe_params *p, double write_min, double read_min);

#endif
