/* config.h — the server's settings, read from the environment and the command line.
 *
 * Owns struct server_config: every tunable the daemon has, with its default, the
 * environment variable that sets it and the flag that overrides the variable.
 */
#ifndef HAMEL_SERVER_CONFIG_H
#define HAMEL_SERVER_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#define CONFIG_MAX_ORIGINS 32
#define CONFIG_PATH_MAX 1024

typedef struct server_config {
    char addr[64];                    /* HAMEL_ADDR, --addr: bind address (default loopback) */
    int port;                         /* HAMEL_PORT, --port: 0 = ephemeral */
    int workers;                      /* HAMEL_WORKERS, --workers: simulation threads */
    int queue;                        /* HAMEL_QUEUE, --queue: queued jobs before 503 */
    int http_threads;                 /* HAMEL_HTTP_THREADS: libmicrohttpd poll threads */
    int max_connections;              /* HAMEL_MAX_CONNECTIONS */
    int max_per_ip;                   /* HAMEL_MAX_CONNECTIONS_PER_IP: 0 = no per-address cap */
    size_t max_output_values;         /* HAMEL_MAX_OUTPUT_VALUES: samples x series of one job */
    int conn_timeout;                 /* HAMEL_CONN_TIMEOUT: idle seconds before close */
    double head_seconds;              /* HAMEL_HEAD_SECONDS: a request head arrives whole within it */
    int hangup_poll_ms;               /* HAMEL_HANGUP_POLL_MS: hang-up checks of compiling requests */
    size_t max_body;                  /* HAMEL_MAX_BODY: request body bytes */
    size_t bodies_bytes;              /* HAMEL_BODIES_BYTES: what all large bodies may hold */
    size_t cache_bytes;               /* HAMEL_CACHE_BYTES: models + results in memory */
    size_t max_jobs;                  /* HAMEL_MAX_JOBS: job records kept in memory */
    size_t max_batch;                 /* HAMEL_MAX_BATCH: runs in one POST /v1/batches */
    size_t batch_bytes;               /* HAMEL_BATCH_BYTES: result lines kept by all batches */
    size_t store_bytes;               /* HAMEL_STORE_BYTES: result bodies kept on disk */
    size_t store_jobs;                /* HAMEL_STORE_JOBS: job records kept on disk */
    size_t store_model_bytes;         /* HAMEL_STORE_MODEL_BYTES: models' text kept on disk */
    double max_wait;                  /* longest ?wait=N honoured, seconds */
    double max_wall;                  /* HAMEL_MAX_WALL: wall seconds of one job (0: engine) */
    long max_steps;                   /* HAMEL_MAX_STEPS: steps of one job (0: engine) */
    double max_compile_seconds;       /* HAMEL_MAX_COMPILE_SECONDS: one model compilation (0: engine) */
    size_t max_compile_bytes;         /* HAMEL_MAX_COMPILE_BYTES: memory of one compilation (0: engine) */
    double drain_seconds;             /* HAMEL_DRAIN_SECONDS: SIGTERM grace for running jobs */
    int access_log;                   /* HAMEL_ACCESS_LOG: 0 silences the per-request line */
    char data[CONFIG_PATH_MAX];       /* HAMEL_DATA, --data: store directory */
    char token[256];                  /* HAMEL_TOKEN, --token: bearer token, "" = none */
    char token_file[CONFIG_PATH_MAX]; /* HAMEL_TOKEN_FILE: the bearer token read from this file */
    char metrics_token[256];          /* HAMEL_METRICS_TOKEN: bearer token of /metrics, "" = none */
    char statics[CONFIG_PATH_MAX];    /* HAMEL_STATIC, --static: web front end, "" = none */
    char cache_dir[CONFIG_PATH_MAX];  /* HAMEL_CACHE_DIR: native code cache, "" = <data>/native */
    char redis[256];                  /* HAMEL_REDIS: redis://host:port, "" = SQLite */
    double redis_lease;               /* HAMEL_REDIS_LEASE: seconds before a dead instance's job moves */
    double redis_timeout;             /* HAMEL_REDIS_TIMEOUT: seconds for one Redis command */
    long redis_ttl;                   /* HAMEL_REDIS_TTL: seconds results and job records are kept */
    double quarantine_seconds;        /* HAMEL_QUARANTINE_SECONDS: a faulting model answered at once */
    long worker_memory_mb;            /* HAMEL_WORKER_MEMORY_MB: an engine worker's address space */
    int isolate;                      /* HAMEL_ISOLATE: 0 runs the engine in the server process */
    int cors_any;                     /* HAMEL_CORS_ORIGINS == "*" */
    int n_origins;
    char origins[CONFIG_MAX_ORIGINS][256];
} server_config;

/* The kinds of value a setting takes. CONFIG_ENGINE settings are read by the engine
 * itself (engine/mech/native.c reads HAMEL_CC, ...): the table lists them so that
 * --help and the README name them, and config_load leaves them to the engine. */
typedef enum config_type {
    CONFIG_STRING,  /* copied into a char array of `size` bytes */
    CONFIG_INT,     /* an int in [lo, hi] */
    CONFIG_LONG,    /* a long in [lo, hi] */
    CONFIG_SIZE,    /* a size_t in [lo, hi] */
    CONFIG_SECONDS, /* a double >= min */
    CONFIG_ORIGINS, /* "*" or a comma list of origins (cors_any, origins) */
    CONFIG_ENGINE,  /* read by the engine from the environment */
} config_type;

/* One setting: one row of config_settings drives the environment, the flags, --help and
 * the README's list (--help-markdown), after Redis's standardConfig. */
typedef struct config_setting {
    const char *name; /* the long flag without "--", e.g. "max-body" */
    const char *env;  /* the environment variable, e.g. "HAMEL_MAX_BODY" */
    char letter;      /* the short flag, or 0 */
    int has_flag;     /* whether --name sets it (not for CONFIG_ENGINE) */
    config_type type;
    size_t offset;      /* of the field in server_config */
    size_t size;        /* of a CONFIG_STRING field */
    const char *def;    /* the default as its variable would give it, or NULL (computed) */
    const char *shown;  /* the default as --help shows it, when not `def` */
    long lo, hi;        /* bounds of integers */
    double min;         /* lower bound of seconds */
    int empty_is_value; /* an empty variable is a value, not "keep the default" */
    const char *help;   /* what it does, one or a few sentences (Markdown backquotes) */
} config_setting;

/* Every setting, in the order --help lists them; config_n_settings rows. */
extern const config_setting config_settings[];
extern const size_t config_n_settings;

/* Writes the usage text (markdown = 0) or the README's list of settings (markdown = 1). */
void config_print_help(FILE *out, int markdown);

/* Fills *cfg from defaults, then the environment, then argv. A numeric variable set to
 * the empty string keeps its default (compose files pass ${VAR:-} through); for the
 * string settings (HAMEL_TOKEN, HAMEL_STATIC, ...) the empty string is a value. Returns 0, 1 when
 * --help or --help-markdown was asked for (printed on stdout), or -1 with a message on stderr. Borrows argv.
 */
int config_load(server_config *cfg, int argc, char **argv);

/* Whether `origin` may read responses under the CORS settings. Borrows both. */
int config_origin_allowed(const server_config *cfg, const char *origin);

#endif
