/* The probe's target URL (probe_parse_url). What parses must format back
 * into a URL that parses to the same parts. */
#include "fuzz.h"

#include "probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = fuzz_cstring(data, size);
    struct probe_url u, v;
    struct err e = {{0}};
    char out[2048];

    if (probe_parse_url(url, &u, &e) == 0 && probe_format_url(&u, "", out, sizeof(out)) == 0) {
        FUZZ_CHECK(probe_parse_url(out, &v, &e) == 0);
        FUZZ_CHECK(strcmp(u.host, v.host) == 0 && u.port == v.port);
        FUZZ_CHECK(strcmp(u.share, v.share) == 0 && strcmp(u.dir, v.dir) == 0);
    }
    free(url);
    return 0;
}
