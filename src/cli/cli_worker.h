/* cli_worker: pieces of `posy worker` shared by its files. */
#ifndef CLI_WORKER_H
#define CLI_WORKER_H

#include "rpc.h"
#include "sched_core.h"

/* An rpc_backend that queues chunks on the in-process scheduler. */
typedef struct cli_worker_backend {
    sched *sched;
    rpc_backend be;
} cli_worker_backend;

void cli_worker_backend_init(cli_worker_backend *b, sched *s);

#endif
