/* trial_driver: drives lib/trial for tests/integration/test_trial.py.
 *
 *   trial_driver render PROD_CONF RUN_DIR PORT VALUE [OWN_SHARE]
 *       print the shadow config
 *   trial_driver start PROD_CONF BASE_DIR VALUE TIMEOUT [OWN_SHARE]
 *       start a shadow smbd, print {"pid":..,"port":..,"run_dir":..,"conf":..,
 *       "log":..,"share":..} on one line, then stop it when stdin says "stop" or closes
 *   trial_driver sweep BASE_DIR                       remove leftovers
 *
 * A test program rather than a hidden smbtuned option: the daemon's command
 * line stays what its users see. Errors go to stderr, exit status 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"
#include "jsonw.h"

#include "trial.h"

static int fail(const char *what, const struct err *e)
{
    fprintf(stderr, "trial_driver: %s: %s\n", what, e->msg);
    return 1;
}

static int cmd_render(char **argv, const char *own_share)
{
    struct trial_share own = {.dir = own_share, .name = TRIAL_OWN_SHARE "-test"};
    struct err e = {{0}};
    long long port;
    char *text;

    if (parse_long(argv[2], 1, 65535, &port) < 0) {
        fprintf(stderr, "trial_driver: bad port %s\n", argv[2]);
        return 2;
    }
    if (trial_shadow_render(argv[0], argv[1], (int)port, argv[3], own_share ? &own : NULL, &text,
                            &e) < 0)
        return fail("render", &e);
    fputs(text, stdout);
    free(text);
    return 0;
}

static int cmd_start(char **argv, const char *own_share)
{
    struct trial_shadow t;
    struct err e = {{0}};
    char line[64];
    long long timeout;

    if (parse_long(argv[3], 1, 600, &timeout) < 0) {
        fprintf(stderr, "trial_driver: bad timeout %s\n", argv[3]);
        return 2;
    }
    if (trial_shadow_start(argv[0], argv[1], argv[2], own_share, (double)timeout, &t, &e) < 0)
        return fail("start", &e);
    printf("{\"pid\": %d, \"port\": %d, \"run_dir\": ", (int)t.pid, t.port);
    jsonw_string(stdout, t.run_dir);
    fputs(", \"conf\": ", stdout);
    jsonw_string(stdout, t.conf);
    fputs(", \"log\": ", stdout);
    jsonw_string(stdout, t.log);
    fputs(", \"share\": ", stdout);
    jsonw_string(stdout, t.share);
    fputs("}\n", stdout);
    fflush(stdout);
    /* Until told to stop, or until the test closes our stdin. */
    while (fgets(line, sizeof(line), stdin) != NULL && strcmp(line, "stop\n") != 0)
        ;
    if (trial_shadow_stop(&t, &e) < 0)
        return fail("stop", &e);
    puts("stopped");
    return 0;
}

static int cmd_sweep(char **argv)
{
    struct err e = {{0}};

    if (trial_shadow_sweep(argv[0], &e) < 0)
        return fail("sweep", &e);
    return 0;
}

int main(int argc, char **argv)
{
    const char *own_share = argc == 7 ? argv[6] : NULL;

    if ((argc == 6 || argc == 7) && strcmp(argv[1], "render") == 0)
        return cmd_render(argv + 2, own_share);
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "start") == 0)
        return cmd_start(argv + 2, own_share);
    if (argc == 3 && strcmp(argv[1], "sweep") == 0)
        return cmd_sweep(argv + 2);
    fprintf(stderr, "usage: trial_driver render PROD_CONF RUN_DIR PORT VALUE [OWN_SHARE]\n"
                    "       trial_driver start PROD_CONF BASE_DIR VALUE TIMEOUT_S [OWN_SHARE]\n"
                    "       trial_driver sweep BASE_DIR\n");
    return 2;
}
