/* probe_driver: one probe_run with a deadline of any length, for
 * tests/integration/test_probe_recycle.py:
 *
 *   probe_driver URL SIZE DEADLINE_S WORKDIR [CREDENTIALS]
 *
 * prints the result's JSON line. The daemon cuts a trial's deadline to
 * fractions of a second (measure_cut_deadline); the config file and
 * `--probe` take whole seconds only. A test program rather than a hidden
 * smbtuned option: the daemon's command line stays what its users see.
 * Errors go to stderr, exit status 1. */
#include <stdio.h>
#include <stdlib.h>

#include "probe.h"

int main(int argc, char **argv)
{
    struct probe_params p;
    struct probe_result r;
    struct err e = {{0}}, tidy = {{0}};
    char line[4096];
    char *end;

    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: probe_driver URL SIZE DEADLINE_S WORKDIR [CREDENTIALS]\n");
        return 1;
    }
    probe_params_default(&p);
    p.url = argv[1];
    p.size = p.request_size = strtoll(argv[2], &end, 10);
    if (*end != '\0' || p.size <= 0)
        return fprintf(stderr, "probe_driver: bad size %s\n", argv[2]), 1;
    p.deadline_s = strtod(argv[3], &end);
    if (*end != '\0' || !(p.deadline_s > 0))
        return fprintf(stderr, "probe_driver: bad deadline %s\n", argv[3]), 1;
    p.duration_s = 0;
    p.workdir_base = argv[4];
    p.credentials = argc == 6 ? argv[5] : NULL;
    if (probe_run(&p, &r, &tidy, &e) < 0 || probe_result_json(&r, line, sizeof(line)) < 0) {
        fprintf(stderr, "probe_driver: %s\n", e.msg);
        return 1;
    }
    printf("%s\n", line);
    return 0;
}
