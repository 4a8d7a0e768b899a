/* smbtuned: command line. Each command lives in its own file (cmd.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "config.h"

#define DEFAULT_SMB_CONF "/etc/samba/smb.conf"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: smbtuned --smb-conf FILE --show [--json]\n"
            "       smbtuned --smb-conf FILE --set-buffers RCV,SND [--expect VALUE]\n"
            "                [--state-dir DIR] [--apply smbcontrol|none]\n"
            "       smbtuned --probe [-c FILE] [--url URL] [--credentials FILE] [--json]\n"
            "\n"
            "  --show              print the socket options in force, where they come from,\n"
            "                      and the buffer sizes they set\n"
            "  --set-buffers R,S   set SO_RCVBUF and SO_SNDBUF: a size (262144, 256K, 1M)\n"
            "                      or 'auto' (no explicit size: kernel autotuning)\n"
            "  --expect VALUE      change nothing unless socket options is VALUE now\n"
            "  --apply METHOD      tell smbd after a change (default: none)\n"
            "  --state-dir DIR     backups and the lock (default %s)\n"
            "  --smb-conf FILE     default %s\n",
            SMBTUNED_STATE_DIR, DEFAULT_SMB_CONF);
}

enum {
    OPT_SMB_CONF = 256,
    OPT_STATE_DIR,
    OPT_SET_BUFFERS,
    OPT_APPLY,
    OPT_URL,
    OPT_CREDENTIALS,
    OPT_EXPECT,
    OPT_JSON,
    OPT_SHOW,
    OPT_PROBE,
    OPT_VERSION,
};

static const struct option longopts[] = {
    {"config", required_argument, NULL, 'c'},
    {"smb-conf", required_argument, NULL, OPT_SMB_CONF},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"set-buffers", required_argument, NULL, OPT_SET_BUFFERS},
    {"apply", required_argument, NULL, OPT_APPLY},
    {"url", required_argument, NULL, OPT_URL},
    {"credentials", required_argument, NULL, OPT_CREDENTIALS},
    {"expect", required_argument, NULL, OPT_EXPECT},
    {"json", no_argument, NULL, OPT_JSON},
    {"show", no_argument, NULL, OPT_SHOW},
    {"probe", no_argument, NULL, OPT_PROBE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
    struct opts o = {
        .config_file = SMBTUNED_CONF,
        .smb_conf = DEFAULT_SMB_CONF,
        .state_dir = SMBTUNED_STATE_DIR,
    };
    int ch, ncmd;

    while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            o.config_file = optarg;
            o.config_given = true;
            break;
        case OPT_SMB_CONF:
            o.smb_conf = optarg;
            break;
        case OPT_STATE_DIR:
            o.state_dir = optarg;
            break;
        case OPT_SET_BUFFERS:
            o.set_buffers = optarg;
            break;
        case OPT_APPLY:
            o.apply = optarg;
            break;
        case OPT_URL:
            o.url = optarg;
            break;
        case OPT_CREDENTIALS:
            o.credentials = optarg;
            break;
        case OPT_EXPECT:
            o.expect = optarg;
            break;
        case OPT_JSON:
            o.json = true;
            break;
        case OPT_SHOW:
            o.show = true;
            break;
        case OPT_PROBE:
            o.probe = true;
            break;
        case OPT_VERSION:
            printf("smbtuned %s\n", SMBTUNED_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "smbtuned: unexpected argument '%s'\n", argv[optind]);
        return 1;
    }
    ncmd = (o.show ? 1 : 0) + (o.set_buffers ? 1 : 0) + (o.probe ? 1 : 0);
    if (ncmd != 1) {
        fprintf(stderr, "smbtuned: give exactly one of --show, --set-buffers, --probe "
                        "(see --help)\n");
        return 1;
    }
    if (o.show)
        return cmd_show(&o);
    if (o.set_buffers)
        return cmd_set_buffers(&o);
    return cmd_probe(&o);
}
