/* The probe's target URL (lib/url.c: url_parse). What parses must format back
 * into a URL that parses to the same parts, and into one for libsmbclient. */
#include "fuzz.h"

#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = fuzz_cstring(data, size);
    struct url u, v;
    struct err e = {{0}};
    char out[2048], smbc[2048 + 64];

    if (url_parse(url, &u, &e) == 0 && url_format(&u, "", out, sizeof(out)) == 0) {
        FUZZ_CHECK(url_parse(out, &v, &e) == 0);
        FUZZ_CHECK(strcmp(u.host, v.host) == 0 && u.port == v.port);
        FUZZ_CHECK(strcmp(u.share, v.share) == 0 && strcmp(u.dir, v.dir) == 0);
        /* an IPv6 host grows by at most 56 bytes (eight groups, the
         * suffix, no brackets) */
        FUZZ_CHECK(url_format_smbc(&u, "", smbc, sizeof(smbc)) == 0);
    }
    free(url);
    return 0;
}
