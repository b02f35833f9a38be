/* cli_gateway: pieces of `posy gateway` shared by its files. */
#ifndef CLI_GATEWAY_H
#define CLI_GATEWAY_H

#include <stdatomic.h>

#include "gw_backend.h"
#include "rpc_pool.h"

/* The HTTP front's backend, served by remote workers through rpc_pool. */
typedef struct cli_gateway_backend {
    rpc_pool *pool;
    gw_backend be;
    atomic_int outstanding_reqs, outstanding_seqs, outstanding_tokens;
} cli_gateway_backend;

void cli_gateway_backend_init(cli_gateway_backend *g, rpc_pool *pool);

#endif
