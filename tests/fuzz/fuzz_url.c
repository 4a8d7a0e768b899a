/* The probe's target URL (lib/url.c: url_parse). What parses must format back
 * into a URL that parses to the same parts. */
#include "fuzz.h"

#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = fuzz_cstring(data, size);
    struct url u, v;
    struct err e = {{0}};
    char out[2048];

    if (url_parse(url, &u, &e) == 0 && url_format(&u, "", out, sizeof(out)) == 0) {
        FUZZ_CHECK(url_parse(out, &v, &e) == 0);
        FUZZ_CHECK(strcmp(u.host, v.host) == 0 && u.port == v.port);
        FUZZ_CHECK(strcmp(u.share, v.share) == 0 && strcmp(u.dir, v.dir) == 0);
    }
    free(url);
    return 0;
}
