/* smbd: the production smbd, seen from outside. */
#include "smbd.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "kernel.h"
#include "parse.h"
#include "smbconf.h"

int smbd_pid(const char *smb_conf, pid_t *pid, struct err *e)
{
    char *dir = NULL, path[4096], *text, comm[64];
    long long v;
    size_t len;
    int r;

    r = smbconf_testparm(smb_conf, "pid directory", &dir, e);
    if (r < 0)
        return r;
    snprintf(path, sizeof(path), "%s/smbd.pid", dir);
    free(dir);
    r = files_read(path, &text, &len, NULL);
    if (r < 0)
        return err_set(e, r == -ENOENT ? -ESRCH : r, "%s: %s", path, strerror(-r));
    text[strcspn(text, "\n")] = '\0';
    r = parse_long(text, 1, 1 << 22, &v);
    free(text);
    if (r < 0)
        return err_set(e, r, "%s: not a process id", path);
    /* a stale pid file may name a process that is not smbd any more */
    if (kernel_proc_comm((pid_t)v, comm, sizeof(comm)) < 0)
        return err_set(e, -ESRCH, "smbd (pid %lld) is not running", v);
    if (strncmp(comm, "smbd", 4) != 0)
        return err_set(e, -ESRCH, "pid %lld is not smbd", v);
    *pid = (pid_t)v;
    return 0;
}

int smbd_ports(const char *smb_conf, int *ports, int *n, struct err *e)
{
    char *v = NULL, *tok, *save = NULL;
    long long p;
    int r;

    *n = 0;
    r = smbconf_testparm(smb_conf, "smb ports", &v, e);
    if (r < 0)
        return r;
    for (tok = strtok_r(v, " \t,", &save); tok && *n < SMBD_MAX_PORTS;
         tok = strtok_r(NULL, " \t,", &save)) {
        /* smbd reads a port with atoi(): `+445` is 445 (and listened on) */
        if (parse_long(tok + (tok[0] == '+'), 1, 65535, &p) == 0)
            ports[(*n)++] = (int)p;
    }
    free(v);
    if (*n == 0)
        return err_set(e, -EINVAL, "%s: no usable 'smb ports'", smb_conf);
    return 0;
}

/* s with case folded and blanks removed, for Samba's name comparison. */
static void squeeze(const char *s, char *out, size_t len)
{
    size_t j = 0;

    for (; *s && j + 1 < len; s++)
        if (!isspace((unsigned char)*s))
            out[j++] = (char)tolower((unsigned char)*s);
    out[j] = '\0';
}

bool smbd_cmdline_overrides(const char *cmdline)
{
    char sq[8192];

    /* --option='socket options=X', --option 'socket options=X', or the
     * short -d-style forms all leave "--option" followed by the name. */
    squeeze(cmdline, sq, sizeof(sq));
    for (const char *p = sq; (p = strstr(p, "--option")) != NULL; p++) {
        const char *q = p + strlen("--option");

        if (*q == '=')
            q++;
        if (strncmp(q, "socketoptions=", strlen("socketoptions=")) == 0)
            return true;
    }
    return false;
}

int smbd_listener_explicit(int port, struct smbd_listener *l, struct err *e)
{
    long rmem[3], wmem[3], accepted;
    struct err ignored;
    int r;

    r = kernel_listener_buffers(port, &l->rcvbuf, &l->sndbuf, e);
    if (r < 0)
        return r;
    r = kernel_sysctl_triple("net/ipv4/tcp_rmem", rmem, e);
    if (r == 0)
        r = kernel_sysctl_triple("net/ipv4/tcp_wmem", wmem, e);
    if (r < 0)
        return r;
    /* An explicit size that happens to equal half the start size would
     * pass for autotuning: for SO_RCVBUF (65536 against tcp_rmem[1] of
     * 131072) it does, and then AUTO is merely assumed to work one
     * restart too early. */
    l->rcv = l->rcvbuf != rmem[1];
    l->snd = l->sndbuf != wmem[1];
    /* SO_SNDBUF=8192, the tuning guides' size, is the one that does: a
     * connection of ours tells them apart, when autotuning can grow at
     * all. A failed test leaves the guess. */
    if (!l->snd && wmem[2] > wmem[1] && kernel_accepted_sndbuf(port, &accepted, &ignored) == 0)
        l->snd = accepted == l->sndbuf;
    return 0;
}
