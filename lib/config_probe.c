/* config_probe: the probe { ... } section of /etc/smbtuned.conf, the
 * probe's options: one parser per option, text to typed values (the url
 * and the credentials file's path, byte counts, seconds, the directory,
 * the probe's socket options). */
#include <errno.h>

#include "config_int.h"
#include "parse.h"
#include "probe.h"
#include "url.h"

/* Limits of the probe's numbers. The size must be at least one request so
 * that the rate means something; 64 GiB is far more than any deadline
 * allows. */
#define SIZE_MIN 4096LL
#define SIZE_MAX_ (64LL * 1024 * 1024 * 1024)
#define DEADLINE_MAX_S 86400LL

static int parse_url(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    struct url u;
    int r;

    if (s[0] != '\0') {
        r = url_parse(s, &u, e);
        if (r < 0)
            return r;
    }
    return copy_str(p->url, sizeof(p->url), s, "url", e);
}

static int parse_credentials(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    if (s[0] != '\0' && s[0] != '/')
        return err_set(e, -EINVAL, "credentials must be an absolute path, not '%s'", s);
    return copy_str(p->credentials, sizeof(p->credentials), s, "credentials", e);
}

static int parse_probe_size(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    if (parse_size(s, SIZE_MIN, SIZE_MAX_, &p->size) < 0)
        return err_set(e, -EINVAL, "size '%s' is not a byte count from 4K to 64G", s);
    return 0;
}

static int parse_request_size(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    if (parse_size(s, 1, PROBE_MAX_REQUEST_SIZE, &p->request_size) < 0)
        return err_set(e, -EINVAL,
                       "request_size '%s' is not a byte count from 1 to 8M (SMB2's largest "
                       "request)",
                       s);
    return 0;
}

static int parse_deadline(const char *s, struct config *c, struct err *e)
{
    long long v;

    if (parse_long(s, 1, DEADLINE_MAX_S, &v) < 0)
        return err_set(e, -EINVAL, "deadline '%s' is not a whole number of seconds from 1 to %lld",
                       s, DEADLINE_MAX_S);
    c->probe.deadline_s = (double)v;
    c->probe.deadline_where[0] = '\0'; /* config_parse_string() sets it for a file's */
    return 0;
}

static int parse_duration(const char *s, struct config *c, struct err *e)
{
    long long v;

    if (parse_long(s, 0, (long long)PROBE_MAX_DURATION_S, &v) < 0)
        return err_set(e, -EINVAL,
                       "duration '%s' is not a whole number of seconds from 0 (none) to %.0f", s,
                       PROBE_MAX_DURATION_S);
    c->probe.duration_s = (double)v;
    c->probe.duration_where[0] = '\0';
    return 0;
}

static int parse_directory(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    int r = url_check_directory(s, e);

    if (r < 0)
        return r;
    /* config_parse_string() sets it again for a value from a file. */
    p->directory_where[0] = '\0';
    return copy_str(p->directory, sizeof(p->directory), s, "directory", e);
}

static int parse_socket_options(const char *s, struct config *c, struct err *e)
{
    struct config_probe *p = &c->probe;
    int r = probe_check_socket_options(s, e);

    if (r < 0)
        return r;
    return copy_str(p->socket_options, sizeof(p->socket_options), s, "socket_options", e);
}

static const struct config_field probe_fields[] = {
    {"url", parse_url},
    {"credentials", parse_credentials},
    {"size", parse_probe_size},
    {"request_size", parse_request_size},
    {"deadline", parse_deadline},
    {"duration", parse_duration},
    {"directory", parse_directory},
    {"socket_options", parse_socket_options},
};

CONFIG_SECTION(config_probe_section, "probe", probe_fields);
