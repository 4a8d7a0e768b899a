/* connect_guard: the probe child's TCP connections go to the url's host
 * and port only.
 *
 * libsmbclient follows DFS: an msdfs link in the share (or in the probe's
 * directory) and an `msdfs proxy` share send it to another server, where
 * it logs on with the probe's user and password (an NTLM logon that server
 * can relay or crack) and runs the measurement there. It does so without
 * calling the auth function again (Samba 4.17: SMBC_server_internal keeps
 * the user and password for a proxy; cli_resolve_path uses the context's
 * credentials for a link), so nothing in its API can refuse it. What can:
 * its connect() calls. This module defines connect() for the whole
 * executable, which exports it (-Wl,--export-dynamic-symbol=connect, in
 * libsmbtune_dep); the Samba libraries loaded with libsmbclient bind to it
 * ahead of the C library's. Off, it is the C library's connect(); on (in
 * the probe child only), it refuses an IPv4 or IPv6 connection to any
 * other address or port before a byte leaves.
 */
#ifndef SMBTUNE_CONNECT_GUARD_H
#define SMBTUNE_CONNECT_GUARD_H

#include <netdb.h>
#include <stdbool.h>

/* Allow only the addresses of ai (a getaddrinfo() list) at port, or, with
 * port 0 (a URL without one), at libsmbclient's defaults 445 and 139.
 * For this process, from now on: 0, or -errno (-ENOSYS when the libraries
 * would not call our connect(), so that the guard would not hold). */
int connect_guard_on(const struct addrinfo *ai, unsigned port);

/* The first connection refused, as "ADDRESS port N", or NULL if none. */
const char *connect_guard_refused(void);

/* Is the address of the first connection refused (any port) among ai's?
 * With ai a fresh look-up of the url's host after a refusal: true says
 * libsmbclient's own look-up found the host there (the name's addresses
 * changed since the ones given to connect_guard_on()), false that the
 * server sent the probe elsewhere (a DFS referral). */
bool connect_guard_refused_among(const struct addrinfo *ai);

#endif
