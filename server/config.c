/* config.c — the settings of hamel-server: one table (config_settings) drives the
 * defaults, the environment, the flags, --help and the README's list of settings. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONFIG_MAX_WAIT_SECONDS 300.0 /* longest ?wait=N honoured; not a setting */
#define CONFIG_OPT_BASE 256           /* getopt_long values of long-only flags: base + row */
#define CONFIG_HELP_MARKDOWN 1000     /* getopt_long value of --help-markdown */
#define CONFIG_HELP_WIDTH 88          /* columns of --help */

#define CONFIG_AT(field) offsetof(server_config, field), sizeof(((server_config *)0)->field)

/* Rows: name (flag), variable, short flag, has flag, type, field, default, shown default,
 * integer bounds, lower bound of seconds, empty-is-value, help. */
#define CONFIG_STR(n, e, l, f, d, shown, ev, h)                                                              \
    {                                                                                                        \
        n, e, l, 1, CONFIG_STRING, CONFIG_AT(f), d, shown, 0, 0, 0, ev, h                                    \
    }
#define CONFIG_NUM(n, e, l, t, f, d, shown, lo, hi, h)                                                       \
    {                                                                                                        \
        n, e, l, 1, t, CONFIG_AT(f), d, shown, lo, hi, 0, 0, h                                               \
    }
#define CONFIG_SEC(n, e, f, d, shown, min, h)                                                                \
    {                                                                                                        \
        n, e, 0, 1, CONFIG_SECONDS, CONFIG_AT(f), d, shown, 0, 0, min, 0, h                                  \
    }
#define CONFIG_ENG(n, e, shown, h)                                                                           \
    {                                                                                                        \
        n, e, 0, 0, CONFIG_ENGINE, 0, 0, NULL, shown, 0, 0, 0, 0, h                                          \
    }

const config_setting config_settings[] = {
    CONFIG_STR("addr", "HAMEL_ADDR", 'a', addr, "127.0.0.1", NULL, 0, "The address to listen on."),
    CONFIG_NUM("port", "HAMEL_PORT", 'p', CONFIG_INT, port, "8080", NULL, 0, 65535,
               "The port; 0 picks a free port and prints `listening on http://127.0.0.1:PORT`."),
    CONFIG_NUM("workers", "HAMEL_WORKERS", 'w', CONFIG_INT, workers, NULL, "the number of cores", 1, 1024,
               "Simulation threads."),
    CONFIG_NUM("queue", "HAMEL_QUEUE", 'q', CONFIG_INT, queue, "64", NULL, 1, 1000000,
               "Queued jobs, then 503 with Retry-After; with `HAMEL_REDIS`, the shared queue's length."),
    CONFIG_NUM("http-threads", "HAMEL_HTTP_THREADS", 0, CONFIG_INT, http_threads, NULL,
               "the number of cores, at least 2", 1, 256,
               "libmicrohttpd's poll threads; twice as many more compile new models and make the store's "
               "and Redis's round trips so that no poll thread waits on them, and as many again on a "
               "second lane for derivations (`?form=`, /v1/hamel, /v1/evaluate, /v1/linearize), so a new "
               "model never waits behind them. A form past the compile limit is derived once for all who "
               "ask meanwhile and its 422 remembered for 10 minutes."),
    CONFIG_STR("data", "HAMEL_DATA", 'd', data, "./data", NULL, 0,
               "The SQLite store of models, results and jobs, which survives restarts and kill -9 (with "
               "`results.journal`, where a finished job's result is written before its answer and committed "
               "to the database right after)."),
    CONFIG_STR("token", "HAMEL_TOKEN", 't', token, "", "none", 1,
               "When set, every /v1 request needs `Authorization: Bearer <token>`, unknown /v1 paths too "
               "(401 before 404)."),
    CONFIG_STR("token-file", "HAMEL_TOKEN_FILE", 0, token_file, "", "none", 0,
               "The bearer token read from this file (its first line, surrounding whitespace dropped), so "
               "it is not in the environment or the command line that `ps` shows; instead of "
               "`HAMEL_TOKEN`, not with it. An empty file is refused (it would turn the token off); a file "
               "that others can read or write is started with a warning (make it 0600, or 0400)."),
    CONFIG_STR("metrics-token", "HAMEL_METRICS_TOKEN", 0, metrics_token, "", "none", 1,
               "When set, `/metrics` needs `Authorization: Bearer` with it."),
    {"cors", "HAMEL_CORS_ORIGINS", 'c', 1, CONFIG_ORIGINS, 0, 0, "*", NULL, 0, 0, 0, 1,
     "The origins whose pages may read responses: `*` or a comma list."},
    CONFIG_NUM("cache-bytes", "HAMEL_CACHE_BYTES", 'b', CONFIG_SIZE, cache_bytes, "268435456", "256 MiB", 0,
               1L << 40, "Models and results kept in memory, least recently used dropped first."),
    CONFIG_NUM("store-bytes", "HAMEL_STORE_BYTES", 0, CONFIG_SIZE, store_bytes, "1073741824", "1 GiB", 4096,
               1L << 50,
               "Result bodies kept on disk (or in Redis), oldest dropped first; a job whose result was "
               "dropped answers 410."),
    CONFIG_NUM("store-jobs", "HAMEL_STORE_JOBS", 0, CONFIG_SIZE, store_jobs, "1000000", "a million", 16,
               1L << 40, "Job records kept on disk, oldest dropped first."),
    CONFIG_STR("static", "HAMEL_STATIC", 's', statics, NULL, "clients/web/dist, else clients/web, if there",
               1,
               "The web front end served at `/`, \"\" for none. Files are served only from inside it (a "
               "symbolic link out of it answers 404)."),
    CONFIG_NUM("store-model-bytes", "HAMEL_STORE_MODEL_BYTES", 0, CONFIG_SIZE, store_model_bytes, "268435456",
               "256 MiB", 4096, 1L << 50,
               "Models kept on disk (the JSON text they were posted as), oldest dropped first: posting "
               "new models cannot fill the disk. A model dropped is unknown by its id (404) until it is "
               "posted again; jobs and results that name it are kept."),
    CONFIG_NUM("max-body", "HAMEL_MAX_BODY", 0, CONFIG_SIZE, max_body, "4194304", "4 MiB", 1024, 1L << 30,
               "Bytes of one request body."),
    CONFIG_NUM("bodies-bytes", "HAMEL_BODIES_BYTES", 0, CONFIG_SIZE, bodies_bytes, "268435456", "256 MiB",
               65536, 1L << 40,
               "Bytes all request bodies past 64 KiB may hold together while they arrive (at least 4 at "
               "`HAMEL_MAX_BODY`), so slow uploads cannot hold max connections x max body of memory; a body "
               "past it is answered 503 with Retry-After. A body is let go once the request is parked on "
               "a long-poll."),
    CONFIG_SEC("max-wall", "HAMEL_MAX_WALL", max_wall, "0", "0: the engine's", 0, "Wall seconds of one job."),
    CONFIG_NUM("max-steps", "HAMEL_MAX_STEPS", 0, CONFIG_LONG, max_steps, "0", "0: the engine's", 0, 1L << 40,
               "Integration steps of one job."),
    CONFIG_NUM(
        "max-output-values", "HAMEL_MAX_OUTPUT_VALUES", 0, CONFIG_SIZE, max_output_values, "2000000", NULL,
        1000, 1L << 40,
        "Numbers in one result, samples x series (about 58 MB of JSON; with \"hamel\": \"samples\" "
        "each sample's "
        "coefficients count, as they do in POST /v1/hamel: points x (t, q and j, r, l, value of each "
        "coefficient listed), and in POST /v1/linearize and /v1/evaluate: points x (the state, A, B, the "
        "eigenvalues), states x (4 + 3n + 2k + m)), else 422 limit-exceeded."),
    CONFIG_NUM("max-jobs", "HAMEL_MAX_JOBS", 0, CONFIG_SIZE, max_jobs, "10000", NULL, 16, 100000000,
               "Job records kept in memory."),
    CONFIG_NUM("max-batch", "HAMEL_MAX_BATCH", 0, CONFIG_SIZE, max_batch, "10000", NULL, 1, 10000000,
               "Runs in one POST /v1/batches."),
    CONFIG_NUM("batch-bytes", "HAMEL_BATCH_BYTES", 0, CONFIG_SIZE, batch_bytes, "268435456", "256 MiB", 4096,
               1L << 40, "Result lines kept by all batches together."),
    CONFIG_NUM("max-connections", "HAMEL_MAX_CONNECTIONS", 0, CONFIG_INT, max_connections, "1024", NULL, 1,
               1000000, "Open connections."),
    /* One address may hold an eighth of the connections, so slow or idle connections from
     * one client (or a few) cannot take every slot: others still get in. */
    CONFIG_NUM("max-connections-per-ip", "HAMEL_MAX_CONNECTIONS_PER_IP", 0, CONFIG_INT, max_per_ip, "128",
               NULL, 0, 1000000,
               "Connections from one address, so slow clients from one address cannot take every slot; "
               "0 (no cap) behind a proxy, where every connection comes from the proxy."),
    CONFIG_NUM("conn-timeout", "HAMEL_CONN_TIMEOUT", 0, CONFIG_INT, conn_timeout, "30", NULL, 1, 86400,
               "Idle seconds before a connection is closed."),
    CONFIG_SEC("head-seconds", "HAMEL_HEAD_SECONDS", head_seconds, "10", NULL, 0.1,
               "A request's head must arrive whole within it, however slowly it trickles, and near the "
               "connection limit the connections waiting longest for a head, or for the rest of a body, "
               "are closed first, so slow clients from many addresses cannot lock others out."),
    CONFIG_SEC("max-compile-seconds", "HAMEL_MAX_COMPILE_SECONDS", max_compile_seconds, "0",
               "0: the engine's, 2", 0,
               "Seconds of CPU time (of the thread doing the work) to compile one model, derive a form, "
               "answer one evaluate or linearize (the steady search: 5 times it), then 422 compile-limit; "
               "the same answer however loaded the machine is. A wall-clock backstop of 4 times it ends "
               "work that is starved or stalled (the problem's detail says which clock stopped it)."),
    CONFIG_NUM("max-compile-bytes", "HAMEL_MAX_COMPILE_BYTES", 0, CONFIG_SIZE, max_compile_bytes, "0",
               "0: the engine's, 256 MiB", 1L << 20, 1L << 40,
               "Memory to compile one model, then 422 compile-limit."),
    CONFIG_SEC(
        "drain-seconds", "HAMEL_DRAIN_SECONDS", drain_seconds, "10", NULL, 0,
        "SIGTERM lets running jobs finish for this long (then cancels them) and exits within it + 1 s."),
    CONFIG_NUM("hangup-poll-ms", "HAMEL_HANGUP_POLL_MS", 0, CONFIG_INT, hangup_poll_ms, "50", NULL, 1, 60000,
               "How often the sockets of requests whose model is compiling are checked for a client that "
               "hung up, which cancels the compilation."),
    CONFIG_NUM("access-log", "HAMEL_ACCESS_LOG", 0, CONFIG_INT, access_log, "1", NULL, 0, 1,
               "One access-log line per request on stderr; 0 silences it."),
    CONFIG_STR("cache-dir", "HAMEL_CACHE_DIR", 0, cache_dir, "", "`$HAMEL_DATA/native`", 0,
               "Shared objects of the optimizing code tier, built with `cc -O2` in the background for "
               "models run more than once. The directory must be the server's own and not writable by "
               "others (see engine/DESIGN.md, Code tiers)."),
    CONFIG_ENG("no-native", "HAMEL_NO_NATIVE", "0", "1 turns the optimizing code tier off."),
    CONFIG_ENG("cc", "HAMEL_CC", "cc", "The compiler of the optimizing code tier."),
    CONFIG_ENG("native-part", "HAMEL_NATIVE_PART", "500 past 4000",
               "Measurements only: tape slots per function of the optimizing tier's C (0: one function). "
               "By default a tape of more than 4,000 slots is written as functions of at most 500, which "
               "keeps the compiler's time and memory about linear in the tape."),
    CONFIG_ENG("native-isa", "HAMEL_NATIVE_ISA", "auto",
               "Measurements only: 0 compiles the optimizing tier's C for the compiler's default "
               "instruction set. By default it is compiled with `-mavx` where the CPU has AVX (the same "
               "results to the bit, about 0.8x the time per right-hand side)."),
    CONFIG_ENG("native-key-file", "HAMEL_NATIVE_KEY_FILE", "`$HAMEL_CACHE_DIR.key`",
               "A shared object is loaded only if it verifies against an HMAC under the key in this "
               "file, made 0600 on first start."),
    CONFIG_NUM(
        "isolate", "HAMEL_ISOLATE", 0, CONFIG_INT, isolate, "1", NULL, 0, 1,
        "The engine runs in worker processes (`hamel-server --engine-worker`, exec'd by the server, one "
        "per thread that can call it): a crash in the engine costs one request or job (500 `engine-fault` "
        "naming the model and the signal), never the service, and the model is quarantined in the store "
        "(`DELETE /v1/quarantine/{model_id}` clears it). 0 runs the engine inside the server instead, for "
        "comparison only: a crash then takes the server down."),
    CONFIG_NUM("worker-memory-mb", "HAMEL_WORKER_MEMORY_MB", 0, CONFIG_LONG, worker_memory_mb, "4096", NULL,
               0, 1L << 30,
               "The address space (MiB) an engine worker process may map beyond its start; 0: no cap."),
    CONFIG_SEC("quarantine-seconds", "HAMEL_QUARANTINE_SECONDS", quarantine_seconds, "86400", NULL, 0,
               "How long a model the engine crashed on is answered at once with its 500 engine-fault."),
    CONFIG_ENG(
        "test-faults", "HAMEL_TEST_FAULTS", "0",
        "Tests only: 1 makes models named `__fault_segv__`, `__fault_oom__`, `__fault_abort__` crash the "
        "engine on purpose."),
    CONFIG_ENG("test-journal-hold", "HAMEL_TEST_JOURNAL_HOLD", "0",
               "Tests only: 1 holds a finished job's commit back until another write's (its result is in "
               "`results.journal` meanwhile), so that a test's kill -9 finds it only there."),
    CONFIG_STR(
        "redis", "HAMEL_REDIS", 0, redis, "", "none: SQLite", 0,
        "`redis://host:port` (or `redis://:password@host:port`, `redis://user:password@host:port/db`): "
        "models, results, job records and the job queue in one Redis shared by every instance "
        "(see Several machines)."),
    CONFIG_SEC("redis-lease", "HAMEL_REDIS_LEASE", redis_lease, "15", NULL, 0.3,
               "Seconds before the job of an instance that died is taken over by another and run again."),
    CONFIG_SEC("redis-timeout", "HAMEL_REDIS_TIMEOUT", redis_timeout, "2", NULL, 0.05,
               "Seconds for one Redis command; while Redis cannot be reached, requests that need it "
               "answer 503 within it."),
    CONFIG_NUM("redis-ttl", "HAMEL_REDIS_TTL", 0, CONFIG_LONG, redis_ttl, "604800", "a week", 1, 1L << 40,
               "Seconds results and job records are kept in Redis."),
};
const size_t config_n_settings = sizeof config_settings / sizeof config_settings[0];

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

static int config__double(const char *name, const char *s, double min, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0)) {
        fprintf(stderr, "hamel-server: %s=%s: expected a number >= 0\n", name, s);
        return -1;
    }
    if (v < min) {
        fprintf(stderr, "hamel-server: %s=%s: at least %g seconds\n", name, s, min);
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

/* Reads the bearer token from cfg->token_file into cfg->token: its first line without
 * surrounding whitespace. Refuses a token also given by HAMEL_TOKEN, a file that is not
 * a regular file or cannot be read, an empty token and one too long; warns when group or
 * others may read or write the file. Returns 0 or -1 with a message on stderr. */
static int config__token_file(server_config *cfg)
{
    const char *path = cfg->token_file;
    if (cfg->token[0]) {
        fprintf(stderr, "hamel-server: HAMEL_TOKEN and HAMEL_TOKEN_FILE are both set: give one\n");
        return -1;
    }
    FILE *f = fopen(path, "re");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "hamel-server: HAMEL_TOKEN_FILE=%s: %s\n", path,
                f ? "not a regular file" : strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO))
        fprintf(stderr,
                "hamel-server: warning: HAMEL_TOKEN_FILE=%s can be read or written by others (mode %03o); "
                "chmod 600 it\n",
                path, (unsigned)(st.st_mode & 0777));
    char line[sizeof cfg->token + 2];
    size_t n = fgets(line, sizeof line, f) ? strlen(line) : 0;
    int too_long = n == sizeof line - 1 && line[n - 1] != '\n' && fgetc(f) != EOF;
    fclose(f);
    const char *p = line;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
        n--;
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    if (too_long || n >= sizeof cfg->token) {
        fprintf(stderr, "hamel-server: HAMEL_TOKEN_FILE=%s: the token is longer than %zu characters\n", path,
                sizeof cfg->token - 1);
        return -1;
    }
    if (n == 0) {
        fprintf(stderr, "hamel-server: HAMEL_TOKEN_FILE=%s: the file holds no token\n", path);
        return -1;
    }
    memcpy(cfg->token, p, n);
    cfg->token[n] = '\0';
    return 0;
}

/* Sets one row's field from the text v, checking its bounds unless `trusted` (a default
 * from the table, which may lie outside them: 0 means "the engine's"). */
static int config__set(server_config *cfg, const config_setting *row, const char *v, int trusted)
{
    char *field = (char *)cfg + row->offset;
    long l = 0;
    double d = 0;
    long lo = trusted ? LONG_MIN : row->lo, hi = trusted ? LONG_MAX : row->hi;
    int rc = 0;
    switch (row->type) {
    case CONFIG_STRING: return config__copy(row->env, field, row->size, v);
    case CONFIG_ORIGINS: return config__origins(cfg, v);
    case CONFIG_ENGINE: return 0;
    case CONFIG_SECONDS:
        rc = config__double(row->env, v, trusted ? 0 : row->min, &d);
        if (rc == 0)
            memcpy(field, &d, sizeof d);
        return rc;
    case CONFIG_INT:
    case CONFIG_LONG:
    case CONFIG_SIZE: break;
    }
    rc = config__long(row->env, v, lo, hi, &l);
    if (rc != 0)
        return rc;
    if (row->type == CONFIG_INT) {
        int i = (int)l;
        memcpy(field, &i, sizeof i);
    } else if (row->type == CONFIG_LONG) {
        memcpy(field, &l, sizeof l);
    } else {
        size_t z = (size_t)l;
        memcpy(field, &z, sizeof z);
    }
    return 0;
}

/* The defaults: each row's `def`, then the computed ones. */
static void config__defaults(server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < config_n_settings; i++)
        if (config_settings[i].def)
            (void)config__set(cfg, &config_settings[i], config_settings[i].def, 1);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->workers = cores > 0 ? (int)cores : 1;
    cfg->http_threads = cfg->workers < 2 ? 2 : cfg->workers;
    if (config__is_dir("clients/web/dist"))
        strcpy(cfg->statics, "clients/web/dist");
    else if (config__is_dir("clients/web"))
        strcpy(cfg->statics, "clients/web");
    cfg->max_wait = CONFIG_MAX_WAIT_SECONDS;
}

/* The kind of value of a row, for --help. */
static void config__values(const config_setting *row, char *buf, size_t cap)
{
    switch (row->type) {
    case CONFIG_STRING: snprintf(buf, cap, "text"); break;
    case CONFIG_ORIGINS: snprintf(buf, cap, "origins"); break;
    case CONFIG_ENGINE: snprintf(buf, cap, "text, read by the engine"); break;
    case CONFIG_SECONDS:
        if (row->min > 0)
            snprintf(buf, cap, "seconds >= %g", row->min);
        else
            snprintf(buf, cap, "seconds >= 0");
        break;
    case CONFIG_INT:
    case CONFIG_LONG:
    case CONFIG_SIZE: snprintf(buf, cap, "integer in [%ld, %ld]", row->lo, row->hi); break;
    }
}

/* Writes text wrapped at CONFIG_HELP_WIDTH columns, each line indented by `indent`. */
static void config__wrap(FILE *out, const char *text, int indent)
{
    const char *p = text;
    while (*p) {
        size_t n = strlen(p), cut = n;
        if (n > CONFIG_HELP_WIDTH - (size_t)indent) {
            cut = CONFIG_HELP_WIDTH - (size_t)indent;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = n;
        }
        fprintf(out, "%*s%.*s\n", indent, "", (int)cut, p);
        p += cut;
        while (*p == ' ')
            p++;
    }
}

void config_print_help(FILE *out, int markdown)
{
    if (!markdown)
        fprintf(out, "usage: hamel-server [--SETTING VALUE]...\n"
                     "\n"
                     "Each setting is read from its environment variable; its flag overrides the variable.\n"
                     "A numeric variable set to the empty string keeps its default.\n"
                     "--help-markdown prints this list as the README's \"Server settings\".\n\n");
    for (size_t i = 0; i < config_n_settings; i++) {
        const config_setting *row = &config_settings[i];
        char values[64], flags[96] = "", line[512];
        config__values(row, values, sizeof values);
        const char *def = row->shown ? row->shown : row->def;
        int quote = markdown && !row->shown && def && *def;
        if (row->has_flag && row->letter)
            snprintf(flags, sizeof flags, markdown ? " `--%s`, `-%c`" : ", --%s, -%c", row->name,
                     row->letter);
        else if (row->has_flag)
            snprintf(flags, sizeof flags, markdown ? " `--%s`" : ", --%s", row->name);
        snprintf(line, sizeof line, markdown ? "%s, default %s%s%s" : "%s; default %s%s%s.", values,
                 quote ? "`" : "", def && *def ? def : "none", quote ? "`" : "");
        if (markdown) {
            fprintf(out, "- `%s`%s (%s): %s\n", row->env, flags, line, row->help);
        } else {
            fprintf(out, "  %s%s\n", row->env, flags);
            config__wrap(out, line, 6);
            config__wrap(out, row->help, 6);
        }
    }
}

int config_load(server_config *cfg, int argc, char **argv)
{
    config__defaults(cfg);
    for (size_t i = 0; i < config_n_settings; i++) {
        const config_setting *row = &config_settings[i];
        const char *v = getenv(row->env);
        if (!v || (!*v && !row->empty_is_value))
            continue;
        if (config__set(cfg, row, v, 0) != 0)
            return -1;
    }

    /* The flags, from the table: a row's letter (if any) and its long name. */
    struct option opts[sizeof config_settings / sizeof config_settings[0] + 3];
    char shorts[2 * (sizeof config_settings / sizeof config_settings[0]) + 2];
    size_t no = 0, ns = 0;
    for (size_t i = 0; i < config_n_settings; i++) {
        const config_setting *row = &config_settings[i];
        if (!row->has_flag)
            continue;
        int val = row->letter ? row->letter : CONFIG_OPT_BASE + (int)i;
        opts[no++] = (struct option){row->name, required_argument, NULL, val};
        if (row->letter) {
            shorts[ns++] = row->letter;
            shorts[ns++] = ':';
        }
    }
    opts[no++] = (struct option){"help", no_argument, NULL, 'h'};
    opts[no++] = (struct option){"help-markdown", no_argument, NULL, CONFIG_HELP_MARKDOWN};
    opts[no] = (struct option){NULL, 0, NULL, 0};
    shorts[ns++] = 'h';
    shorts[ns] = '\0';
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, shorts, opts, NULL);
        if (c == -1)
            break;
        if (c == 'h' || c == CONFIG_HELP_MARKDOWN) {
            config_print_help(stdout, c == CONFIG_HELP_MARKDOWN);
            return 1;
        }
        const config_setting *row = NULL;
        if (c >= CONFIG_OPT_BASE && c < CONFIG_OPT_BASE + (int)config_n_settings)
            row = &config_settings[c - CONFIG_OPT_BASE];
        for (size_t i = 0; !row && c > 0 && c < CONFIG_OPT_BASE && i < config_n_settings; i++)
            if (config_settings[i].letter == c)
                row = &config_settings[i];
        if (!row) {
            fprintf(stderr, "usage: hamel-server [--SETTING VALUE]... (--help lists them)\n");
            return -1;
        }
        if (config__set(cfg, row, optarg, 0) != 0)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "hamel-server: unexpected argument %s\n", argv[optind]);
        return -1;
    }
    if (cfg->token_file[0])
        return config__token_file(cfg);
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
