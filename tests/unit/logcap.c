/* logcap: see logcap.h. */
#include "logcap.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

static FILE *cap;
static int saved = -1;

void logcap_begin(void)
{
    assert_int_equal(saved, -1); /* one capture at a time */
    fflush(stderr);
    cap = tmpfile();
    assert_non_null(cap);
    saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(cap), STDERR_FILENO) >= 0);
}

char *logcap_end(void)
{
    long len;
    char *text;

    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    saved = -1;
    assert_int_equal(fseek(cap, 0, SEEK_END), 0);
    len = ftell(cap);
    assert_true(len >= 0);
    rewind(cap);
    text = malloc((size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, cap), (size_t)len);
    text[len] = '\0';
    fclose(cap);
    cap = NULL;
    return text;
}
