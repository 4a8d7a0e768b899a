/* The `socket options` value as smb.conf gives it (lib/sockopts.h). After
 * a buffer is set, the formatted value must read back as that size, and
 * removing it must read back as no explicit size. */
#include "fuzz.h"

#include <limits.h>

#include "sockopts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *value = fuzz_cstring(data, size);
    struct sockopts so, back;
    struct sockopts_size rcv, snd;
    long sz;
    char *out;

    (void)sockopts_parse_size(value, SOCKOPTS_RCVBUF, 4096, &sz, NULL);
    (void)sockopts_kernel(sockopts_atoi(value), 4194304, 2304);
    if (sockopts_parse(value, &so) == 0) {
        rcv = sockopts_get(&so, SOCKOPTS_RCVBUF);
        snd = sockopts_get(&so, SOCKOPTS_SNDBUF);
        FUZZ_CHECK(rcv.present == (rcv.token != NULL) && snd.present == (snd.token != NULL));
        (void)sockopts_kernel(rcv.value, LONG_MAX, 0);
        if (sockopts_set(&so, SOCKOPTS_RCVBUF, 65536) == 0 &&
            sockopts_set(&so, SOCKOPTS_SNDBUF, SOCKOPTS_AUTO) == 0 &&
            (out = sockopts_format(&so)) != NULL) {
            (void)sockopts_same(value, out);
            FUZZ_CHECK(sockopts_parse(out, &back) == 0);
            rcv = sockopts_get(&back, SOCKOPTS_RCVBUF);
            snd = sockopts_get(&back, SOCKOPTS_SNDBUF);
            FUZZ_CHECK(rcv.present && rcv.value == 65536 && !rcv.broken);
            FUZZ_CHECK(!snd.present);
            FUZZ_CHECK(sockopts_same(out, out));
            sockopts_free(&back);
            free(out);
        }
        sockopts_free(&so);
    }
    free(value);
    return 0;
}
