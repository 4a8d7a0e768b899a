/* url: the SMB URL grammar (see url.h). */
#include "url.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "netaddr.h"
#include "parse.h"

#define SCHEME "smb://"
#define IPV6_LITERAL_SUFFIX ".ipv6-literal.net"

/* Characters that have a meaning of their own in a URL or that would make
 * the path ambiguous; a share or directory name with them is refused
 * rather than guessed at. '%' among them: libsmbclient decodes "%2e%2e"
 * in a URL as "..", and "%5c" as a backslash (SMBC_parse_path), so what it
 * would be asked for is not what was checked here. The one '%' of a
 * bracketed host, before its zone, is parse_host()'s to allow. */
#define URL_RESERVED "?#@\\\"<>%"

static bool url_char_ok(char ch)
{
    return isprint((unsigned char)ch) && ch != ' ' && !strchr(URL_RESERVED, ch);
}

/* The length of the UTF-8 sequence of one character at s (at most n
 * bytes), or 0 when it is none: a stray or missing continuation byte, an
 * overlong form, a surrogate, past U+10FFFF, or a C1 control. */
static size_t utf8_char(const unsigned char *s, size_t n)
{
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
    unsigned long cp;

    if (len == 0 || len > n || s[0] > 0xf4)
        return 0;
    cp = s[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp < 0xa0)
        return 0;
    return len;
}

/* A share or directory name (one segment of n bytes): printable ASCII but
 * what URLs reserve, inner spaces (share names such as "Public Files" are
 * common; libsmbclient takes them as written), and UTF-8 text. The offset
 * of the first byte that is not so, or n. A space at either end is
 * refused: which name was meant is not clear. */
static size_t name_bad_at(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        const unsigned char c = (unsigned char)s[i];
        size_t len = c >= 0x80 ? utf8_char((const unsigned char *)s + i, n - i) : 1;

        if (len == 0 || (c < 0x80 && !url_char_ok((char)c) && !(c == ' ' && i > 0 && i < n - 1)))
            return i;
        i += len;
    }
    return n;
}

/* Why the byte at s is refused in a name, for a message. */
static void name_bad_why(const char *s, char *buf, size_t len)
{
    const unsigned char c = (unsigned char)*s;

    if (c == ' ')
        snprintf(buf, len, "a space at its start or end");
    else if (c >= 0x80)
        snprintf(buf, len, "a byte that is not UTF-8 text (0x%02x)", c);
    else if (isprint(c))
        snprintf(buf, len, "'%c', which URLs reserve", c);
    else
        snprintf(buf, len, "a control character (0x%02x)", c);
}

int url_check_directory(const char *s, struct err *e)
{
    const char *seg = s;

    if (s[0] == '/')
        return err_set(e, -EINVAL, "directory '%s' must be relative to the share", s);
    while (*seg != '\0') {
        size_t n = strcspn(seg, "/");
        size_t i;

        if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return err_set(e, -EINVAL, "directory '%s' may not contain '.' or '..'", s);
        if ((i = name_bad_at(seg, n)) < n) {
            char why[64];

            name_bad_why(seg + i, why, sizeof(why));
            return err_set(e, -EINVAL, "directory '%s' contains %s", s, why);
        }
        seg += n;
        if (*seg == '/')
            seg++;
    }
    return 0;
}

/* Append the path segments of src (dropping empty ones) to dst. */
static int join_segments(char *dst, size_t len, const char *src, struct err *e)
{
    while (*src != '\0') {
        size_t n = strcspn(src, "/");
        size_t used = strlen(dst);

        if (n > 0) {
            if (used + (used ? 1 : 0) + n >= len)
                return err_set(e, -ENAMETOOLONG, "path too long");
            if (used)
                dst[used++] = '/';
            memcpy(dst + used, src, n);
            dst[used + n] = '\0';
        }
        src += n;
        if (*src == '/')
            src++;
    }
    return 0;
}

/* The address part of an IPv6 host (before a zone's '%'), parsed. */
static int v6_address(const char *host, struct in6_addr *a)
{
    char addr[INET6_ADDRSTRLEN];
    size_t n = strcspn(host, "%");

    if (n >= sizeof(addr))
        return -EINVAL;
    memcpy(addr, host, n);
    addr[n] = '\0';
    return inet_pton(AF_INET6, addr, a) == 1 ? 0 : -EINVAL;
}

/* Samba's name for the IPv6 address a with its zone (NULL: none), before
 * IPV6_LITERAL_SUFFIX: the eight groups in hex joined by '-', then 's'
 * and the zone. out has room for 8 * 5 bytes and the zone's; returns the
 * name's length. */
static size_t smbc_literal(const struct in6_addr *a, const char *zone, char *out)
{
    size_t n = 0;

    for (int i = 0; i < 8; i++)
        n += (size_t)sprintf(out + n, "%s%x", i ? "-" : "",
                             a->s6_addr[2 * i] << 8 | a->s6_addr[2 * i + 1]);
    if (zone != NULL)
        n += (size_t)sprintf(out + n, "s%s", zone);
    return n;
}

/* The host, from p up to auth_end (the first '/'); *host_end is left
 * after it (on the ':' of a port, or at auth_end). */
static int parse_host(const char *url, const char *p, const char *auth_end, struct url *u,
                      const char **host_end, struct err *e)
{
    struct in6_addr a6;
    char lit[8 * 5 + sizeof(u->host)];
    const char *zone;
    size_t n;

    if (*p == '[') {
        const char *close = memchr(p, ']', (size_t)(auth_end - p));

        if (close == NULL)
            return err_set(e, -EINVAL, "URL '%s': unclosed '[' in host", url);
        n = (size_t)(close - p - 1);
        if (n == 0 || n >= sizeof(u->host))
            return err_set(e, -EINVAL, "URL '%s': bad host", url);
        memcpy(u->host, p + 1, n);
        *host_end = close + 1;
    } else {
        *host_end = p + strcspn(p, ":/");
        n = (size_t)(*host_end - p);
        if (n == 0 || n >= sizeof(u->host))
            return err_set(e, -EINVAL, "URL '%s' has no host", url);
        memcpy(u->host, p, n);
    }
    for (n = 0; u->host[n] != '\0'; n++) {
        /* A bracket inside the host ("[[1]") would not survive a round
         * trip through url_format (found by tests/fuzz/fuzz_url). */
        bool zone_mark = *p == '[' && u->host[n] == '%' && strchr(u->host, '%') == u->host + n;

        if ((!url_char_ok(u->host[n]) && !zone_mark) || strchr("/[]", u->host[n]) != NULL)
            return err_set(e, -EINVAL, "URL '%s': bad character in host", url);
    }
    if (*p != '[')
        return 0;
    /* Brackets hold an IPv6 address (and its zone), as in RFC 3986:
     * url_format_smbc() writes it out for libsmbclient. */
    if (v6_address(u->host, &a6) < 0)
        return err_set(e, -EINVAL, "URL '%s': [%s] is no IPv6 address", url, u->host);
    /* A link-local address names a host on one link only: without its
     * interface the kernel refuses the connection, and libsmbclient would
     * report each probe as "Invalid argument". */
    zone = strchr(u->host, '%');
    if (zone == NULL && IN6_IS_ADDR_LINKLOCAL(&a6))
        return err_set(e, -EINVAL,
                       "URL '%s': %s is a link-local address: name its interface too, as in "
                       "smb://[%s%%eth0]/share",
                       url, u->host, u->host);
    if (zone != NULL && zone[1] == '\0')
        return err_set(e, -EINVAL, "URL '%s': no interface after the '%%' of [%s]", url, u->host);
    /* An interface's name or number: a ':' there would read as a port
     * in the name written for libsmbclient (url_format_smbc()). */
    if (zone != NULL &&
        zone[1 + strspn(zone + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789_.-")] != '\0')
        return err_set(e, -EINVAL,
                       "URL '%s': [%s]: an interface is named with letters, digits, '_', '.' "
                       "and '-' only",
                       url, u->host);
    /* Samba takes the name url_format_smbc() writes for an address only
     * while its part before the suffix is shorter than INET6_ADDRSTRLEN
     * (46: normalize_ipv6_literal() in lib/util/util_net.c); a longer one
     * would go to DNS as a host name, address and interface with it
     * (smbclient 4.17 on a veth pair: 45 characters connected, 46 were
     * NT_STATUS_UNSUCCESSFUL). A link-local address takes 30 of them, so
     * an interface name of 15 (enx and a MAC address) is one too many;
     * its number is short, and Samba passes it to getaddrinfo. */
    if (zone != NULL && smbc_literal(&a6, zone + 1, lit) >= INET6_ADDRSTRLEN)
        return err_set(e, -EINVAL,
                       "URL '%s': libsmbclient cannot connect to [%s]: the address and "
                       "interface name are too long for it together; name the interface by "
                       "its number instead (ip link shows it), as in smb://[%.*s%%2]/share",
                       url, u->host, (int)(zone - u->host), u->host);
    return 0;
}

/* ":N" between the host and auth_end, N from 1 to 65535. */
static int parse_port(const char *p, const char *auth_end, struct url *u, struct err *e)
{
    char port[8];
    long long v;

    if (*p == ':' && (size_t)(auth_end - p - 1) < sizeof(port)) {
        memcpy(port, p + 1, (size_t)(auth_end - p - 1));
        port[auth_end - p - 1] = '\0';
        if (parse_long(port, 1, 65535, &v) == 0) {
            u->port = (unsigned)v;
            return 0;
        }
    }
    /* Neither the URL nor the port is quoted: a URL whose password was
     * cut before its '@' (at a blank or '#' of an unquoted value, where
     * the config's lexer or the shell ends it) reads as
     * smb://USER:PASSWORD, the password in the port's place. */
    return err_set(e, -EINVAL,
                   "URL smb://%s...: what follows the host is no port from 1 to 65535 (not "
                   "shown: it may be a password cut short before its '@')",
                   u->host);
}

int url_parse(const char *url, struct url *u, struct err *e)
{
    const char *p, *auth_end, *host_end = NULL, *share;
    size_t n;
    int r;

    memset(u, 0, sizeof(*u));
    /* First, and without quoting the URL: an '@' anywhere may end a user
     * and password ("smb://admin:pa/ss@host/share" has its first '/' in
     * the password, so looking only before that '/' let such a URL reach
     * a message that quotes it). '@' is reserved in every part of the
     * grammar, so no valid URL is refused by this. */
    if (strchr(url, '@') != NULL)
        return err_set(e, -EINVAL,
                       "URL must not carry a user or password ('@'): use a credentials file "
                       "(the URL is not shown)");
    if (strncasecmp(url, SCHEME, strlen(SCHEME)) != 0)
        return err_set(e, -EINVAL, "URL '%s' does not start with smb://", url);
    p = url + strlen(SCHEME);
    auth_end = p + strcspn(p, "/");
    r = parse_host(url, p, auth_end, u, &host_end, e);
    if (r < 0)
        return r;
    if (host_end < auth_end) {
        r = parse_port(host_end, auth_end, u, e);
        if (r < 0)
            return r;
    }
    share = auth_end;
    while (*share == '/')
        share++;
    n = strcspn(share, "/");
    if (n == 0)
        return err_set(e, -EINVAL, "URL '%s' names no share (smb://host/share)", url);
    if (n >= sizeof(u->share))
        return err_set(e, -EINVAL, "URL '%s': share name too long", url);
    memcpy(u->share, share, n);
    {
        size_t at = name_bad_at(u->share, n);
        char why[64];

        if (at < n) {
            name_bad_why(u->share + at, why, sizeof(why));
            return err_set(e, -EINVAL, "URL '%s': the share name contains %s", url, why);
        }
    }
    p = share + n;
    if (url_check_directory(*p == '/' ? p + 1 + strspn(p + 1, "/") : p, e) < 0)
        return -EINVAL;
    return join_segments(u->dir, sizeof(u->dir), p, e);
}

/* u as a URL with the host written as given (host, brackets). */
static int format_with_host(const struct url *u, const char *host, bool brackets, const char *extra,
                            char *out, size_t outlen)
{
    char path[2048] = "";
    char port[16] = "";
    int n;

    if (join_segments(path, sizeof(path), u->dir, NULL) < 0 ||
        join_segments(path, sizeof(path), extra ? extra : "", NULL) < 0)
        return -ENAMETOOLONG;
    if (u->port)
        snprintf(port, sizeof(port), ":%u", u->port);
    n = snprintf(out, outlen, "smb://%s%s%s%s/%s%s%s", brackets ? "[" : "", host,
                 brackets ? "]" : "", port, u->share, path[0] ? "/" : "", path);
    return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int url_format(const struct url *u, const char *extra, char *out, size_t outlen)
{
    return format_with_host(u, u->host, strchr(u->host, ':') != NULL, extra, out, outlen);
}

int url_format_smbc(const struct url *u, const char *extra, char *out, size_t outlen)
{
    char host[8 * 5 + sizeof(u->host) + sizeof(IPV6_LITERAL_SUFFIX)];
    const char *zone = strchr(u->host, '%');
    struct in6_addr a;
    size_t n;

    if (strchr(u->host, ':') == NULL)
        return url_format(u, extra, out, outlen);
    /* libsmbclient 4.17 refuses "[::1]" with EINVAL before it connects,
     * and takes any ':' in the host for the start of a port. It reads the
     * Windows name of a literal instead, and connects to that address
     * without a look-up: the groups joined by '-', the zone after an 's',
     * then IPV6_LITERAL_SUFFIX. Samba takes such a name for an address
     * only when it holds hex digits and '-' (a dotted IPv4 tail,
     * "::ffff:192.0.2.1", went to DNS), so all eight groups are written
     * out in hex: 0-0-0-0-0-0-0-1 for ::1. url_parse() took the host for
     * an address. */
    if (v6_address(u->host, &a) < 0)
        return -EINVAL;
    n = smbc_literal(&a, zone ? zone + 1 : NULL, host);
    strcpy(host + n, IPV6_LITERAL_SUFFIX);
    return format_with_host(u, host, false, extra, out, outlen);
}

bool url_is_loopback(const struct url *u)
{
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};

    /* an address as netaddr reads one; a host name is not case-sensitive */
    if (inet_pton(AF_INET, u->host, &a4.sin_addr) == 1)
        return netaddr_loopback((const struct sockaddr *)&a4);
    if (inet_pton(AF_INET6, u->host, &a6.sin6_addr) == 1)
        return netaddr_loopback((const struct sockaddr *)&a6);
    return strcasecmp(u->host, "localhost") == 0;
}

bool url_text_is_loopback(const char *s)
{
    struct url u;

    return s != NULL && url_parse(s, &u, NULL) == 0 && url_is_loopback(&u);
}
