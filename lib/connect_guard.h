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

/* The first connection refused, as "ADDRESS port N", or NULL if none.
 * *referred (unless referred is NULL): whether an allowed connection had
 * been attempted before it. A referral comes from a server reached
 * first; a refusal before any connection means libsmbclient found the
 * url's host at another address than the one given to connect_guard_on()
 * (the name's addresses changed in between). */
const char *connect_guard_refused(bool *referred);

#endif
