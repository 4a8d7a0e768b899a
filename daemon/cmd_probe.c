/* --probe: one throughput measurement, printed.
 *
 * Exit status (a script must not take a timeout's lower bounds, or the
 * zeros of a failure, for a measurement):
 *   0  ok: both rates measured
 *   1  failed: nothing measured (the outcome says why; a configuration,
 *      URL or credentials file that is refused gives outcome "error")
 *   2  timeout: the deadline passed; the rates are lower bounds
 * With --json the object is printed in every case. A refused config is 1
 * here too, not CMD_EXIT_CONFIG: the probe's table is its own (cmd.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "config.h"
#include "probe.h"

static void print_json_failure(void)
{
    struct probe_result r;
    char line[1024];

    memset(&r, 0, sizeof(r));
    r.outcome = PROBE_ERROR;
    r.client_rcvbuf = r.client_sndbuf = -1;
    if (probe_result_json(&r, line, sizeof(line)) == 0)
        printf("%s\n", line);
}

/* A failure before any measurement (bad configuration, bad URL, a
 * credentials file that is refused): one line on stderr, and with --json
 * still one object on stdout, so that a script always has a line to read. */
static int setup_failure(const struct opts *o, const char *what, const char *msg)
{
    fprintf(stderr, "smbtuned: probe%s%s: %s\n", what[0] ? " " : "", what, msg);
    if (o->json)
        print_json_failure();
    return CMD_EXIT_FAILURE;
}

/* The end of a direction's line: what its rate leaves out as TCP's
 * start-up and as the calls' waits for their last answers, if anything. */
static void left_out(long long bytes, double s, double wait_s)
{
    if (s > 0)
        printf("; the first %lld bytes, %.3f s, are TCP's start-up, not in the rate", bytes, s);
    if (wait_s > 0)
        printf("; nor %.3f s of waits for the calls' last answers", wait_s);
    printf(")\n");
}

int cmd_probe(const struct opts *o)
{
    struct config cfg;
    struct tuner_opts t;
    struct probe_params p;
    struct probe_result r;
    struct err e = {{0}}, tidy = {{0}};
    int ret;

    /* Until the URL has been checked it is not shown: it may carry a
     * password (url_parse's messages quote it only when it cannot). */
    ret = cmd_load_config(o, &cfg, &e);
    if (ret < 0)
        return setup_failure(o, "", e.msg);
    /* The probe's parameters as the daemon's cycles get them. */
    ret = cmd_fill(&cfg, &t, &e);
    if (ret < 0)
        return setup_failure(o, "", e.msg);
    /* The daemon's own share (no url) is served by its shadow smbds only,
     * during a cycle: there is nothing to measure on its own. */
    if (t.own_share)
        return setup_failure(o, "",
                             "no url: give --url smb://host/share or set url in the probe section "
                             "of the config file (with none, only the daemon's cycles measure, "
                             "on a share of their own)");
    p = t.probe;

    ret = probe_run(&p, &r, &tidy, &e);
    if (ret < 0)
        return setup_failure(o, p.url, e.msg);
    /* a killed probe's file left in the share: said, not the outcome */
    if (tidy.msg[0] != '\0')
        fprintf(stderr, "smbtuned: probe: warning: removing killed probes' files: %s\n", tidy.msg);

    if (o->json) {
        char line[1024];

        if (probe_result_json(&r, line, sizeof(line)) == 0)
            printf("%s\n", line);
    } else {
        printf("%s: %s\n", p.url, probe_outcome_name(r.outcome));
        printf("  write: %.2f MB/s (%lld bytes in %.3f s", r.write_mbps, r.write_bytes, r.write_s);
        left_out(r.write_startup_bytes, r.write_startup_s, r.write_wait_s);
        if (r.write_pace_bps > 0)
            printf("  (the writes paced at most %.2f MB/s, twice the fastest request's rate)\n",
                   (double)r.write_pace_bps / 1e6);
        printf("  read:  %.2f MB/s (%lld bytes in %.3f s", r.read_mbps, r.read_bytes, r.read_s);
        left_out(r.read_startup_bytes, r.read_startup_s, r.read_wait_s);
        if (r.outcome == PROBE_TIMEOUT)
            printf("  (timeout: %s; the rates are lower bounds)\n", r.cause);
        /* a name or address of this machine measures loopback too */
        if (r.loopback)
            printf("  (on this machine's loopback: not a client's path over the network)\n");
    }
    fflush(stdout);
    {
        char note[1024];

        /* one sample here: said once */
        if (probe_recycle_text(p.url, &r, note, sizeof(note)) == 0)
            fprintf(stderr, "smbtuned: probe: warning: %s\n", note);
    }
    if (r.outcome == PROBE_OK)
        return 0;
    fprintf(stderr, "smbtuned: probe %s: %s: %s\n", p.url, probe_outcome_name(r.outcome),
            r.cause[0] ? r.cause : "no detail");
    return r.outcome == PROBE_TIMEOUT ? CMD_EXIT_PROBE_TIMEOUT : CMD_EXIT_FAILURE;
}
