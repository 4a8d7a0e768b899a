/* conns: smbd's established TCP connections as sock_diag shows them
 * (INET_DIAG_INFO + INET_DIAG_SKMEMINFO), one snapshot at a time, as the
 * struct clients_sock that lib/clients judges. The I/O edge of issue 13's
 * --clients; the parsing of one message is pure and tested apart. */
#ifndef SMBTUNE_CONNS_H
#define SMBTUNE_CONNS_H

#include <stddef.h>

#include "clients.h"
#include "err.h"

struct inet_diag_msg;

/* The established connections whose local port is one of ports, IPv4 and
 * IPv6 (the first CLIENTS_TRACK_MAX of them), malloc'ed into *v (NULL
 * when there are none). The reason in e
 * when sock_diag is not there or refuses. */
int conns_read(const int *ports, int nports, struct clients_sock **v, size_t *n, struct err *e);

/* How many TCP sockets (IPv4 and IPv6) listen on ports, into *n: 0 says
 * that no smbd serves them in this network namespace, which "no
 * connection" alone does not. */
int conns_listening(const int *ports, int nports, int *n, struct err *e);

/* Pure: one sock_diag answer (m and its attributes, len bytes in all) to
 * s. A tcp_info shorter than this build's (an older kernel) is copied
 * into a zeroed struct as far as it goes and s->have says which figures
 * came; what is missing is estimated where it can be (see conns.c).
 * -EINVAL when m is too short or carries no tcp_info. */
int conns_parse(const struct inet_diag_msg *m, size_t len, struct clients_sock *s);

#endif
