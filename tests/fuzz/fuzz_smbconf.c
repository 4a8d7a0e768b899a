/* The smb.conf reader in memory (smbconf_parse with a reader callback),
 * then the editor's pure half: render a new value, read the result back,
 * take the edit back.
 *
 * The input holds up to MAX_FILES files separated by two NUL bytes (one
 * NUL stays inside a file): /fuzz/0 is smb.conf, `include = /fuzz/1`
 * reaches the next, and a %-include globs over all of them. Properties:
 * the rendered file reads back as the value written, and undoing the edit
 * gives back the bytes it replaced. */
#include "fuzz.h"

#include <errno.h>
#include <fnmatch.h>

#include "smbconf.h"

#define MAX_FILES 8
#define VALUE "TCP_NODELAY SO_RCVBUF=131072"

struct files {
    const char *buf[MAX_FILES];
    size_t len[MAX_FILES];
    size_t n;
    /* /fuzz/<override> reads as this instead (the rendered file) */
    int override;
    const char *obuf;
    size_t olen;
};

static int file_index(const struct files *fs, const char *path)
{
    if (strncmp(path, "/fuzz/", 6) != 0 || path[6] < '0' || path[6] >= '0' + (int)fs->n ||
        path[7] != '\0')
        return -1;
    return path[6] - '0';
}

static int mem_read(void *ctx, const char *path, char **buf, size_t *len, struct err *e)
{
    const struct files *fs = ctx;
    int i = file_index(fs, path);
    const char *src;
    size_t n;

    (void)e;
    if (i < 0)
        return -ENOENT;
    src = i == fs->override ? fs->obuf : fs->buf[i];
    n = i == fs->override ? fs->olen : fs->len[i];
    *buf = malloc(n + 1);
    if (*buf == NULL)
        return -ENOMEM;
    memcpy(*buf, src, n);
    (*buf)[n] = '\0';
    *len = n;
    return 0;
}

static int mem_glob(void *ctx, const char *pattern, char ***paths, size_t *n)
{
    const struct files *fs = ctx;

    *paths = calloc(MAX_FILES, sizeof(char *));
    *n = 0;
    if (*paths == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < fs->n; i++) {
        char p[16];

        snprintf(p, sizeof(p), "/fuzz/%zu", i);
        if (fnmatch(pattern, p, 0) == 0 && ((*paths)[*n] = strdup(p)) != NULL)
            (*n)++;
    }
    return 0;
}

static void split(struct files *fs, const uint8_t *data, size_t size)
{
    size_t start = 0;

    memset(fs, 0, sizeof(*fs));
    fs->override = -1;
    for (size_t i = 0; fs->n < MAX_FILES - 1 && i + 1 < size; i++) {
        if (data[i] == 0 && data[i + 1] == 0) {
            fs->buf[fs->n] = (const char *)data + start;
            fs->len[fs->n++] = i - start;
            start = i + 2;
            i++;
        }
    }
    fs->buf[fs->n] = (const char *)data + start;
    fs->len[fs->n++] = size - start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct files fs;
    struct smbconf_io io = {mem_read, mem_glob, &fs, false};
    struct smbconf c, c2;
    struct smbconf_edit ed;
    struct err e = {{0}};
    char *out = NULL, *back = NULL;
    size_t outlen, backlen;
    int i, r;

    split(&fs, data, size);
    if (smbconf_parse(&c, "/fuzz/0", &io, &e) != 0)
        return 0;
    memset(&ed, 0, sizeof(ed));
    if (smbconf_render(&c, VALUE, &out, &outlen, &ed, &e) == 0) {
        i = file_index(&fs, ed.file);
        FUZZ_CHECK(i >= 0);
        fs.override = i;
        fs.obuf = out;
        fs.olen = outlen;
        if (smbconf_parse(&c2, "/fuzz/0", &io, &e) == 0) {
            if (strcmp(c2.value, VALUE) != 0) {
                fprintf(stderr, "read back: '%s'\n", c2.value);
                FUZZ_CHECK(!"the rendered file reads back as the value written");
            }
            r = smbconf_unrender(&c2, &ed, &back, &backlen, &e);
            /* right after the render, the line in force is ours */
            FUZZ_CHECK(r != SMBCONF_UNDONE_SHADOWED);
            if (r == 0) {
                FUZZ_CHECK(backlen == fs.len[i] && memcmp(back, fs.buf[i], backlen) == 0);
                free(back);
            }
            smbconf_free(&c2);
        }
        smbconf_edit_free(&ed);
        free(out);
    }
    smbconf_free(&c);
    return 0;
}
