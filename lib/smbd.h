/* smbd: what the production smbd is doing, as far as smbtuned must know:
 * which process it is, which ports it serves, whether its listener carries
 * explicit buffers, and whether its command line overrides smb.conf. */
#ifndef SMBTUNE_SMBD_H
#define SMBTUNE_SMBD_H

#include <stdbool.h>
#include <sys/types.h>

#include "err.h"

/* `smb ports` beyond this many are not watched (smbd listens on them all;
 * Debian's default is two). */
#define SMBD_MAX_PORTS 32

/* The smbd serving smb_conf: `<pid directory>/smbd.pid`, checked against
 * /proc. -ESRCH when it is not running. */
int smbd_pid(const char *smb_conf, pid_t *pid, struct err *e);

/* `smb ports` of smb_conf, the first SMBD_MAX_PORTS of them, as smbd reads
 * them. */
int smbd_ports(const char *smb_conf, int *ports, int *n, struct err *e);

/* Whether smbd's command line carries --option='socket options=...', which
 * overrides smb.conf: then nothing smbtuned writes takes effect. */
bool smbd_cmdline_overrides(const char *cmdline);

/* What smbd's listener on port hands to new connections. */
struct smbd_listener {
    bool rcv, snd;       /* an explicit size, not autotuning */
    long rcvbuf, sndbuf; /* the kernel's sizes (twice those requested) */
};

/* Whether the listener on port hands explicit buffer sizes to new
 * connections, judged against the autotuning start sizes (tcp_rmem[1],
 * tcp_wmem[1]) that a listener without an explicit size has; at
 * tcp_wmem[1] (SO_SNDBUF=8192 doubled, or autotuning), by a test
 * connection (kernel_accepted_sndbuf). */
int smbd_listener_explicit(int port, struct smbd_listener *l, struct err *e);

#endif
