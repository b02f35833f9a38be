/* cli_texts: the texts `posy embed` reads, from arguments, stdin or a file.
 *
 * Two formats.  Plain text: one text per line; the line ending (\n, or \r\n)
 * is removed and nothing else, so an empty line embeds the empty string, as
 * sentence-transformers does for "".  JSONL: one JSON value per line, a
 * string or an object with a "text" string; JSON is the way to put a
 * newline or a tab inside one text.  Every error names the file and the
 * line, because a corpus is fixed by editing that line.  A file named
 * *.json whose first character is '[' is read as one JSON array of such
 * values instead (errors then name the array index).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli_embed.h"

int cli_texts_add(cli_texts *t, const char *s, size_t len, posy_err *err) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        char **ns = realloc(t->s, cap * sizeof *ns);
        if (!ns) return posy_err_set(err, POSY_E_NOMEM, "out of memory reading texts");
        t->s = ns;
        size_t *nl = realloc(t->len, cap * sizeof *nl);
        if (!nl) return posy_err_set(err, POSY_E_NOMEM, "out of memory reading texts");
        t->len = nl;
        t->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return posy_err_set(err, POSY_E_NOMEM, "out of memory reading texts");
    memcpy(c, s, len);
    c[len] = '\0';
    t->s[t->n] = c;
    t->len[t->n] = len;
    t->n++;
    return 0;
}

void cli_texts_free(cli_texts *t) {
    for (size_t i = 0; i < t->n; i++) free(t->s[i]);
    free(t->s);
    free(t->len);
    memset(t, 0, sizeof *t);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A JSON string, or an object whose "text" is a string; `where` names it
 * in the message ("file:line" or "file[index]"). */
static int add_json_value(cli_texts *t, const json_t *v, const char *where, posy_err *err) {
    const json_t *s = json_is_object(v) ? json_object_get(v, "text") : v;
    if (s && json_is_string(s)) return cli_texts_add(t, json_string_value(s), json_string_length(s), err);
    return posy_err_set(err, POSY_E_INVALID,
                        "%s: expected a JSON string or an object with a \"text\" string", where);
}

/* One JSONL line. */
static int add_json_line(cli_texts *t, const char *line, size_t len, const char *name,
                         size_t lineno, posy_err *err) {
    json_error_t je;
    json_t *v = json_loadb(line, len, JSON_DECODE_ANY, &je);
    if (!v)
        return posy_err_set(err, POSY_E_INVALID, "%s:%zu: not valid JSON (%s)", name, lineno,
                            je.text);
    char where[1100];
    snprintf(where, sizeof where, "%s:%zu", name, lineno);
    int rc = add_json_value(t, v, where, err);
    json_decref(v);
    return rc;
}

/* A whole *.json file holding one array. */
static int read_json_array(cli_texts *t, FILE *f, const char *name, posy_err *err) {
    json_error_t je;
    json_t *a = json_loadf(f, 0, &je);
    if (!a)
        return posy_err_set(err, POSY_E_INVALID, "%s: not valid JSON (%s, line %d, column %d)", name,
                            je.text, je.line, je.column);
    int rc = json_is_array(a) ? 0 : posy_err_set(err, POSY_E_INVALID, "%s: expected a JSON array", name);
    for (size_t i = 0; rc == 0 && i < json_array_size(a); i++) {
        char where[1100];
        snprintf(where, sizeof where, "%s[%zu]", name, i);
        rc = add_json_value(t, json_array_get(a, i), where, err);
    }
    json_decref(a);
    return rc;
}

/* Is the first non-blank byte of a seekable file '['?  Rewinds. */
static int starts_with_bracket(FILE *f) {
    int c;
    while ((c = fgetc(f)) == ' ' || c == '\t' || c == '\r' || c == '\n') {}
    rewind(f);
    return c == '[';
}

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

static int read_lines(cli_texts *t, FILE *f, const char *name, int jsonl, posy_err *err) {
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t got;
    int rc = 0;
    while (rc == 0 && (got = getline(&line, &cap, f)) >= 0) {
        size_t n = (size_t)got;
        lineno++;
        if (n && line[n - 1] == '\n') n--;
        if (n && line[n - 1] == '\r') n--;
        if (memchr(line, '\0', n)) {
            rc = posy_err_set(err, POSY_E_INVALID, "%s:%zu: line holds a NUL byte", name, lineno);
        } else if (!jsonl) {
            rc = cli_texts_add(t, line, n, err);
        } else if (is_blank(line, n)) {
            rc = posy_err_set(err, POSY_E_INVALID,
                              "%s:%zu: empty line in JSONL input (write \"\" to embed the empty string)",
                              name, lineno);
        } else {
            rc = add_json_line(t, line, n, name, lineno, err);
        }
    }
    if (rc == 0 && ferror(f))
        rc = posy_err_set(err, POSY_E_IO, "reading %s: %s", name, strerror(errno));
    free(line);
    return rc;
}

int cli_texts_read(cli_texts *t, const char *path, cli_in_format fmt, posy_err *err) {
    int use_stdin = !path || strcmp(path, "-") == 0;
    const char *name = use_stdin ? "<stdin>" : path;
    if (fmt == CLI_IN_AUTO)
        fmt = (!use_stdin && (ends_with(path, ".jsonl") || ends_with(path, ".json"))) ? CLI_IN_JSONL
                                                                                      : CLI_IN_TEXT;
    FILE *f = use_stdin ? stdin : fopen(path, "rb");
    if (!f) return posy_err_set(err, POSY_E_IO, "cannot open input %s: %s", path, strerror(errno));
    int rc;
    if (!use_stdin && fmt == CLI_IN_JSONL && ends_with(path, ".json") && starts_with_bracket(f))
        rc = read_json_array(t, f, name, err);
    else
        rc = read_lines(t, f, name, fmt == CLI_IN_JSONL, err);
    if (!use_stdin) fclose(f);
    return rc;
}
