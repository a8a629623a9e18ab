/* config.h — the server's settings, read from the environment and the command line.
 *
 * Owns struct server_config: every tunable the daemon has, with its default, the
 * environment variable that sets it and the flag that overrides the variable.
 */
#ifndef HAMEL_SERVER_CONFIG_H
#define HAMEL_SERVER_CONFIG_H

#include <stddef.h>

#define CONFIG_MAX_ORIGINS 32
#define CONFIG_PATH_MAX 1024

typedef struct server_config {
    char addr[64];                 /* HAMEL_ADDR, --addr: bind address (default loopback) */
    int port;                      /* HAMEL_PORT, --port: 0 = ephemeral */
    int workers;                   /* HAMEL_WORKERS, --workers: simulation threads */
    int queue;                     /* HAMEL_QUEUE, --queue: queued jobs before 503 */
    int http_threads;              /* HAMEL_HTTP_THREADS: libmicrohttpd poll threads */
    int max_connections;           /* HAMEL_MAX_CONNECTIONS */
    int max_per_ip;                /* HAMEL_MAX_CONNECTIONS_PER_IP: 0 = no per-address cap */
    size_t max_output_values;      /* HAMEL_MAX_OUTPUT_VALUES: samples x series of one job */
    int conn_timeout;              /* HAMEL_CONN_TIMEOUT: idle seconds before close */
    double head_seconds;           /* HAMEL_HEAD_SECONDS: a request head arrives whole within it */
    int hangup_poll_ms;            /* HAMEL_HANGUP_POLL_MS: hang-up checks of compiling requests */
    size_t max_body;               /* HAMEL_MAX_BODY: request body bytes */
    size_t cache_bytes;            /* HAMEL_CACHE_BYTES: models + results in memory */
    size_t max_jobs;               /* HAMEL_MAX_JOBS: job records kept in memory */
    size_t max_batch;              /* HAMEL_MAX_BATCH: runs in one POST /v1/batches */
    size_t batch_bytes;            /* HAMEL_BATCH_BYTES: result lines kept by all batches */
    size_t store_bytes;            /* HAMEL_STORE_BYTES: result bodies kept on disk */
    size_t store_jobs;             /* HAMEL_STORE_JOBS: job records kept on disk */
    double max_wait;               /* longest ?wait=N honoured, seconds */
    double max_wall;               /* HAMEL_MAX_WALL: wall seconds of one job (0: engine) */
    long max_steps;                /* HAMEL_MAX_STEPS: steps of one job (0: engine) */
    double max_compile_seconds;    /* HAMEL_MAX_COMPILE_SECONDS: one model compilation (0: engine) */
    size_t max_compile_bytes;      /* HAMEL_MAX_COMPILE_BYTES: memory of one compilation (0: engine) */
    double drain_seconds;          /* HAMEL_DRAIN_SECONDS: SIGTERM grace for running jobs */
    int access_log;                /* HAMEL_ACCESS_LOG: 0 silences the per-request line */
    char data[CONFIG_PATH_MAX];    /* HAMEL_DATA, --data: store directory */
    char token[256];               /* HAMEL_TOKEN, --token: bearer token, "" = none */
    char metrics_token[256];       /* HAMEL_METRICS_TOKEN: bearer token of /metrics, "" = none */
    char statics[CONFIG_PATH_MAX]; /* HAMEL_STATIC, --static: web front end, "" = none */
    char redis[256];               /* HAMEL_REDIS: redis://host:port, "" = SQLite */
    double redis_lease;            /* HAMEL_REDIS_LEASE: seconds before a dead instance's job moves */
    double redis_timeout;          /* HAMEL_REDIS_TIMEOUT: seconds for one Redis command */
    long redis_ttl;                /* HAMEL_REDIS_TTL: seconds results and job records are kept */
    int cors_any;                  /* HAMEL_CORS_ORIGINS == "*" */
    int n_origins;
    char origins[CONFIG_MAX_ORIGINS][256];
} server_config;

/* Fills *cfg from defaults, then the environment, then argv. A numeric variable set to
 * the empty string keeps its default (compose files pass ${VAR:-} through); for the
 * string settings (HAMEL_TOKEN, HAMEL_STATIC, ...) the empty string is a value. Returns 0, 1 when
 * --help was asked for (usage printed), or -1 with a message on stderr. Borrows argv. */
int config_load(server_config *cfg, int argc, char **argv);

/* Whether `origin` may read responses under the CORS settings. Borrows both. */
int config_origin_allowed(const server_config *cfg, const char *origin);

#endif
