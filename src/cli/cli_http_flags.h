/* cli_http_flags: the flags of the HTTP front that `posy serve` and `posy
 * gateway` share (address, threads, admission limits, timeouts,
 * truncation, served name, CORS, API key), written once so the two commands cannot drift apart in
 * names, ranges, help or kind.  OFF is the command's offsetof macro; its
 * options struct must have the long / const char * fields named below. */
#ifndef CLI_HTTP_FLAGS_H
#define CLI_HTTP_FLAGS_H

#include "cli_flags.h"

#define CLI_HTTP_FRONT_FLAGS(OFF)                                                                                   \
    {"--host", "POSY_HOST", "address to listen on (default 0.0.0.0)", CLI_F_STR, 0, 0, OFF(host)},                  \
    {"--port", "POSY_PORT", "HTTP port (default 8080; 0 picks a free one)", CLI_F_INT, 0, 65535, OFF(port)},        \
    {"--http-threads", "POSY_HTTP_THREADS", "event-loop threads (default 2)", CLI_F_INT, 1, 256, OFF(http_threads)}, \
    {"--tokenization-workers", "POSY_TOKENIZATION_WORKERS", "parse/tokenize/serialize threads (default: cores)",   \
     CLI_F_INT, 1, 1024, OFF(workers)},                                                                             \
    {"--max-concurrent", "POSY_MAX_CONCURRENT", "requests in flight before 429 (default 512)", CLI_F_INT, 1,         \
     1 << 24, OFF(max_concurrent)},                                                                                 \
    {"--max-client-batch", "POSY_MAX_CLIENT_BATCH", "inputs per request (default 2048)", CLI_F_INT, 1, 1 << 24,      \
     OFF(max_client_batch)},                                                                                        \
    {"--max-body-bytes", "POSY_MAX_BODY_BYTES", "request body limit (default 4194304)", CLI_F_INT, 1, 1L << 32,      \
     OFF(max_body_bytes)},                                                                                          \
    {"--request-timeout", "POSY_REQUEST_TIMEOUT", "seconds a client has to send a request (default 10)", CLI_F_INT,  \
     1, 3600, OFF(request_timeout)},                                                                                \
    {"--drain-timeout", "POSY_DRAIN_TIMEOUT", "seconds to finish in-flight requests on SIGTERM (default 30)",        \
     CLI_F_INT, 0, 3600, OFF(drain_timeout)},                                                                       \
    {"--auto-truncate", "POSY_AUTO_TRUNCATE", "0 | 1: truncate over-long inputs by default (default 0: answer 422)", \
     CLI_F_SWITCH, 0, 1, OFF(auto_truncate)},                                                                      \
    {"--served-model-name", "POSY_SERVED_MODEL_NAME",                                                               \
     "the model's name in responses, /v1/models and /info (default: the model directory's name)", CLI_F_STR, 0, 0,  \
     OFF(served_name)},                                                                                             \
    {"--cors-allow-origin", "POSY_CORS_ALLOW_ORIGIN",                                                             \
     "origins whose web pages may call posy: * or a comma-separated list like https://app.example.com (default: "   \
     "none)", CLI_F_STR, 0, 0, OFF(cors)},                                                                          \
    {"--api-key", "POSY_API_KEY",                                                                                   \
     "require 'Authorization: Bearer KEY' on every route but /health and /metrics (default: none; the env "        \
     "variable keeps it out of ps)",                                                                                \
     CLI_F_STR, 0, 0, OFF(api_key)}

#endif
