/* netaddr: see netaddr.h. */
#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

bool netaddr_loopback(const struct sockaddr *sa)
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

        /* an IPv6 socket reaches 127.0.0.1 as ::ffff:127.0.0.1 */
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

bool netaddr_same_host(const struct sockaddr *self, const struct sockaddr *peer)
{
    if (self == NULL || peer == NULL)
        return false;
    if (netaddr_loopback(peer))
        return true;
    /* Both ends of one connection are of one family (an IPv6 socket
     * speaking IPv4 has v4-mapped addresses at both ends, compared as
     * IPv6 ones). */
    if (self->sa_family != peer->sa_family)
        return false;
    if (peer->sa_family == AF_INET)
        return ((const struct sockaddr_in *)self)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)peer)->sin_addr.s_addr;
    if (peer->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)self)->sin6_addr,
                      &((const struct sockaddr_in6 *)peer)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return false;
}

int netaddr_fd_same_host(int fd)
{
    struct sockaddr_storage self, peer;
    socklen_t sl = sizeof(self), pl = sizeof(peer);

    memset(&self, 0, sizeof(self));
    memset(&peer, 0, sizeof(peer));
    if (getsockname(fd, (struct sockaddr *)&self, &sl) < 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
        return -errno;
    return netaddr_same_host((const struct sockaddr *)&self, (const struct sockaddr *)&peer);
}
