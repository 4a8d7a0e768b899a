/* --probe: one throughput measurement, printed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "config.h"
#include "probe.h"

static void print_json_failure(void)
{
    struct probe_result r;
    char line[512];

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
    return 1;
}

int cmd_probe(const struct opts *o)
{
    struct config cfg;
    struct probe_params p;
    struct probe_creds creds;
    struct probe_result r;
    struct err e = {{0}};
    const char *cred_path;
    int ret;

    ret = config_load(o->config_file, &cfg, &e);
    /* The default config file may be absent: the built-in defaults and the
     * command line are enough then. A file given with -c must exist. */
    if (ret == -ENOENT && !o->config_given)
        config_defaults(&cfg);
    else if (ret < 0)
        return setup_failure(o, "", e.msg);

    probe_params_default(&p);
    p.url = o->url ? o->url : cfg.probe.url;
    p.directory = cfg.probe.directory[0] ? cfg.probe.directory : NULL;
    p.size = cfg.probe.size;
    p.request_size = cfg.probe.request_size;
    p.deadline_s = (double)cfg.probe.deadline_s;
    p.socket_options = cfg.probe.socket_options;
    if (p.url[0] == '\0')
        return setup_failure(o, "",
                             "no URL: give --url smb://host/share or set url in the "
                             "probe section of the config file");

    cred_path = o->credentials ? o->credentials : cfg.probe.credentials;
    if (cred_path[0] != '\0') {
        ret = probe_load_credentials(cred_path, 0, &creds, &e);
        if (ret < 0)
            return setup_failure(o, p.url, e.msg);
        p.creds = &creds;
    }

    ret = probe_run(&p, &r, &e);
    if (p.creds != NULL)
        probe_creds_clear(&creds);
    if (ret < 0)
        return setup_failure(o, p.url, e.msg);

    if (o->json) {
        char line[512];

        if (probe_result_json(&r, line, sizeof(line)) == 0)
            printf("%s\n", line);
    } else {
        printf("%s: %s\n", p.url, probe_outcome_name(r.outcome));
        printf("  write: %.2f MB/s (%lld bytes in %.3f s)\n", r.write_mbps, r.write_bytes,
               r.write_s);
        printf("  read:  %.2f MB/s (%lld bytes in %.3f s)\n", r.read_mbps, r.read_bytes, r.read_s);
        if (r.outcome == PROBE_TIMEOUT)
            printf("  (timeout: %s; the rates are lower bounds)\n", r.cause);
    }
    fflush(stdout);
    if (r.outcome == PROBE_OK || r.outcome == PROBE_TIMEOUT)
        return 0;
    fprintf(stderr, "smbtuned: probe %s: %s: %s\n", p.url, probe_outcome_name(r.outcome),
            r.cause[0] ? r.cause : "no detail");
    return 1;
}
