/* posy_test: the smallest harness that gives ctest a clear verdict.
 *
 * CHECK records a failure with file:line and continues; TEST_MAIN runs the
 * listed cases and returns non-zero if any check failed, which is what
 * ctest reads.  Each case prints one line so a failing run shows where.
 */
#ifndef POSY_TEST_H
#define POSY_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int posy_test_failures = 0;
static int posy_test_checks = 0;

#define CHECK(cond) do { posy_test_checks++; if (!(cond)) { posy_test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_MSG(cond, ...) do { posy_test_checks++; if (!(cond)) { posy_test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CHECK_EQ_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); posy_test_checks++; \
    if (_a != _b) { posy_test_failures++; fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", \
    __FILE__, __LINE__, #a, #b, _a, _b); } } while (0)
#define CHECK_STR_CONTAINS(hay, needle) CHECK_MSG(strstr((hay), (needle)) != NULL, "'%s' lacks '%s'", (hay), (needle))

typedef void (*posy_test_fn)(void);
typedef struct { const char *name; posy_test_fn fn; } posy_test_case;

static inline int posy_test_run(const posy_test_case *cases, int n) {
    for (int i = 0; i < n; i++) {
        int before = posy_test_failures;
        cases[i].fn();
        printf("%-40s %s\n", cases[i].name, posy_test_failures == before ? "ok" : "FAILED");
    }
    printf("%d checks, %d failed\n", posy_test_checks, posy_test_failures);
    return posy_test_failures ? 1 : 0;
}

#define TEST(fn) { #fn, fn }
#define TEST_MAIN(...) int main(void) { static const posy_test_case cases[] = { __VA_ARGS__ }; \
    return posy_test_run(cases, (int)(sizeof cases / sizeof cases[0])); }

/* |a-b| <= atol + rtol*|ref| over n floats; prints the worst element. */
static inline int posy_test_close(const float *a, const float *ref, size_t n, float atol, float rtol) {
    size_t worst = 0; double worst_ex = -1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        double lim = atol + rtol * fabs((double)ref[i]);
        if (!(d <= lim) && d - lim > worst_ex) { worst_ex = d - lim; worst = i; }
    }
    if (worst_ex >= 0) {
        fprintf(stderr, "  mismatch at %zu: got %g want %g\n", worst, (double)a[worst], (double)ref[worst]);
        return 0;
    }
    return 1;
}

#endif
