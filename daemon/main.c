/* smbtuned: command line. Each command lives in its own file (cmd.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "build.h"
#include "journal.h"

#define DEFAULT_SMB_CONF "/etc/samba/smb.conf"

/* Every option, in the order of smbtuned(8); a test holds the two to each
 * other (tests/integration/test_unit.py). */
static void usage(FILE *f)
{
    fprintf(f,
            "usage: smbtuned [-c FILE] [--once [--dry-run] [--json]] [options]\n"
            "       smbtuned -t [-c FILE]      check the configuration files and exit\n"
            "       smbtuned --resume [-c FILE]  tune again after an edit by hand\n"
            "       smbtuned --status [-c FILE] [--json]\n"
            "                                  what is in force, since when, the last and\n"
            "                                  next cycle, a hold\n"
            "       smbtuned --probe [-c FILE] [--url URL] [--credentials FILE] [--json]\n"
            "       smbtuned --clients [-c FILE] [--json] [--smb-conf FILE] [--seconds N]\n"
            "       smbtuned [-c FILE] [--smb-conf FILE] --show [--json]\n"
            "       smbtuned [-c FILE] [--smb-conf FILE] --set-buffers RCV,SND [--expect VALUE]\n"
            "                (smb.conf: the config's smb_conf, %s unless set)\n"
            "\n"
            "Without a command: the daemon, one tuning cycle every `interval'.\n"
            "\n"
            "Commands:\n"
            "  --once              one tuning cycle in the foreground, then a\n"
            "                      before/after table\n"
            "  -t                  check the config file, smb.conf and the credentials\n"
            "                      file, then exit\n"
            "  --resume            hand control back after a hold (an edit by hand,\n"
            "                      a damaged state file)\n"
            "  --status            the line in force and whether smbtuned wrote it, its\n"
            "                      rates, the last and the next cycle, a hold, a pending\n"
            "                      step, what the baseline was measured on (reads only)\n"
            "  --probe             one measurement; exit 0 ok, 1 failed, 2 timeout (the\n"
            "                      rates are lower bounds)\n"
            "  --clients           smbd's connections, observed for --seconds (as root):\n"
            "                      round trip, buffers, rates, and what limits each (the\n"
            "                      send buffer, the receive buffer, the client's window,\n"
            "                      smbd's own reading, the network, idle)\n"
            "  --show              print the socket options in force, where they come from,\n"
            "                      and the buffer sizes they set\n"
            "  --set-buffers R,S   set SO_RCVBUF and SO_SNDBUF: a size (262144, 256K, 1M)\n"
            "                      or 'auto' (no explicit size: kernel autotuning)\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE   the config file (default %s)\n"
            "  --smb-conf FILE     the smb.conf to tune or edit (default %s)\n"
            "  --state-dir DIR     state, backups, the lock, the probe's work directories\n"
            "                      (default %s)\n"
            "  --url URL           the probe's target, smb://host[:port]/share[/dir]\n"
            "  --credentials FILE  the probe's logon (smbclient -A format; root's, 0600)\n"
            "  --mode tune|advise  advise: measure and report, write no value into smb.conf\n"
            "  --trials WHERE      shadow: a private smbd per candidate (local target)\n"
            "                      client: the probe's own socket (peer target)\n"
            "                      live: smb.conf itself (reaches every client)\n"
            "                      auto: shadow with no url or a loopback url\n"
            "                      (127.0.0.0/8, ::1, localhost), else client\n"
            "  --apply METHOD      smbcontrol, signal, systemd or none: how smbd is told of\n"
            "                      a change (--set-buffers: none; the daemon: smbcontrol)\n"
            "  --dry-run           with --once: an advise cycle; its end writes neither\n"
            "                      smb.conf nor the state file\n"
            "  --expect VALUE      with --set-buffers: change nothing unless socket\n"
            "                      options is VALUE now\n"
            "  --seconds N         with --clients: how long to observe (default 2)\n"
            "  --json              --once, --probe, --show, --status, --clients: one JSON\n"
            "                      object on stdout\n"
            "  -d, --debug         log debug detail too\n"
            "  -V, --version       print the version and exit\n"
            "  -h, --help          print this and exit\n"
            "\n"
            "\n"
            "Exit status: 0 ok, 1 a failure (a cycle, a measurement, an edit; --once: a hold),\n"
            "2 --probe's timeout, 64 a bad command line, 78 a bad configuration.\n"
            "See smbtuned(8) and smbtuned.conf(5).\n",
            DEFAULT_SMB_CONF, SMBTUNED_CONF, DEFAULT_SMB_CONF, SMBTUNED_STATE_DIR);
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
    OPT_MODE,
    OPT_TRIALS,
    OPT_ONCE,
    OPT_DRY_RUN,
    OPT_RESUME,
    OPT_STATUS,
    OPT_CLIENTS,
    OPT_SECONDS,
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
    {"mode", required_argument, NULL, OPT_MODE},
    {"trials", required_argument, NULL, OPT_TRIALS},
    {"once", no_argument, NULL, OPT_ONCE},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"status", no_argument, NULL, OPT_STATUS},
    {"clients", no_argument, NULL, OPT_CLIENTS},
    {"seconds", required_argument, NULL, OPT_SECONDS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"debug", no_argument, NULL, 'd'},
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

    /* Before anything logs: the journal, a terminal or a pipe (journal.h). */
    journal_init();
    while ((ch = getopt_long(argc, argv, "c:dhtV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            o.config_file = optarg;
            o.config_given = true;
            break;
        case OPT_SMB_CONF:
            o.smb_conf = optarg;
            o.smb_conf_given = true;
            break;
        case OPT_STATE_DIR:
            o.state_dir = optarg;
            o.state_dir_given = true;
            break;
        case OPT_MODE:
            o.mode = optarg;
            break;
        case OPT_TRIALS:
            o.trials = optarg;
            break;
        case OPT_ONCE:
            o.once = true;
            break;
        case OPT_DRY_RUN:
            o.dry_run = true;
            break;
        case OPT_RESUME:
            o.resume = true;
            break;
        case OPT_STATUS:
            o.status = true;
            break;
        case OPT_CLIENTS:
            o.clients = true;
            break;
        case OPT_SECONDS:
            o.seconds = optarg;
            break;
        case 't':
            o.check = true;
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
        case 'V':
            printf("smbtuned %s\n", SMBTUNED_VERSION);
            return 0;
        case 'd':
            journal_set_debug(true);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return CMD_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "smbtuned: unexpected argument '%s'\n", argv[optind]);
        return CMD_EXIT_USAGE;
    }
    ncmd = (o.show ? 1 : 0) + (o.set_buffers ? 1 : 0) + (o.probe ? 1 : 0) + (o.check ? 1 : 0) +
           (o.resume ? 1 : 0) + (o.status ? 1 : 0) + (o.clients ? 1 : 0);
    if (ncmd > 1 || (ncmd == 1 && o.once)) {
        fprintf(stderr, "smbtuned: give at most one of --show, --set-buffers, --probe, -t, "
                        "--resume, --status, --clients, --once (see --help)\n");
        return CMD_EXIT_USAGE;
    }
    if (o.seconds && !o.clients) {
        fprintf(stderr, "smbtuned: --seconds goes with --clients\n");
        return CMD_EXIT_USAGE;
    }
    if (o.dry_run && !o.once) {
        fprintf(stderr, "smbtuned: --dry-run goes with --once\n");
        return CMD_EXIT_USAGE;
    }
    /* An option its command does not read is a mistake to say, not to
     * pass over: `--expect` left on a --show would read as checked. */
    if (o.expect && !o.set_buffers) {
        fprintf(stderr, "smbtuned: --expect goes with --set-buffers\n");
        return CMD_EXIT_USAGE;
    }
    if (o.json && !(o.once || o.status || o.probe || o.clients || o.show)) {
        fprintf(stderr,
                "smbtuned: --json goes with --once, --status, --probe, --clients or --show\n");
        return CMD_EXIT_USAGE;
    }
    journal_log(LOG_DEBUG, "smbtuned %s, config file %s%s", SMBTUNED_VERSION, o.config_file,
                o.config_given ? "" : " (the default; its absence means the built-in defaults)");
    if (o.show)
        return cmd_show(&o);
    if (o.set_buffers)
        return cmd_set_buffers(&o);
    if (o.probe)
        return cmd_probe(&o);
    if (o.check)
        return cmd_check(&o);
    if (o.resume)
        return cmd_resume(&o);
    if (o.status)
        return cmd_status(&o);
    if (o.clients)
        return cmd_clients(&o);
    return cmd_run(&o);
}
