/* connect_guard: see connect_guard.h. */
#include "connect_guard.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* More addresses than a name has in practice; the ones beyond are not
 * allowed. */
#define GUARD_MAX_ADDRS 32

static struct {
    bool on;
    int n;
    struct sockaddr_storage addr[GUARD_MAX_ADDRS];
    unsigned ports[2];
    char refused[INET6_ADDRSTRLEN + 16];
    struct sockaddr_storage refused_sa; /* its address, ss_family 0 none */
} guard;

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static connect_fn real_connect(void)
{
    static connect_fn next;
    connect_fn f = __atomic_load_n(&next, __ATOMIC_ACQUIRE);

    if (f == NULL) {
        /* POSIX: a function's address from dlsym goes through a void *. */
        *(void **)&f = dlsym(RTLD_NEXT, "connect");
        __atomic_store_n(&next, f, __ATOMIC_RELEASE);
    }
    return f;
}

static bool same_host(const struct sockaddr *sa, const struct sockaddr_storage *ok)
{
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;
    const struct sockaddr_in6 *ok6 = (const struct sockaddr_in6 *)ok;

    if (sa->sa_family != ok->ss_family)
        return false;
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)ok)->sin_addr.s_addr;
    /* A link-local address names a host on one link only (its scope is
     * the interface): fe80::1 on another interface is another host. For
     * other addresses getaddrinfo() gives scope 0 on both sides. */
    return memcmp(&a6->sin6_addr, &ok6->sin6_addr, sizeof(struct in6_addr)) == 0 &&
           a6->sin6_scope_id == ok6->sin6_scope_id;
}

static bool allowed(const struct sockaddr *sa, socklen_t len)
{
    unsigned port;
    int i;

    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
        port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6))
        port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    else
        return false;
    if (port != guard.ports[0] && port != guard.ports[1])
        return false;
    for (i = 0; i < guard.n; i++)
        if (same_host(sa, &guard.addr[i]))
            return true;
    return false;
}

static void note_refused(const struct sockaddr *sa, socklen_t len)
{
    char a[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;

    if (guard.refused[0] != '\0')
        return;
    if (len <= (socklen_t)sizeof(guard.refused_sa))
        memcpy(&guard.refused_sa, sa, len);
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a, sizeof(a));
        port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    } else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, a, sizeof(a));
        port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    }
    snprintf(guard.refused, sizeof(guard.refused), "%s port %u", a, port);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
    connect_fn f;

    if (guard.on && sa != NULL && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6)) {
        if (!allowed(sa, len)) {
            note_refused(sa, len);
            errno = EACCES;
            return -1;
        }
    }
    f = real_connect();
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return f(fd, sa, len);
}

int connect_guard_on(const struct addrinfo *ai, unsigned port)
{
    void *seen = dlsym(RTLD_DEFAULT, "connect");

    /* The libraries loaded later bind to what RTLD_DEFAULT finds: without
     * the export, the C library's connect(), which guards nothing. */
    if (seen != (void *)connect || real_connect() == NULL)
        return -ENOSYS;
    guard.n = 0;
    for (; ai != NULL && guard.n < GUARD_MAX_ADDRS; ai = ai->ai_next)
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
            ai->ai_addrlen <= sizeof(guard.addr[0]))
            memcpy(&guard.addr[guard.n++], ai->ai_addr, ai->ai_addrlen);
    guard.ports[0] = port ? port : 445;
    guard.ports[1] = port ? port : 139;
    guard.refused[0] = '\0';
    memset(&guard.refused_sa, 0, sizeof(guard.refused_sa));
    guard.on = true;
    return 0;
}

const char *connect_guard_refused(void)
{
    return guard.refused[0] ? guard.refused : NULL;
}

bool connect_guard_refused_among(const struct addrinfo *ai)
{
    for (; ai != NULL; ai = ai->ai_next) {
        struct sockaddr_storage a;

        if (guard.refused_sa.ss_family == 0 || ai->ai_addrlen > sizeof(a))
            continue;
        memset(&a, 0, sizeof(a));
        memcpy(&a, ai->ai_addr, ai->ai_addrlen);
        if (same_host((const struct sockaddr *)&guard.refused_sa, &a))
            return true;
    }
    return false;
}
