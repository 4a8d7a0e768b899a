/* parse: checked numbers and PREFIX-PID names. */
#include "parse.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int parse_long(const char *s, long long min, long long max, long long *out)
{
    char *end;
    long long v;

    /* strtoll accepts leading blanks and a sign: an outside number must be
     * plain digits, so check the first character ourselves. */
    if (s == NULL || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (*end != '\0')
        return -EINVAL;
    if (errno == ERANGE || v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int parse_size(const char *s, long long min, long long max, long long *out)
{
    char digits[32];
    size_t n;
    long long v, mult = 1;
    int r;

    if (s == NULL)
        return -EINVAL;
    n = strlen(s);
    if (n == 0 || n >= sizeof(digits))
        return -EINVAL;
    memcpy(digits, s, n + 1);
    switch (toupper((unsigned char)digits[n - 1])) {
    case 'K':
        mult = 1024;
        break;
    case 'M':
        mult = 1024 * 1024;
        break;
    case 'G':
        mult = 1024LL * 1024 * 1024;
        break;
    default:
        break;
    }
    if (mult != 1)
        digits[n - 1] = '\0';
    r = parse_long(digits, 0, LLONG_MAX / mult, &v);
    if (r < 0)
        return r;
    v *= mult;
    if (v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

int parse_pid_name(const char *name, const char *prefix, pid_t *pid, const char **rest)
{
    size_t pl = strlen(prefix), n;
    char digits[16];
    long long v;
    int r;

    if (strncmp(name, prefix, pl) != 0)
        return -EINVAL;
    name += pl;
    n = strspn(name, "0123456789");
    /* Ten digits hold every int; more is not a pid (and would not fit). */
    if (n == 0 || (name[n] != '\0' && name[n] != '-'))
        return -EINVAL;
    if (n >= sizeof(digits))
        return -ERANGE;
    memcpy(digits, name, n);
    digits[n] = '\0';
    r = parse_long(digits, 1, INT_MAX, &v);
    if (r < 0)
        return r;
    *pid = (pid_t)v;
    if (rest != NULL)
        *rest = name[n] == '-' ? name + n + 1 : NULL;
    return 0;
}
