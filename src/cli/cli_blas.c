/* cli_blas: give OpenBLAS the CPU's real kernels when it took the CPU for
 * an old one.
 *
 * The CPU engine's attention products go through OpenBLAS's sgemm.  A
 * DYNAMIC_ARCH OpenBLAS picks its kernels from the CPUID model number once,
 * in its library constructor, before main; a model it does not know (a
 * cloud VM's "Intel(R) Xeon(R) Processor", a CPU newer than the library)
 * falls back to Prescott's SSE3 kernels, ~4x slower than the AVX-512 ones
 * on the same machine (on this project's CI VMs: 15-19% of a DeBERTa-base
 * reranker's CPU time in sgemm_kernel_PRESCOTT).  OPENBLAS_CORETYPE
 * overrides the choice, but only when set before the library loads, so the
 * engine-running commands re-execute themselves once with it set when
 * OpenBLAS reports a pre-AVX2 core on a CPU (and OS) that has AVX2 + FMA:
 * SkylakeX with AVX-512 F/BW/DQ/VL, else Haswell.  A user's own
 * OPENBLAS_CORETYPE, any value, is left alone (and so is the re-executed
 * process, which has it).  Linux only (/proc/self/exe); without
 * openblas_get_corename (another BLAS) nothing happens.
 */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "posy_log.h"

char *openblas_get_corename(void) __attribute__((weak));

#define CLI_BLAS_FROM "POSY_OPENBLAS_DETECTED"   /* set for the re-executed process: what OpenBLAS had said */

/* OpenBLAS's names for x86 cores without AVX2 + FMA kernels */
static int cli_blas_old_core(const char *name) {
    static const char *const old[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai",
                                      "Coppermine", "Northwood", "Banias", "Sandybridge", "Opteron", "Barcelona",
                                      "Bobcat", "Bulldozer", "Piledriver", "Steamroller", "Excavator", "Unknown"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
        if (!strcmp(name, old[i])) return 1;
    return 0;
}

void cli_blas_core_check(char **argv) {
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
    const char *from = getenv(CLI_BLAS_FROM);
    if (from && openblas_get_corename) {   /* the re-executed process: say what it runs with */
        POSY_INFO("OpenBLAS took this CPU for %s; running its %s kernels (OPENBLAS_CORETYPE set by posy; set it "
                  "yourself to choose)", from, openblas_get_corename());
        unsetenv(CLI_BLAS_FROM);
        return;
    }
    if (getenv("OPENBLAS_CORETYPE") || !openblas_get_corename) return;
    const char *core = openblas_get_corename();
    if (!core || !cli_blas_old_core(core)) return;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return;
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    char was[64];
    snprintf(was, sizeof was, "%s", core);
    if (setenv("OPENBLAS_CORETYPE", avx512 ? "SkylakeX" : "Haswell", 1) || setenv(CLI_BLAS_FROM, was, 1)) return;
    execv("/proc/self/exe", argv);
    /* still here: carry on with the old kernels */
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(CLI_BLAS_FROM);
    POSY_WARN("OpenBLAS took this CPU for %s and posy could not restart itself with better kernels; "
              "OPENBLAS_CORETYPE=%s speeds up the CPU engine's attention", was, avx512 ? "SkylakeX" : "Haswell");
#else
    (void)argv;
#endif
}
