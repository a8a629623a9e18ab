/* config.c — defaults, environment variables and flags of hamel-server. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_DEFAULT_PORT 8080
#define CONFIG_DEFAULT_QUEUE 64
#define CONFIG_DEFAULT_MAX_BODY (4u << 20)
#define CONFIG_DEFAULT_STORE_BYTES ((size_t)1 << 30) /* 1 GiB of results on disk */
#define CONFIG_DEFAULT_STORE_JOBS ((size_t)1000000)  /* about 300 MB of job records */
#define CONFIG_DEFAULT_CACHE_BYTES ((size_t)256 << 20)
#define CONFIG_DEFAULT_MAX_JOBS 10000
#define CONFIG_DEFAULT_MAX_BATCH 10000
#define CONFIG_DEFAULT_BATCH_BYTES ((size_t)256 << 20)
#define CONFIG_DEFAULT_MAX_CONNECTIONS 1024
/* One address may hold an eighth of the connections, so slow or idle connections from
 * one client (or a few) cannot take every slot: others still get in. Behind a proxy,
 * where every connection comes from the proxy, set it to 0 (the proxy limits clients). */
#define CONFIG_DEFAULT_MAX_PER_IP 128
#define CONFIG_DEFAULT_MAX_OUTPUT_VALUES ((size_t)2000000) /* about 58 MB of result JSON */
#define CONFIG_DEFAULT_CONN_TIMEOUT 30
#define CONFIG_DEFAULT_HEAD_SECONDS 10.0
#define CONFIG_MIN_HEAD_SECONDS 0.1
#define CONFIG_DEFAULT_HANGUP_POLL_MS 50
#define CONFIG_DEFAULT_REDIS_LEASE 15.0
#define CONFIG_DEFAULT_REDIS_TIMEOUT 2.0
#define CONFIG_DEFAULT_REDIS_TTL (7L * 86400) /* a week */
#define CONFIG_MAX_WAIT_SECONDS 300.0
#define CONFIG_DEFAULT_DRAIN_SECONDS 10.0

static int config__long(const char *name, const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "hamel-server: %s=%s: expected an integer in [%ld, %ld]\n", name, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int config__double(const char *name, const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0)) {
        fprintf(stderr, "hamel-server: %s=%s: expected a number >= 0\n", name, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int config__copy(const char *name, char *dst, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap) {
        fprintf(stderr, "hamel-server: %s is longer than %zu characters\n", name, cap - 1);
        return -1;
    }
    memcpy(dst, s, n + 1);
    return 0;
}

static int config__origins(server_config *cfg, const char *list)
{
    cfg->cors_any = 0;
    cfg->n_origins = 0;
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && t[-1] == ' ')
            t--;
        size_t n = (size_t)(t - p);
        if (n == 1 && *p == '*') {
            cfg->cors_any = 1;
        } else if (n > 0) {
            if (cfg->n_origins == CONFIG_MAX_ORIGINS || n >= sizeof cfg->origins[0]) {
                fprintf(stderr, "hamel-server: HAMEL_CORS_ORIGINS: too many or too long\n");
                return -1;
            }
            memcpy(cfg->origins[cfg->n_origins], p, n);
            cfg->origins[cfg->n_origins][n] = '\0';
            cfg->n_origins++;
        }
        p = e;
    }
    return 0;
}

static int config__is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* One setting by name, from the environment or a flag. */
static int config__set(server_config *cfg, const char *name, const char *v)
{
    long l = 0;
    int rc = 0;
    if (!strcmp(name, "HAMEL_ADDR")) {
        rc = config__copy(name, cfg->addr, sizeof cfg->addr, v);
    } else if (!strcmp(name, "HAMEL_PORT")) {
        rc = config__long(name, v, 0, 65535, &l);
        cfg->port = (int)l;
    } else if (!strcmp(name, "HAMEL_WORKERS")) {
        rc = config__long(name, v, 1, 1024, &l);
        cfg->workers = (int)l;
    } else if (!strcmp(name, "HAMEL_QUEUE")) {
        rc = config__long(name, v, 1, 1000000, &l);
        cfg->queue = (int)l;
    } else if (!strcmp(name, "HAMEL_HTTP_THREADS")) {
        rc = config__long(name, v, 1, 256, &l);
        cfg->http_threads = (int)l;
    } else if (!strcmp(name, "HAMEL_MAX_CONNECTIONS")) {
        rc = config__long(name, v, 1, 1000000, &l);
        cfg->max_connections = (int)l;
    } else if (!strcmp(name, "HAMEL_MAX_CONNECTIONS_PER_IP")) {
        rc = config__long(name, v, 0, 1000000, &l);
        cfg->max_per_ip = (int)l;
    } else if (!strcmp(name, "HAMEL_MAX_OUTPUT_VALUES")) {
        rc = config__long(name, v, 1000, 1L << 40, &l);
        cfg->max_output_values = (size_t)l;
    } else if (!strcmp(name, "HAMEL_CONN_TIMEOUT")) {
        rc = config__long(name, v, 1, 86400, &l);
        cfg->conn_timeout = (int)l;
    } else if (!strcmp(name, "HAMEL_HEAD_SECONDS")) {
        rc = config__double(name, v, &cfg->head_seconds);
        if (rc == 0 && cfg->head_seconds < CONFIG_MIN_HEAD_SECONDS) {
            fprintf(stderr, "hamel-server: HAMEL_HEAD_SECONDS=%s: at least %g seconds\n", v,
                    CONFIG_MIN_HEAD_SECONDS);
            rc = -1;
        }
    } else if (!strcmp(name, "HAMEL_HANGUP_POLL_MS")) {
        rc = config__long(name, v, 1, 60000, &l);
        cfg->hangup_poll_ms = (int)l;
    } else if (!strcmp(name, "HAMEL_MAX_BODY")) {
        rc = config__long(name, v, 1024, 1L << 30, &l);
        cfg->max_body = (size_t)l;
    } else if (!strcmp(name, "HAMEL_CACHE_BYTES")) {
        rc = config__long(name, v, 0, 1L << 40, &l);
        cfg->cache_bytes = (size_t)l;
    } else if (!strcmp(name, "HAMEL_MAX_JOBS")) {
        rc = config__long(name, v, 16, 100000000, &l);
        cfg->max_jobs = (size_t)l;
    } else if (!strcmp(name, "HAMEL_MAX_BATCH")) {
        rc = config__long(name, v, 1, 10000000, &l);
        cfg->max_batch = (size_t)l;
    } else if (!strcmp(name, "HAMEL_BATCH_BYTES")) {
        rc = config__long(name, v, 4096, 1L << 40, &l);
        cfg->batch_bytes = (size_t)l;
    } else if (!strcmp(name, "HAMEL_STORE_BYTES")) {
        rc = config__long(name, v, 4096, 1L << 50, &l);
        cfg->store_bytes = (size_t)l;
    } else if (!strcmp(name, "HAMEL_STORE_JOBS")) {
        rc = config__long(name, v, 16, 1L << 40, &l);
        cfg->store_jobs = (size_t)l;
    } else if (!strcmp(name, "HAMEL_MAX_WALL")) {
        rc = config__double(name, v, &cfg->max_wall);
    } else if (!strcmp(name, "HAMEL_MAX_STEPS")) {
        rc = config__long(name, v, 0, 1L << 40, &l);
        cfg->max_steps = l;
    } else if (!strcmp(name, "HAMEL_MAX_COMPILE_SECONDS")) {
        rc = config__double(name, v, &cfg->max_compile_seconds);
    } else if (!strcmp(name, "HAMEL_MAX_COMPILE_BYTES")) {
        rc = config__long(name, v, 1L << 20, 1L << 40, &l);
        cfg->max_compile_bytes = (size_t)l;
    } else if (!strcmp(name, "HAMEL_DRAIN_SECONDS")) {
        rc = config__double(name, v, &cfg->drain_seconds);
    } else if (!strcmp(name, "HAMEL_ACCESS_LOG")) {
        rc = config__long(name, v, 0, 1, &l);
        cfg->access_log = (int)l;
    } else if (!strcmp(name, "HAMEL_DATA")) {
        rc = config__copy(name, cfg->data, sizeof cfg->data, v);
    } else if (!strcmp(name, "HAMEL_TOKEN")) {
        rc = config__copy(name, cfg->token, sizeof cfg->token, v);
    } else if (!strcmp(name, "HAMEL_METRICS_TOKEN")) {
        rc = config__copy(name, cfg->metrics_token, sizeof cfg->metrics_token, v);
    } else if (!strcmp(name, "HAMEL_STATIC")) {
        rc = config__copy(name, cfg->statics, sizeof cfg->statics, v);
    } else if (!strcmp(name, "HAMEL_REDIS")) {
        rc = config__copy(name, cfg->redis, sizeof cfg->redis, v);
    } else if (!strcmp(name, "HAMEL_REDIS_LEASE")) {
        rc = config__double(name, v, &cfg->redis_lease);
        if (rc == 0 && cfg->redis_lease < 0.3) {
            fprintf(stderr, "hamel-server: HAMEL_REDIS_LEASE=%s: at least 0.3 seconds\n", v);
            rc = -1;
        }
    } else if (!strcmp(name, "HAMEL_REDIS_TIMEOUT")) {
        rc = config__double(name, v, &cfg->redis_timeout);
        if (rc == 0 && cfg->redis_timeout < 0.05) {
            fprintf(stderr, "hamel-server: HAMEL_REDIS_TIMEOUT=%s: at least 0.05 seconds\n", v);
            rc = -1;
        }
    } else if (!strcmp(name, "HAMEL_REDIS_TTL")) {
        rc = config__long(name, v, 1, 1L << 40, &l);
        cfg->redis_ttl = l;
    } else if (!strcmp(name, "HAMEL_CORS_ORIGINS")) {
        rc = config__origins(cfg, v);
    }
    return rc;
}

static const char *const config__names[] = {
    "HAMEL_ADDR",
    "HAMEL_PORT",
    "HAMEL_WORKERS",
    "HAMEL_QUEUE",
    "HAMEL_HTTP_THREADS",
    "HAMEL_MAX_CONNECTIONS",
    "HAMEL_CONN_TIMEOUT",
    "HAMEL_HEAD_SECONDS",
    "HAMEL_HANGUP_POLL_MS",
    "HAMEL_MAX_BODY",
    "HAMEL_CACHE_BYTES",
    "HAMEL_MAX_JOBS",
    "HAMEL_MAX_WALL",
    "HAMEL_MAX_STEPS",
    "HAMEL_DRAIN_SECONDS",
    "HAMEL_ACCESS_LOG",
    "HAMEL_DATA",
    "HAMEL_TOKEN",
    "HAMEL_METRICS_TOKEN",
    "HAMEL_STATIC",
    "HAMEL_CORS_ORIGINS",
    "HAMEL_MAX_BATCH",
    "HAMEL_BATCH_BYTES",
    "HAMEL_STORE_BYTES",
    "HAMEL_STORE_JOBS",
    "HAMEL_MAX_CONNECTIONS_PER_IP",
    "HAMEL_MAX_OUTPUT_VALUES",
    "HAMEL_REDIS",
    "HAMEL_REDIS_LEASE",
    "HAMEL_REDIS_TIMEOUT",
    "HAMEL_REDIS_TTL",
    "HAMEL_MAX_COMPILE_SECONDS",
    "HAMEL_MAX_COMPILE_BYTES",
};

/* Whether an empty value of this setting is a value of its own, not "use the default". */
static int config__empty_is_value(const char *name)
{
    return !strcmp(name, "HAMEL_TOKEN") || !strcmp(name, "HAMEL_METRICS_TOKEN") ||
           !strcmp(name, "HAMEL_STATIC") || !strcmp(name, "HAMEL_CORS_ORIGINS");
}

static void config__usage(void)
{
    printf("usage: hamel-server [--addr A] [--port P] [--workers N] [--queue N] [--data DIR]\n"
           "                    [--token T] [--cors ORIGINS] [--cache-bytes N] [--static DIR]\n"
           "Each flag overrides its environment variable (HAMEL_ADDR, HAMEL_PORT, ...).\n");
}

int config_load(server_config *cfg, int argc, char **argv)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->addr, "127.0.0.1");
    cfg->port = CONFIG_DEFAULT_PORT;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->workers = cores > 0 ? (int)cores : 1;
    cfg->queue = CONFIG_DEFAULT_QUEUE;
    cfg->http_threads = cfg->workers < 2 ? 2 : cfg->workers;
    cfg->max_connections = CONFIG_DEFAULT_MAX_CONNECTIONS;
    cfg->max_per_ip = CONFIG_DEFAULT_MAX_PER_IP;
    cfg->max_output_values = CONFIG_DEFAULT_MAX_OUTPUT_VALUES;
    cfg->redis_lease = CONFIG_DEFAULT_REDIS_LEASE;
    cfg->redis_timeout = CONFIG_DEFAULT_REDIS_TIMEOUT;
    cfg->redis_ttl = CONFIG_DEFAULT_REDIS_TTL;
    cfg->conn_timeout = CONFIG_DEFAULT_CONN_TIMEOUT;
    cfg->head_seconds = CONFIG_DEFAULT_HEAD_SECONDS;
    cfg->hangup_poll_ms = CONFIG_DEFAULT_HANGUP_POLL_MS;
    cfg->max_body = CONFIG_DEFAULT_MAX_BODY;
    cfg->cache_bytes = CONFIG_DEFAULT_CACHE_BYTES;
    cfg->max_jobs = CONFIG_DEFAULT_MAX_JOBS;
    cfg->max_batch = CONFIG_DEFAULT_MAX_BATCH;
    cfg->batch_bytes = CONFIG_DEFAULT_BATCH_BYTES;
    cfg->store_bytes = CONFIG_DEFAULT_STORE_BYTES;
    cfg->store_jobs = CONFIG_DEFAULT_STORE_JOBS;
    cfg->max_wait = CONFIG_MAX_WAIT_SECONDS;
    cfg->drain_seconds = CONFIG_DEFAULT_DRAIN_SECONDS;
    cfg->access_log = 1;
    cfg->cors_any = 1;
    strcpy(cfg->data, "./data");
    if (config__is_dir("clients/web/dist"))
        strcpy(cfg->statics, "clients/web/dist");
    else if (config__is_dir("clients/web"))
        strcpy(cfg->statics, "clients/web");

    for (size_t i = 0; i < sizeof config__names / sizeof config__names[0]; i++) {
        const char *v = getenv(config__names[i]);
        if (!v || (!*v && !config__empty_is_value(config__names[i])))
            continue;
        if (config__set(cfg, config__names[i], v) != 0)
            return -1;
    }

    static const struct option opts[] = {
        {"addr", required_argument, NULL, 'a'},
        {"port", required_argument, NULL, 'p'},
        {"workers", required_argument, NULL, 'w'},
        {"queue", required_argument, NULL, 'q'},
        {"data", required_argument, NULL, 'd'},
        {"token", required_argument, NULL, 't'},
        {"cors", required_argument, NULL, 'c'},
        {"cache-bytes", required_argument, NULL, 'b'},
        {"static", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, "a:p:w:q:d:t:c:b:s:h", opts, NULL);
        if (c == -1)
            break;
        const char *name = NULL;
        switch (c) {
        case 'a': name = "HAMEL_ADDR"; break;
        case 'p': name = "HAMEL_PORT"; break;
        case 'w': name = "HAMEL_WORKERS"; break;
        case 'q': name = "HAMEL_QUEUE"; break;
        case 'd': name = "HAMEL_DATA"; break;
        case 't': name = "HAMEL_TOKEN"; break;
        case 'c': name = "HAMEL_CORS_ORIGINS"; break;
        case 'b': name = "HAMEL_CACHE_BYTES"; break;
        case 's': name = "HAMEL_STATIC"; break;
        case 'h': config__usage(); return 1;
        default: config__usage(); return -1;
        }
        if (config__set(cfg, name, optarg) != 0)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "hamel-server: unexpected argument %s\n", argv[optind]);
        return -1;
    }
    return 0;
}

int config_origin_allowed(const server_config *cfg, const char *origin)
{
    if (cfg->cors_any)
        return 1;
    if (!origin)
        return 0;
    for (int i = 0; i < cfg->n_origins; i++)
        if (!strcmp(cfg->origins[i], origin))
            return 1;
    return 0;
}
