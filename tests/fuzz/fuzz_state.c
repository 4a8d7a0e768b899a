/* STATE_DIR/state (state_parse), NUL bytes and all: the exact input
 * buffer, so that ASan sees a read past its length. What parses must
 * format into a text that parses again and formats the same. */
#include "fuzz.h"

#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct state s, t;
    struct err e = {{0}};
    char *out, *again;

    memset(&s, 0, sizeof(s));
    if (state_parse((const char *)data, size, "fuzz.state", &s, &e) == 0) {
        out = state_format(&s);
        FUZZ_CHECK(out != NULL);
        memset(&t, 0, sizeof(t));
        if (state_parse(out, strlen(out), "formatted", &t, &e) != 0) {
            fprintf(stderr, "%s\n--- formatted:\n%s", e.msg, out);
            FUZZ_CHECK(!"the formatted state parses");
        }
        again = state_format(&t);
        FUZZ_CHECK(again != NULL && strcmp(out, again) == 0);
        free(again);
        free(out);
        state_free(&t);
    }
    state_free(&s);
    return 0;
}
