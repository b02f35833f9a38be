/* cli_embed: `posy embed` (to be completed by the integration step). */
#include <stdio.h>
#include "cli.h"

int cli_cmd_embed(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "posy embed: not available in this build\n");
    return 1;
}
