/* redis.c — the Redis store backend and the shared job queue (redis.h).
 *
 * Keys: hamel:model:<id> (model JSON), hamel:result:<key> (result body),
 * hamel:results (sorted set of result keys by time written), hamel:result_sizes (hash
 * key -> bytes), hamel:result_bytes (their sum), hamel:job:<id> (hash: status,
 * model_id, key, doc, created), hamel:queue (the stream), channel hamel:events.
 *
 * Lock order: redis_pool.mu and redis_queue.mu are leaves; no Redis command is sent
 * while holding either. */
#include "redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "problems.h"

#define REDIS_POOL_MAX 64 /* idle connections kept */
#define REDIS_HOST_MAX 256
#define REDIS_CRED_MAX 256  /* a user name or password, decoded */
#define REDIS_SHOWN_MAX 640 /* a URL as printed, its password masked */
#define REDIS_DB_MAX 1000000L
#define REDIS_RUNNING_MAX 1024      /* entries one process runs at once (workers) */
#define REDIS_TRIM_PER_WRITE 64     /* expired results dropped by one write, at most */
#define REDIS_BACKOFF_NS 200000000L /* subscriber reconnect: 200 ms */

/* ---- connections ------------------------------------------------------------------ */

typedef struct redis_pool {
    pthread_mutex_t mu;
    char host[REDIS_HOST_MAX];
    int port;
    char user[REDIS_CRED_MAX], pass[REDIS_CRED_MAX]; /* AUTH on every new connection when pass[0] */
    long db;                                         /* SELECT on every new connection when not 0 */
    char shown[REDIS_SHOWN_MAX];                     /* the URL with its password masked */
    struct timeval timeout;
    redisContext *idle[REDIS_POOL_MAX];
    int nidle;
} redis_pool;

static double redis__wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int redis__hex(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Copies s[0..n) into out[cap], decoding %XX. Returns 0, or -1 when malformed or too long. */
static int redis__decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int ch = (unsigned char)s[i];
        if (ch == '%') {
            if (n - i < 3 || redis__hex(s[i + 1]) < 0 || redis__hex(s[i + 2]) < 0)
                return -1;
            ch = redis__hex(s[i + 1]) * 16 + redis__hex(s[i + 2]);
            i += 2;
        }
        if (ch == 0 || k + 1 >= cap)
            return -1;
        out[k++] = (char)ch;
    }
    out[k] = '\0';
    return 0;
}

/* What a Redis URL says. */
typedef struct redis_url {
    char host[REDIS_HOST_MAX];
    int port;
    char user[REDIS_CRED_MAX], pass[REDIS_CRED_MAX];
    long db;
} redis_url;

/* Parses redis://[[user]:password@]host[:port][/db] (port 6379, database 0 if absent;
 * user and password may be %-encoded; host may be an [IPv6] literal). Returns 0, or -1
 * with the reason in why (which never holds the password). */
static int redis__parse_url(const char *url, redis_url *u, const char **why)
{
    static const char scheme[] = "redis://", tls[] = "rediss://";
    memset(u, 0, sizeof *u);
    *why = "expected redis://[[user]:password@]host[:port][/db]";
    if (!strncmp(url, tls, sizeof tls - 1)) {
        *why = "rediss:// (TLS) is not supported: this build's hiredis has no TLS (hiredis_ssl); reach Redis "
               "over a private network or a TLS tunnel and use redis://";
        return -1;
    }
    if (strncmp(url, scheme, sizeof scheme - 1) != 0)
        return -1;
    const char *a = url + sizeof scheme - 1;
    const char *end = a + strcspn(a, "/?#");
    const char *at = NULL;
    for (const char *q = a; q < end; q++)
        if (*q == '@')
            at = q; /* the last one: an unencoded '@' in the password still parses */
    if (at) {
        const char *colon = memchr(a, ':', (size_t)(at - a));
        if (!colon) {
            *why = "a password goes after a colon: redis://:password@host or redis://user:password@host";
            return -1;
        }
        if (redis__decode(a, (size_t)(colon - a), u->user, sizeof u->user) != 0 ||
            redis__decode(colon + 1, (size_t)(at - colon - 1), u->pass, sizeof u->pass) != 0 || !u->pass[0]) {
            *why = "the user or password is empty, longer than 255 bytes or badly %-encoded";
            return -1;
        }
        a = at + 1;
    }
    const char *h = a, *hend;
    const char *portp = NULL;
    if (*a == '[') {
        const char *close = memchr(a, ']', (size_t)(end - a));
        if (!close)
            return -1;
        h = a + 1;
        hend = close;
        if (close + 1 < end) {
            if (close[1] != ':')
                return -1;
            portp = close + 1;
        }
    } else {
        portp = memchr(a, ':', (size_t)(end - a));
        hend = portp ? portp : end;
    }
    size_t n = (size_t)(hend - h);
    if (n == 0 || n >= REDIS_HOST_MAX)
        return -1;
    memcpy(u->host, h, n);
    u->host[n] = '\0';
    u->port = 6379;
    if (portp) {
        char *e = NULL;
        long p = strtol(portp + 1, &e, 10);
        if (e != end || p < 1 || p > 65535)
            return -1;
        u->port = (int)p;
    }
    if (*end == '/' && end[1]) {
        char *e = NULL;
        errno = 0;
        u->db = strtol(end + 1, &e, 10);
        if (errno || *e || e == end + 1 || u->db < 0 || u->db > REDIS_DB_MAX) {
            *why = "the database after the slash must be a number (redis://host:port/3)";
            return -1;
        }
    } else if (*end && strcmp(end, "/") != 0) {
        return -1;
    }
    return 0;
}

void redis_url_shown(const char *url, char *buf, size_t cap)
{
    static const char mask[] = "***";
    const char *a = strstr(url, "://");
    a = a ? a + 3 : url;
    const char *end = a + strcspn(a, "/?#");
    const char *at = NULL;
    for (const char *q = a; q < end; q++)
        if (*q == '@')
            at = q;
    if (!at) {
        snprintf(buf, cap, "%s", url);
        return;
    }
    const char *colon = memchr(a, ':', (size_t)(at - a));
    const char *cut = colon ? colon + 1 : a; /* without a colon the whole user part is masked */
    snprintf(buf, cap, "%.*s%s%s", (int)(cut - url), url, mask, at);
}

static int redis__pool_init(redis_pool *p, const char *url, double timeout)
{
    memset(p, 0, sizeof *p);
    redis_url_shown(url, p->shown, sizeof p->shown);
    redis_url u;
    const char *why = NULL;
    if (redis__parse_url(url, &u, &why) != 0) {
        fprintf(stderr, "hamel-server: HAMEL_REDIS=%s: %s\n", p->shown, why);
        return -1;
    }
    memcpy(p->host, u.host, sizeof p->host);
    p->port = u.port;
    memcpy(p->user, u.user, sizeof p->user);
    memcpy(p->pass, u.pass, sizeof p->pass);
    p->db = u.db;
    memset(&u, 0, sizeof u);
    p->timeout.tv_sec = (time_t)timeout;
    p->timeout.tv_usec = (suseconds_t)((timeout - (double)p->timeout.tv_sec) * 1e6);
    pthread_mutex_init(&p->mu, NULL);
    return 0;
}

static void redis__pool_clear(redis_pool *p)
{
    for (int i = 0; i < p->nidle; i++)
        redisFree(p->idle[i]);
    p->nidle = 0;
    memset(p->pass, 0, sizeof p->pass);
    pthread_mutex_destroy(&p->mu);
}

/* One setup command on a new connection; a refusal is logged (Redis's own words, which
 * never repeat the password). Returns 0 or -1. */
static int redis__setup(redis_pool *p, redisContext *c, int argc, const char **argv, const char *what)
{
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r && !ok)
        fprintf(stderr, "hamel-server: redis %s: %s refused: %s\n", p->shown, what, r->str);
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* AUTH (the password, and the user when given) and SELECT (a database other than 0) on a
 * new connection. Returns 0 or -1. */
static int redis__hello(redis_pool *p, redisContext *c)
{
    if (p->pass[0]) {
        const char *auth[3] = {"AUTH", p->user[0] ? p->user : p->pass, p->pass};
        if (redis__setup(p, c, p->user[0] ? 3 : 2, auth, "AUTH") != 0)
            return -1;
    }
    if (p->db) {
        char db[24];
        snprintf(db, sizeof db, "%ld", p->db);
        const char *sel[2] = {"SELECT", db};
        if (redis__setup(p, c, 2, sel, "SELECT") != 0)
            return -1;
    }
    return 0;
}

/* A connection: an idle one (*reused set), or a new one. NULL when Redis cannot be
 * reached. `reused` may be NULL. */
static redisContext *redis__get_any(redis_pool *p, int *reused)
{
    pthread_mutex_lock(&p->mu);
    redisContext *c = p->nidle ? p->idle[--p->nidle] : NULL;
    pthread_mutex_unlock(&p->mu);
    if (reused)
        *reused = c != NULL;
    if (c)
        return c;
    c = redisConnectWithTimeout(p->host, p->port, p->timeout);
    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, p->timeout);
    if (redis__hello(p, c) != 0) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static redisContext *redis__get(redis_pool *p) { return redis__get_any(p, NULL); }

/* Closes every idle connection: after one failed, Redis has likely restarted, and the
 * others would each fail one request in turn. */
static void redis__drop_idle(redis_pool *p)
{
    redisContext *old[REDIS_POOL_MAX];
    pthread_mutex_lock(&p->mu);
    int n = p->nidle;
    memcpy(old, p->idle, (size_t)n * sizeof old[0]);
    p->nidle = 0;
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < n; i++)
        redisFree(old[i]);
}

/* Gives a connection back; one that failed is closed (the next get connects anew). */
static void redis__put(redis_pool *p, redisContext *c)
{
    if (!c)
        return;
    if (c->err) {
        redisFree(c);
        return;
    }
    pthread_mutex_lock(&p->mu);
    if (p->nidle < REDIS_POOL_MAX) {
        p->idle[p->nidle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    if (c)
        redisFree(c);
}

/* One command given as argv on a pooled connection. Returns the reply (caller frees
 * with freeReplyObject), or NULL when Redis cannot be reached or answered an error
 * (logged). */
static redisReply *redis__cmd(redis_pool *p, int argc, const char **argv, const size_t *lens)
{
    int reused = 0;
    redisContext *c = redis__get_any(p, &reused);
    if (!c)
        return NULL;
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    int closed =
        c->err == REDIS_ERR_EOF || (c->err == REDIS_ERR_IO && errno != EAGAIN && errno != EWOULDBLOCK);
    if (!r && reused && closed) {
        /* An idle connection that Redis closed (it restarted): the command never reached
         * a server that is running, so it is sent once more on a new connection. A timeout
         * is not retried: the command may have run. */
        redisFree(c);
        redis__drop_idle(p);
        c = redis__get(p);
        if (!c)
            return NULL;
        r = redisCommandArgv(c, argc, argv, lens);
    }
    redis__put(p, c);
    if (r && r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "hamel-server: redis: %s: %s\n", argv[0], r->str);
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* redis__cmd on an argument list, counted and measured (strlen) for the caller. */
#define REDIS_CMD(pool, ...)                                                                                 \
    redis__cmd((pool), (int)(sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *)),                  \
               (const char *[]){__VA_ARGS__}, NULL)

/* ---- the store backend ------------------------------------------------------------- */

typedef struct redis_store {
    redis_pool pool;
    long ttl;
    size_t max_bytes;
} redis_store;

/* Writes a job record unless it would move a finished job back to queued or running
 * (a late write of a slower instance). KEYS[1] job; ARGV status, model_id, key, doc,
 * created, ttl. */
static const char redis__put_job_lua[] =
    "local cur = redis.call('HGET', KEYS[1], 'status')\n"
    "if (ARGV[1] == 'queued' or ARGV[1] == 'running') and (cur == 'done' or cur == 'failed' or cur == "
    "'cancelled') then return 0 end\n"
    "redis.call('DEL', KEYS[1])\n"
    "redis.call('HSET', KEYS[1], 'status', ARGV[1], 'model_id', ARGV[2], 'key', ARGV[3], 'doc', ARGV[4], "
    "'created', ARGV[5])\n"
    "redis.call('EXPIRE', KEYS[1], ARGV[6])\n"
    "return 1\n";

/* Adds a result (if new) and the done job record (unless the job was cancelled
 * meanwhile: it stays so, as in the SQLite store's caller), then drops results past their TTL and
 * the oldest past the byte budget. KEYS[1] result, KEYS[2] job; ARGV body, model_id,
 * key, created, ttl, max_bytes, now, per_write. */
static const char redis__put_done_lua[] =
    "local function drop(k)\n"
    "  local n = tonumber(redis.call('HGET', 'hamel:result_sizes', k) or '0')\n"
    "  redis.call('HDEL', 'hamel:result_sizes', k)\n"
    "  redis.call('ZREM', 'hamel:results', k)\n"
    "  redis.call('DEL', 'hamel:result:' .. k)\n"
    "  redis.call('DECRBY', 'hamel:result_bytes', n)\n"
    "end\n"
    "if redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[5], 'NX') then\n"
    "  redis.call('ZADD', 'hamel:results', ARGV[7], ARGV[3])\n"
    "  redis.call('HSET', 'hamel:result_sizes', ARGV[3], #ARGV[1])\n"
    "  redis.call('INCRBY', 'hamel:result_bytes', #ARGV[1])\n"
    "end\n"
    "if redis.call('HGET', KEYS[2], 'status') ~= 'cancelled' then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "  redis.call('HSET', KEYS[2], 'status', 'done', 'model_id', ARGV[2], 'key', ARGV[3], 'doc', '', "
    "'created', ARGV[4])\n"
    "  redis.call('EXPIRE', KEYS[2], ARGV[5])\n"
    "end\n"
    "local old = redis.call('ZRANGEBYSCORE', 'hamel:results', '-inf', tonumber(ARGV[7]) - tonumber(ARGV[5]), "
    "'LIMIT', 0, tonumber(ARGV[8]))\n"
    "for _, k in ipairs(old) do drop(k) end\n"
    "local max = tonumber(ARGV[6])\n"
    "while tonumber(redis.call('GET', 'hamel:result_bytes') or '0') > max do\n"
    "  local first = redis.call('ZRANGE', 'hamel:results', 0, 0)\n"
    "  if #first == 0 then break end\n"
    "  drop(first[1])\n"
    "end\n"
    "return 1\n";

static int rstore__put_model(void *impl, const char *model_id, const char *json)
{
    redis_store *s = impl;
    char key[160], ttl[32];
    snprintf(key, sizeof key, "hamel:model:%s", model_id);
    snprintf(ttl, sizeof ttl, "%ld", s->ttl);
    redisReply *r = REDIS_CMD(&s->pool, "SET", key, json, "EX", ttl, "NX");
    int ok = r != NULL;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

/* GET key into a new string (*out) : 0, 1 if none, -1. */
static int rstore__get(redis_store *s, const char *key, char **out, size_t *len)
{
    *out = NULL;
    redisReply *r = REDIS_CMD(&s->pool, "GET", key);
    if (!r)
        return -1;
    int rc = 1;
    if (r->type == REDIS_REPLY_STRING) {
        *out = malloc(r->len + 1);
        rc = *out ? 0 : -1;
        if (*out) {
            memcpy(*out, r->str, r->len);
            (*out)[r->len] = '\0';
            if (len)
                *len = r->len;
        }
    }
    freeReplyObject(r);
    return rc;
}

static int rstore__get_model(void *impl, const char *model_id, char **json)
{
    char key[160];
    snprintf(key, sizeof key, "hamel:model:%s", model_id);
    return rstore__get(impl, key, json, NULL);
}

static int rstore__put_job(void *impl, const char *id, const char *status, const char *model_id,
                           const char *key, const char *doc, double created)
{
    redis_store *s = impl;
    char jkey[128], cr[48], ttl[32];
    snprintf(jkey, sizeof jkey, "hamel:job:%s", id);
    snprintf(cr, sizeof cr, "%.6f", created);
    snprintf(ttl, sizeof ttl, "%ld", s->ttl);
    redisReply *r = REDIS_CMD(&s->pool, "EVAL", redis__put_job_lua, "1", jkey, status,
                              model_id ? model_id : "", key ? key : "", doc ? doc : "", cr, ttl);
    int ok = r != NULL;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static int rstore__put_done(void *impl, const char *id, const char *model_id, const char *key,
                            const blob *body, double created)
{
    redis_store *s = impl;
    char rkey[160], jkey[128], cr[48], ttl[32], max[32], now[48], per[16];
    snprintf(rkey, sizeof rkey, "hamel:result:%s", key);
    snprintf(jkey, sizeof jkey, "hamel:job:%s", id);
    snprintf(cr, sizeof cr, "%.6f", created);
    snprintf(ttl, sizeof ttl, "%ld", s->ttl);
    snprintf(max, sizeof max, "%zu", s->max_bytes);
    snprintf(now, sizeof now, "%.6f", redis__wall());
    snprintf(per, sizeof per, "%d", REDIS_TRIM_PER_WRITE);
    const char *argv[] = {
        "EVAL", redis__put_done_lua, "2", rkey, jkey, body->data, model_id, key, cr, ttl, max, now, per};
    size_t lens[sizeof argv / sizeof argv[0]];
    for (size_t i = 0; i < sizeof argv / sizeof argv[0]; i++)
        lens[i] = strlen(argv[i]);
    lens[5] = body->len;
    redisReply *r = redis__cmd(&s->pool, (int)(sizeof argv / sizeof argv[0]), argv, lens);
    int ok = r != NULL;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static int rstore__get_result(void *impl, const char *key, blob **out)
{
    *out = NULL;
    char rkey[160];
    snprintf(rkey, sizeof rkey, "hamel:result:%s", key);
    char *text = NULL;
    size_t len = 0;
    int rc = rstore__get(impl, rkey, &text, &len);
    if (rc != 0)
        return rc;
    *out = blob_new(text, len);
    free(text);
    return *out ? 0 : -1;
}

static char *rstore__dup(const redisReply *e)
{
    if (!e || e->type != REDIS_REPLY_STRING || e->len == 0)
        return NULL;
    return strndup(e->str, e->len);
}

static int rstore__get_job(void *impl, const char *id, store_job *out)
{
    redis_store *s = impl;
    memset(out, 0, sizeof *out);
    char jkey[128];
    snprintf(jkey, sizeof jkey, "hamel:job:%s", id);
    redisReply *r = REDIS_CMD(&s->pool, "HMGET", jkey, "status", "model_id", "key", "doc", "created");
    if (!r)
        return -1;
    int rc = 1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 5 && r->element[0]->type == REDIS_REPLY_STRING) {
        out->status = rstore__dup(r->element[0]);
        out->model_id = rstore__dup(r->element[1]);
        out->key = rstore__dup(r->element[2]);
        out->doc = rstore__dup(r->element[3]);
        out->created = r->element[4]->type == REDIS_REPLY_STRING ? strtod(r->element[4]->str, NULL) : 0;
        rc = out->status ? 0 : -1;
    }
    freeReplyObject(r);
    if (rc < 0)
        store_job_clear(out);
    return rc;
}

static void rstore__counts(void *impl, size_t *result_bytes, size_t *results, size_t *jobs)
{
    redis_store *s = impl;
    *result_bytes = *results = *jobs = 0; /* job records are bounded by their TTL, not counted */
    redisReply *r = REDIS_CMD(&s->pool, "GET", "hamel:result_bytes");
    if (r && r->type == REDIS_REPLY_STRING)
        *result_bytes = (size_t)strtoull(r->str, NULL, 10);
    freeReplyObject(r);
    r = REDIS_CMD(&s->pool, "ZCARD", "hamel:results");
    if (r && r->type == REDIS_REPLY_INTEGER)
        *results = (size_t)r->integer;
    freeReplyObject(r);
}

static void rstore__close(void *impl)
{
    redis_store *s = impl;
    if (!s)
        return;
    redis__pool_clear(&s->pool);
    free(s);
}

/* The quarantine (quarantine.h): "hamel:quarantine:<key>", expiring with the record. */
#define REDIS_QUARANTINE_PREFIX "hamel:quarantine:"

static int rstore__quarantine_put(void *impl, const char *key, const char *doc, double expires)
{
    redis_store *s = impl;
    char rkey[256], ex[32];
    snprintf(rkey, sizeof rkey, REDIS_QUARANTINE_PREFIX "%s", key);
    double left = expires - redis__wall();
    snprintf(ex, sizeof ex, "%ld", left > 1 ? (long)left : 1L);
    redisReply *r = REDIS_CMD(&s->pool, "SET", rkey, doc, "EX", ex);
    int ok = r != NULL;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

static int rstore__quarantine_get(void *impl, const char *key, char **doc, double *expires)
{
    char rkey[256];
    snprintf(rkey, sizeof rkey, REDIS_QUARANTINE_PREFIX "%s", key);
    *expires = redis__wall() + 1; /* asked again soon: another instance may clear it */
    return rstore__get(impl, rkey, doc, NULL);
}

static int rstore__quarantine_del(void *impl, const char *key)
{
    redis_store *s = impl;
    char rkey[256];
    snprintf(rkey, sizeof rkey, REDIS_QUARANTINE_PREFIX "%s", key);
    redisReply *r = REDIS_CMD(&s->pool, "DEL", rkey);
    int rc = !r ? -1 : r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? 0 : 1;
    freeReplyObject(r);
    return rc;
}

/* GET and PTTL of each of KEYS, as pairs (a missing key: nil and -2). */
static const char redis__quarantine_fetch_lua[] = "local out = {}\n"
                                                  "for _, k in ipairs(KEYS) do\n"
                                                  "  out[#out + 1] = redis.call('GET', k)\n"
                                                  "  out[#out + 1] = redis.call('PTTL', k)\n"
                                                  "end\n"
                                                  "return out\n";

#define REDIS_SCAN_COUNT "1000" /* keys SCAN looks at per call */

/* Appends the records under keys[0..nkeys) (a page of SCAN) to out[*n..max). Returns 0 or -1. */
static int rstore__quarantine_fetch(redis_store *s, redisReply *const *keys, size_t nkeys, size_t max,
                                    store_quarantine_record *out, size_t *n)
{
    if (nkeys > max - *n)
        nkeys = max - *n;
    const char **argv = calloc(nkeys + 3, sizeof *argv);
    if (!argv)
        return -1;
    char numkeys[32];
    snprintf(numkeys, sizeof numkeys, "%zu", nkeys);
    argv[0] = "EVAL";
    argv[1] = redis__quarantine_fetch_lua;
    argv[2] = numkeys;
    for (size_t i = 0; i < nkeys; i++)
        argv[3 + i] = keys[i]->type == REDIS_REPLY_STRING ? keys[i]->str : "";
    redisReply *r = redis__cmd(&s->pool, (int)(nkeys + 3), argv, NULL);
    free(argv);
    int rc = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 * nkeys ? 0 : -1;
    double now = redis__wall();
    for (size_t i = 0; rc == 0 && i < nkeys; i++) {
        const redisReply *doc = r->element[2 * i], *ttl = r->element[2 * i + 1];
        if (doc->type != REDIS_REPLY_STRING || ttl->type != REDIS_REPLY_INTEGER || ttl->integer == -2 ||
            keys[i]->type != REDIS_REPLY_STRING || keys[i]->len < sizeof REDIS_QUARANTINE_PREFIX - 1)
            continue; /* expired or cleared since the SCAN */
        store_quarantine_record *q = &out[*n];
        q->key = strdup(keys[i]->str + sizeof REDIS_QUARANTINE_PREFIX - 1);
        q->doc = strndup(doc->str, doc->len);
        q->expires = ttl->integer >= 0 ? now + (double)ttl->integer / 1000.0 : now + 86400.0 * 365;
        ++*n;
        if (!q->key || !q->doc)
            rc = -1;
    }
    freeReplyObject(r);
    return rc;
}

/* The quarantine's records under a key prefix: SCAN over hamel:quarantine:<prefix>*
 * (the keyspace is walked in pages; an operator's listing, rarely asked), each page's
 * records read in one round trip. */
static int rstore__quarantine_list(void *impl, const char *prefix, size_t max, store_quarantine_record **out,
                                   size_t *n)
{
    redis_store *s = impl;
    *n = 0;
    *out = calloc(max ? max : 1, sizeof **out);
    if (!*out)
        return -1;
    char match[512];
    size_t o = (size_t)snprintf(match, sizeof match, "%s", REDIS_QUARANTINE_PREFIX);
    for (const char *p = prefix; *p && o + 3 < sizeof match; p++) {
        if (strchr("*?[]\\", *p))
            match[o++] = '\\';
        match[o++] = *p;
    }
    match[o++] = '*';
    match[o] = '\0';
    char cursor[32] = "0";
    int rc = 0;
    do {
        redisReply *r = REDIS_CMD(&s->pool, "SCAN", cursor, "MATCH", match, "COUNT", REDIS_SCAN_COUNT);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            rc = -1;
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        const redisReply *keys = r->element[1];
        if (keys->elements > 0)
            rc = rstore__quarantine_fetch(s, keys->element, keys->elements, max, *out, n);
        freeReplyObject(r);
    } while (rc == 0 && strcmp(cursor, "0") != 0 && *n < max);
    if (rc != 0) {
        store_quarantine_records_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

static const store_ops redis__store_ops = {rstore__put_model,
                                           rstore__get_model,
                                           rstore__put_job,
                                           rstore__put_done,
                                           rstore__get_result,
                                           rstore__get_job,
                                           rstore__counts,
                                           rstore__close,
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL, /* full */
                                           rstore__quarantine_put,
                                           rstore__quarantine_get,
                                           rstore__quarantine_del,
                                           NULL, /* put_many: one write each */
                                           NULL,
                                           rstore__quarantine_list,
                                           NULL /* barrier: every write is synchronous */};

/* PING through the pool: 0 when Redis answers. */
static int redis__ping(redis_pool *p)
{
    redisReply *r = REDIS_CMD(p, "PING");
    int ok = r != NULL;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

int redis_store_open(const redis_config *cfg, store **out)
{
    *out = NULL;
    redis_store *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    if (redis__pool_init(&s->pool, cfg->url, cfg->timeout) != 0) {
        free(s);
        return -1;
    }
    s->ttl = cfg->ttl;
    s->max_bytes = cfg->limits.max_result_bytes;
    if (redis__ping(&s->pool) != 0) {
        fprintf(stderr, "hamel-server: HAMEL_REDIS=%s does not answer (or refused: see above)\n",
                s->pool.shown);
        rstore__close(s);
        return -1;
    }
    *out = store_new(&redis__store_ops, s);
    return *out ? 0 : -1;
}

/* ---- the shared queue -------------------------------------------------------------- */

#define REDIS_STREAM "hamel:queue"
#define REDIS_GROUP "workers"
#define REDIS_CHANNEL "hamel:events"

struct redis_queue {
    redis_pool pool;
    char consumer[128];
    double lease;
    size_t max_queue;
    redis_event_fn on_event;
    void *arg;
    pthread_mutex_t mu; /* running[], stopping */
    pthread_cond_t cv;
    char running[REDIS_RUNNING_MAX][REDIS_ID_MAX]; /* entries whose lease this process renews */
    int stopping;
    pthread_t sub_thread, renew_thread;
    int sub_started, renew_started;
    redisContext *sub; /* the subscriber's connection (its thread only) */
};

/* Creates the stream and the group if they are missing (after a Redis restart that lost
 * them, too). Returns 0 or -1. */
static int redis__group(redis_pool *p)
{
    redisContext *c = redis__get(p);
    if (!c)
        return -1;
    redisReply *r = redisCommand(c, "XGROUP CREATE %s %s 0 MKSTREAM", REDIS_STREAM, REDIS_GROUP);
    int ok = r && (r->type != REDIS_REPLY_ERROR || strstr(r->str, "BUSYGROUP"));
    freeReplyObject(r);
    redis__put(p, c);
    return ok ? 0 : -1;
}

static void redis__running_set(redis_queue *q, const char *entry, int on)
{
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < REDIS_RUNNING_MAX; i++) {
        if (on && !q->running[i][0]) {
            snprintf(q->running[i], REDIS_ID_MAX, "%s", entry);
            break;
        }
        if (!on && !strcmp(q->running[i], entry)) {
            q->running[i][0] = '\0';
            break;
        }
    }
    pthread_mutex_unlock(&q->mu);
}

/* Renews the leases of the entries still pending on this consumer: XCLAIM to ourselves
 * with min-idle 0 resets their idle time. An entry another consumer has taken over
 * meanwhile (this process stalled past its lease) is left to it, and so is one whose
 * stream is gone (Redis lost its data: pcall, no error). KEYS[1] the stream;
 * ARGV[1] the group, ARGV[2] this consumer, ARGV[3...] the entries. */
static const char redis__renew_lua[] =
    "local n = 0\n"
    "for i = 3, #ARGV do\n"
    "  local p = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)\n"
    "  if p[1] and p[1][2] == ARGV[2] then\n"
    "    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";

/* Renews the leases of the running entries every lease/3 (redis__renew_lua), so
 * XAUTOCLAIM elsewhere leaves them alone. */
static void *redis__renew(void *arg)
{
    redis_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    while (!q->stopping) {
        double period = q->lease / 3.0;
        double until = redis__wall() + period;
        struct timespec ts = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
        pthread_cond_timedwait(&q->cv, &q->mu, &ts);
        if (q->stopping)
            break;
        const char *argv[6 + REDIS_RUNNING_MAX];
        char ids[REDIS_RUNNING_MAX][REDIS_ID_MAX];
        int n = 0;
        for (int i = 0; i < REDIS_RUNNING_MAX; i++)
            if (q->running[i][0])
                memcpy(ids[n++], q->running[i], REDIS_ID_MAX);
        pthread_mutex_unlock(&q->mu);
        if (n > 0) {
            int argc = 0;
            argv[argc++] = "EVAL";
            argv[argc++] = redis__renew_lua;
            argv[argc++] = "1";
            argv[argc++] = REDIS_STREAM;
            argv[argc++] = REDIS_GROUP;
            argv[argc++] = q->consumer;
            for (int i = 0; i < n; i++)
                argv[argc++] = ids[i];
            freeReplyObject(redis__cmd(&q->pool, argc, argv, NULL));
        }
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* The subscriber: SUBSCRIBE, then each message to on_event, on a connection without a
 * read timeout (a timeout would end the connection and lose the messages sent until it
 * is back); redis_queue_free wakes it by shutting the socket down. After a failure
 * (Redis restarted) it connects again with a back-off; events sent meanwhile are lost,
 * which the job pool covers by reading the store when a job is looked at. */
static void *redis__subscribe(void *arg)
{
    redis_queue *q = arg;
    redisContext *c = NULL;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        int stop = q->stopping;
        q->sub = stop ? NULL : c;
        pthread_mutex_unlock(&q->mu);
        if (stop)
            break;
        if (!c) {
            c = redis__get(&q->pool);
            redisReply *r = c ? redisCommand(c, "SUBSCRIBE %s", REDIS_CHANNEL) : NULL;
            if (c && r)
                redisSetTimeout(c, (struct timeval){0, 0});
            if (!r) {
                if (c)
                    redisFree(c);
                c = NULL;
                nanosleep(&(struct timespec){0, REDIS_BACKOFF_NS}, NULL);
            }
            freeReplyObject(r);
            continue;
        }
        void *reply = NULL;
        if (redisGetReply(c, &reply) != REDIS_OK) {
            pthread_mutex_lock(&q->mu);
            q->sub = NULL;
            pthread_mutex_unlock(&q->mu);
            redisFree(c);
            c = NULL;
            nanosleep(&(struct timespec){0, REDIS_BACKOFF_NS}, NULL);
            continue;
        }
        redisReply *r = reply;
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->type == REDIS_REPLY_STRING &&
            r->element[2]->type == REDIS_REPLY_STRING && !strcmp(r->element[0]->str, "message")) {
            char event[32] = "", id[REDIS_ID_MAX] = "";
            if (sscanf(r->element[2]->str, "%31s %63s", event, id) == 2)
                q->on_event(q->arg, event, id);
        }
        freeReplyObject(r);
    }
    if (c)
        redisFree(c);
    return NULL;
}

int redis_queue_open(const redis_config *cfg, const char *consumer, redis_event_fn on_event, void *arg,
                     redis_queue **out)
{
    *out = NULL;
    redis_queue *q = calloc(1, sizeof *q);
    if (!q)
        return -1;
    if (redis__pool_init(&q->pool, cfg->url, cfg->timeout) != 0) {
        free(q);
        return -1;
    }
    snprintf(q->consumer, sizeof q->consumer, "%s", consumer);
    q->lease = cfg->lease;
    q->max_queue = cfg->max_queue;
    q->on_event = on_event;
    q->arg = arg;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (redis__group(&q->pool) != 0) {
        fprintf(stderr, "hamel-server: HAMEL_REDIS=%s: cannot create the job stream\n", q->pool.shown);
        redis_queue_free(q);
        return -1;
    }
    q->sub_started = pthread_create(&q->sub_thread, NULL, redis__subscribe, q) == 0;
    q->renew_started = pthread_create(&q->renew_thread, NULL, redis__renew, q) == 0;
    if (!q->sub_started || !q->renew_started) {
        redis_queue_free(q);
        return -1;
    }
    *out = q;
    return 0;
}

void redis_queue_free(redis_queue *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    if (q->sub) /* wakes the subscriber out of its read */
        shutdown(q->sub->fd, SHUT_RDWR);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (q->sub_started)
        pthread_join(q->sub_thread, NULL);
    if (q->renew_started)
        pthread_join(q->renew_thread, NULL);
    redis__pool_clear(&q->pool);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

long redis_queue_length(redis_queue *q)
{
    redisReply *r = REDIS_CMD(&q->pool, "XLEN", REDIS_STREAM);
    long n = r && r->type == REDIS_REPLY_INTEGER ? (long)r->integer : -1;
    freeReplyObject(r);
    return n;
}

int redis_queue_push(redis_queue *q, const char *id, const char *model_id, const char *key, const char *model,
                     const char *request, double created)
{
    long n = redis_queue_length(q);
    if (n < 0)
        return HAMEL_E_UNAVAILABLE;
    if ((size_t)n >= q->max_queue)
        return HAMEL_E_QUEUE_FULL;
    char cr[48];
    snprintf(cr, sizeof cr, "%.6f", created);
    redisReply *r = REDIS_CMD(&q->pool, "XADD", REDIS_STREAM, "*", "id", id, "model_id", model_id, "key", key,
                              "model", model, "request", request, "created", cr);
    int ok = r && r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return ok ? 0 : HAMEL_E_UNAVAILABLE;
}

/* Fills t from one stream entry [id, [field, value, ...]]. Returns 0, or 1 for an
 * entry that was deleted meanwhile (nil fields) or is malformed. */
static int redis__entry(const redisReply *e, redis_task *t)
{
    memset(t, 0, sizeof *t);
    if (!e || e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING)
        return 1;
    snprintf(t->entry, sizeof t->entry, "%s", e->element[0]->str);
    const redisReply *f = e->element[1];
    if (f->type != REDIS_REPLY_ARRAY)
        return 1;
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const char *k = f->element[i]->str, *v = f->element[i + 1]->str;
        if (!k || !v)
            continue;
        if (!strcmp(k, "id"))
            snprintf(t->id, sizeof t->id, "%s", v);
        else if (!strcmp(k, "model_id"))
            snprintf(t->model_id, sizeof t->model_id, "%s", v);
        else if (!strcmp(k, "key"))
            snprintf(t->key, sizeof t->key, "%s", v);
        else if (!strcmp(k, "model"))
            t->model = strdup(v);
        else if (!strcmp(k, "request"))
            t->request = strdup(v);
        else if (!strcmp(k, "created"))
            t->created = strtod(v, NULL);
    }
    if (!t->id[0] || !t->model || !t->request)
        return 1;
    return 0;
}

/* The first live entry of an XAUTOCLAIM or XREADGROUP entry list into t; entries that
 * were deleted meanwhile are acknowledged away. Returns 0 or 1 (none). */
static int redis__first(redis_queue *q, const redisReply *list, redis_task *t)
{
    for (size_t i = 0; list && list->type == REDIS_REPLY_ARRAY && i < list->elements; i++) {
        if (redis__entry(list->element[i], t) == 0)
            return 0;
        const redisReply *e = list->element[i];
        if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 && e->element[0]->type == REDIS_REPLY_STRING)
            redis_queue_ack(q, e->element[0]->str);
        redis_task_clear(t);
    }
    return 1;
}

int redis_queue_take(redis_queue *q, double block, redis_task *t)
{
    memset(t, 0, sizeof *t);
    char idle[32], ms[32];
    snprintf(idle, sizeof idle, "%ld", (long)(q->lease * 1000));
    snprintf(ms, sizeof ms, "%ld", (long)(block * 1000));
    /* An entry whose worker stopped renewing it: its instance died. */
    redisReply *r =
        REDIS_CMD(&q->pool, "XAUTOCLAIM", REDIS_STREAM, REDIS_GROUP, q->consumer, idle, "0-0", "COUNT", "1");
    if (!r) {
        redis__group(&q->pool); /* NOGROUP after a Redis restart that lost the stream */
        return -1;
    }
    int got = r->type == REDIS_REPLY_ARRAY && r->elements >= 2 ? redis__first(q, r->element[1], t) : 1;
    freeReplyObject(r);
    if (got == 0) {
        /* How many instances it has gone through: one that makes every instance die
         * would otherwise go round all of them. */
        r = REDIS_CMD(&q->pool, "XPENDING", REDIS_STREAM, REDIS_GROUP, t->entry, t->entry, "1");
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
            r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements == 4 &&
            r->element[0]->element[3]->type == REDIS_REPLY_INTEGER)
            t->deliveries = (int)r->element[0]->element[3]->integer;
        freeReplyObject(r);
        fprintf(stderr, "hamel-server: job %s: taken over from an instance that stopped renewing it\n",
                t->id);
        redis__running_set(q, t->entry, 1);
        return 0;
    }
    r = REDIS_CMD(&q->pool, "XREADGROUP", "GROUP", REDIS_GROUP, q->consumer, "COUNT", "1", "BLOCK", ms,
                  "STREAMS", REDIS_STREAM, ">");
    if (!r)
        return -1;
    got = 1;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY &&
        r->element[0]->elements == 2)
        got = redis__first(q, r->element[0]->element[1], t);
    freeReplyObject(r);
    if (got == 0)
        redis__running_set(q, t->entry, 1);
    return got;
}

int redis_queue_ack(redis_queue *q, const char *entry)
{
    redis__running_set(q, entry, 0);
    redisContext *c = redis__get(&q->pool);
    if (!c)
        return -1;
    redisAppendCommand(c, "XACK %s %s %s", REDIS_STREAM, REDIS_GROUP, entry);
    redisAppendCommand(c, "XDEL %s %s", REDIS_STREAM, entry);
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        void *reply = NULL;
        if (redisGetReply(c, &reply) != REDIS_OK)
            ok = 0;
        freeReplyObject(reply);
    }
    redis__put(&q->pool, c);
    return ok ? 0 : -1;
}

void redis_queue_forget(redis_queue *q, const char *entry) { redis__running_set(q, entry, 0); }

int redis_queue_publish(redis_queue *q, const char *event, const char *job_id)
{
    char msg[128];
    snprintf(msg, sizeof msg, "%s %s", event, job_id);
    redisReply *r = REDIS_CMD(&q->pool, "PUBLISH", REDIS_CHANNEL, msg);
    int ok = r != NULL;
    freeReplyObject(r);
    return ok ? 0 : -1;
}

void redis_task_clear(redis_task *t)
{
    free(t->model);
    free(t->request);
    memset(t, 0, sizeof *t);
}
