/* netaddr: whether an address, or a TCP connection, stays on this machine.
 *
 * A connection to one of this machine's own addresses runs over the
 * loopback device, whatever name or address the url gives it
 * (`url = smb://fileserver/share` on fileserver itself): its rates are
 * loopback's, not a network path's. The probe child asks this of the
 * socket libsmbclient connected (probe_child.c), after its own look-up:
 * the daemon's loop resolves no name. */
#ifndef SMBTUNED_NETADDR_H
#define SMBTUNED_NETADDR_H

#include <stdbool.h>
#include <sys/socket.h>

/* Whether sa is a loopback address: 127.0.0.0/8 (all of it, not only
 * 127.0.0.1), ::1, or an IPv4-mapped 127.x. Any other family: false.
 * Pure. */
bool netaddr_loopback(const struct sockaddr *sa);

/* Whether a TCP connection whose own end is `self` and whose peer is
 * `peer` (getsockname, getpeername) stays on this machine: the peer is a
 * loopback address, or both ends have the same address. The second is
 * how Linux picks the source of a connection to a local address that was
 * not bound first (the local route's preferred source is the address
 * itself; for IPv6, source selection's first rule): a peer on a local
 * interface, dummy or physical, answers from that same address. Ports
 * and IPv6 scope ids are not compared. NULL or another family: false.
 * Pure. */
bool netaddr_same_host(const struct sockaddr *self, const struct sockaddr *peer);

/* netaddr_same_host of a connected socket's two ends: 1 or 0, or
 * -errno when either end cannot be read (not connected: -ENOTCONN). */
int netaddr_fd_same_host(int fd);

#endif
