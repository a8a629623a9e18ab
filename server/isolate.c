/* isolate.c — engine work in supervised worker processes (isolate.h).
 *
 * The server side (a pool of exec'd workers, the calls and their supervision) comes
 * first, then the worker's main loop with its model cache and the test hook.
 *
 * Lock order: iso.mu is a leaf; it is never held while a worker is spoken to, while a
 * process is started or reaped, or during a quarantine or store call.
 *
 * Workers are started by one thread of their own (the spawner), which lives until
 * isolate_stop: a worker asks the kernel for SIGKILL when the thread that started it
 * ends (PR_SET_PDEATHSIG), so it dies with the server, kill -9 included, but not when
 * some pool thread that happened to start it ends first.
 */
#include "isolate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/sha.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ids.h"
#include "merge.h"
#include "quarantine.h"

extern char **environ;

enum {
    ISO_COMPILE = 1,
    ISO_CHECK,
    ISO_SIMULATE,
    ISO_HAMEL,
    ISO_EVALUATE,
    ISO_LINEARIZE,
    ISO_EQUATIONS,
    ISO_FORM,
    ISO_CHECK_ALL,
    ISO_CODE,
    ISO_STEADY,
    ISO_SIMULATE_MANY,
};

#define ISO_STRINGS 5                /* model id, model text, request, head, argument */
#define ISO_REPLY_STRINGS 4          /* text, id, canonical, summary */
#define ISO_RECENT 32                /* model ids a worker is known to hold (affinity) */
#define ISO_POLL_MS 20               /* how often a waiting caller forwards cancel/progress */
#define ISO_NATIVE_SLICE 0.02        /* a wait for the native tier looks at the cancel this often */
#define ISO_GRACE_SECONDS 30.0       /* a call's hard deadline past its engine budget */
#define ISO_NO_BUDGET 3600.0         /* ... when it has none */
#define ISO_CANCEL_GRACE 10.0        /* a worker that ignores a cancel this long is killed */
#define ISO_STOP_SECONDS 2.0         /* isolate_stop: a worker's time to exit on its own */
#define ISO_MAX_FRAME (1u << 31)     /* one message, bytes */
#define ISO_WORKER_MODELS 64         /* compiled models a worker keeps, within isolate_config.model_bytes */
#define ISO_OOM_CHUNK (64UL << 20)   /* the test hook's allocations */
#define ISO_OOM_UNCAPPED (2UL << 30) /* ... and where it stops itself without a memory cap */
#define ISO_SHM_MIN (64u << 10)      /* a reply's text this long goes through the reply memfd */
#define ISO_SHM_MAX (256u << 20)     /* ... up to this (longer: the socket, not a second copy) */
#define ISO_SHM_KEEP (8u << 20)      /* a reply memfd written past this is emptied once read */
/* Runs started with their compilation at once (isolate_prerun): each reserves its worker
 * until its job takes it, so at most this many, and only with a worker more than that:
 * every other call always finds a worker that becomes free (a job waiting for a worker
 * while the reserved ones wait for that job's thread would never end). */
#define ISO_MAX_PRERUNS 1

/* The page shared with a worker: the engine_control of the running call (lock-free
 * atomics), and a note the worker leaves before it ends itself on purpose. */
typedef struct iso_shared {
    engine_control ctl;
    char note[256];
} iso_shared;

/* A reply: this head, then the strings it gives the lengths of (UINT32_MAX: none),
 * each read straight into a buffer of its own (a result text is not copied again).
 * With in_shm set, the first string (a long result text) is not on the socket but at
 * the start of the worker's reply memfd: one copy in and one out, instead of a socket's
 * buffer-sized rounds between two processes (a 277 KB result took 0.28 ms that way, and
 * several times that on a busy machine). A single reply only: ISO_SIMULATE_MANY's replies
 * come while the next run is written, so they stay on the socket. */
typedef struct iso_reply_head {
    int32_t rc;
    int32_t checked;  /* ISO_COMPILE with a request: 1 when its check ran ... */
    int32_t check_rc; /* ... and its status (a problem: the first string) */
    uint32_t len[ISO_REPLY_STRINGS];
    uint32_t in_shm;
    uint64_t bytes;
} iso_reply_head;

typedef struct iso_worker {
    pid_t pid; /* 0: not running */
    int fd;
    int rfd; /* the reply memfd (iso_reply_head.in_shm) */
    iso_shared *sh;
    int busy;
    uint64_t recent[ISO_RECENT];
    int recent_next;
} iso_worker;

/* A request to the spawner thread: start a worker in slot w. */
typedef struct iso_spawn {
    iso_worker *w;
    int rc, done;
    int async; /* nobody waits: the spawner frees it and frees the slot */
    struct iso_spawn *next;
} iso_spawn;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t freed;
    iso_worker *w;
    int n;
    int active, stopping;
    int preruns; /* runs started with their compilation, their worker reserved (ISO_MAX_PRERUNS) */
    char exe[PATH_MAX];
    char memory[32];
    char model_bytes[32];
    char code_dir[PATH_MAX];
    char **envp;
    atomic_long started, faults;
    pthread_t spawner;
    int spawner_running, spawner_stop;
    pthread_cond_t spawn_more; /* to the spawner: a request, or stop */
    pthread_cond_t spawn_done; /* from it: a request was served */
    iso_spawn *spawn_head, *spawn_tail;
} iso = {.mu = PTHREAD_MUTEX_INITIALIZER,
         .freed = PTHREAD_COND_INITIALIZER,
         .spawn_more = PTHREAD_COND_INITIALIZER,
         .spawn_done = PTHREAD_COND_INITIALIZER};

static void *iso__spawner_main(void *arg);
static int iso__start_worker(iso_worker *w, int async);

static double iso__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t iso__hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* ---- messages ------------------------------------------------------------------------ */

typedef struct iso_buf {
    char *p;
    size_t len, cap;
    int failed;
} iso_buf;

static void iso__put(iso_buf *b, const void *data, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void iso__put_u32(iso_buf *b, uint32_t v) { iso__put(b, &v, sizeof v); }

static void iso__put_str(iso_buf *b, const char *s, size_t n)
{
    iso__put_u32(b, s ? (uint32_t)n : UINT32_MAX);
    if (s)
        iso__put(b, s, n);
}

/* A message being read: pos walks data[len]. */
typedef struct iso_msg {
    const char *data;
    size_t len, pos;
    int bad;
} iso_msg;

static void iso__get(iso_msg *m, void *out, size_t n)
{
    if (m->bad || m->len - m->pos < n) {
        m->bad = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, m->data + m->pos, n);
    m->pos += n;
}

/* A string of the message, copied (NUL-terminated; NULL when it was sent as NULL). */
static char *iso__get_str(iso_msg *m, size_t *len)
{
    uint32_t n = 0;
    iso__get(m, &n, sizeof n);
    if (len)
        *len = 0;
    if (m->bad || n == UINT32_MAX)
        return NULL;
    if (m->len - m->pos < n) {
        m->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        m->bad = 1;
        return NULL;
    }
    memcpy(s, m->data + m->pos, n);
    s[n] = '\0';
    m->pos += n;
    if (len)
        *len = n;
    return s;
}

static int iso__write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the n pieces of v in order, in as few system calls as the socket takes (one
 * message, one wake-up of the reader); v is consumed. Returns 0 or -1. */
static int iso__writev_all(int fd, struct iovec *v, int n)
{
    while (n > 0) {
        if (v->iov_len == 0) {
            v++;
            n--;
            continue;
        }
        ssize_t w = writev(fd, v, n > IOV_MAX ? IOV_MAX : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        while (n > 0 && (size_t)w >= v->iov_len) {
            w -= (ssize_t)v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + w;
            v->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int iso__read_all(int fd, char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Sends b as one frame (its length first). */
static int iso__send(int fd, const iso_buf *b)
{
    uint32_t n = (uint32_t)b->len;
    if (b->failed || b->len >= ISO_MAX_FRAME)
        return -1;
    struct iovec v[2] = {{&n, sizeof n}, {b->p, b->len}};
    return iso__writev_all(fd, v, 2);
}

/* Reads one frame into a new buffer (*data, *len). Returns 0, or -1 at end of file or on
 * an error. */
static int iso__recv(int fd, char **data, size_t *len)
{
    uint32_t n = 0;
    *data = NULL;
    if (iso__read_all(fd, (char *)&n, sizeof n) != 0 || n >= ISO_MAX_FRAME)
        return -1;
    char *p = malloc((size_t)n + 1);
    if (!p)
        return -1;
    if (iso__read_all(fd, p, n) != 0) {
        free(p);
        return -1;
    }
    p[n] = '\0';
    *data = p;
    *len = n;
    return 0;
}

/* ---- the pool ------------------------------------------------------------------------ */

/* env with the sanitizer options a worker needs appended (harmless in a plain build): a
 * failed allocation returns NULL (the memory cap is RLIMIT_AS, and the engine checks its
 * allocations), and the test hook may set SIGSEGV's handler back to the default. */
static char **iso__worker_env(void)
{
    static const char *const names[] = {"ASAN_OPTIONS", "TSAN_OPTIONS"};
    static const char add[] = "allocator_may_return_null=1:allow_user_segv_handler=1";
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 3, sizeof *env);
    if (!env)
        return NULL;
    int seen[2] = {0, 0};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = environ[i];
        int which = -1;
        for (int j = 0; j < 2; j++)
            if (!strncmp(e, names[j], strlen(names[j])) && e[strlen(names[j])] == '=')
                which = j;
        if (which < 0) {
            env[k++] = strdup(e);
            continue;
        }
        seen[which] = 1;
        size_t len = strlen(e) + sizeof add + 2;
        env[k] = malloc(len);
        if (env[k])
            snprintf(env[k], len, "%s%s%s", e, e[strlen(names[which]) + 1] ? ":" : "", add);
        k++;
    }
    for (int j = 0; j < 2; j++) {
        if (seen[j])
            continue;
        size_t len = strlen(names[j]) + sizeof add + 2;
        env[k] = malloc(len);
        if (env[k])
            snprintf(env[k], len, "%s=%s", names[j], add);
        k++;
    }
    for (size_t i = 0; i < k; i++)
        if (!env[i]) {
            for (size_t j = 0; j < k; j++)
                free(env[j]);
            free(env);
            return NULL;
        }
    return env;
}

int isolate_start(const isolate_config *cfg)
{
    if (cfg->max_workers < 1 || !cfg->exe || strlen(cfg->exe) >= sizeof iso.exe) {
        fprintf(stderr, "hamel-server: the engine workers cannot be set up\n");
        return -1;
    }
    char **env = iso__worker_env();
    iso_worker *w = calloc((size_t)cfg->max_workers, sizeof *w);
    if (!env || !w) {
        free(w);
        fprintf(stderr, "hamel-server: out of memory setting up the engine workers\n");
        return -1;
    }
    pthread_mutex_lock(&iso.mu);
    iso.w = w;
    iso.n = cfg->max_workers;
    iso.envp = env;
    snprintf(iso.exe, sizeof iso.exe, "%s", cfg->exe);
    snprintf(iso.memory, sizeof iso.memory, "%ld", cfg->memory_mb > 0 ? cfg->memory_mb : 0L);
    snprintf(iso.model_bytes, sizeof iso.model_bytes, "%zu", cfg->model_bytes);
    snprintf(iso.code_dir, sizeof iso.code_dir, "%s", cfg->code_dir ? cfg->code_dir : "");
    iso.stopping = 0;
    iso.active = 1;
    iso.spawner_stop = 0;
    iso.spawner_running = pthread_create(&iso.spawner, NULL, iso__spawner_main, NULL) == 0;
    int ok = iso.spawner_running;
    if (ok)
        iso.w[0].busy = 1; /* the first worker is started now, in the background */
    pthread_mutex_unlock(&iso.mu);
    if (!ok) {
        fprintf(stderr, "hamel-server: cannot start the engine workers' thread\n");
        return -1;
    }
    if (iso__start_worker(&iso.w[0], 1) != 0) {
        pthread_mutex_lock(&iso.mu);
        iso.w[0].busy = 0;
        pthread_mutex_unlock(&iso.mu);
    }
    return 0;
}

int isolate_active(void)
{
    pthread_mutex_lock(&iso.mu);
    int a = iso.active;
    pthread_mutex_unlock(&iso.mu);
    return a;
}

void isolate_counts(long *started, long *faults)
{
    *started = atomic_load(&iso.started);
    *faults = atomic_load(&iso.faults);
}

/* Closes a worker's end and mapping and reaps its process (already ending: its socket
 * gave end of file, or it was killed). Returns the wait status. */
static int iso__reap(iso_worker *w)
{
    int status = 0;
    close(w->fd);
    w->fd = -1;
    if (w->rfd >= 0)
        close(w->rfd);
    w->rfd = -1;
    if (w->sh)
        munmap(w->sh, sizeof *w->sh);
    w->sh = NULL;
    while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
        ;
    w->pid = 0;
    memset(w->recent, 0, sizeof w->recent);
    return status;
}

/* Starts a worker process in slot w (reserved by the caller). Returns 0 or -1. */
static int iso__spawn(iso_worker *w)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    int shm = memfd_create("hamel-engine-worker", MFD_CLOEXEC);
    int rfd = memfd_create("hamel-engine-reply", MFD_CLOEXEC);
    iso_shared *sh = MAP_FAILED;
    if (shm >= 0 && rfd >= 0 && ftruncate(shm, sizeof *sh) == 0)
        sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
    if (sh == MAP_FAILED) {
        if (shm >= 0)
            close(shm);
        if (rfd >= 0)
            close(rfd);
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 2, 1); /* stdout is the server's listening line */
    posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
    posix_spawn_file_actions_adddup2(&fa, shm, 4);
    posix_spawn_file_actions_adddup2(&fa, rfd, 5);
    posix_spawn_file_actions_addclosefrom_np(&fa, 6);
    char *argv[] = {iso.exe,      "--engine-worker", "3", "4", iso.memory,
                    iso.code_dir, iso.model_bytes,   "5", NULL};
    pid_t pid = 0;
    int rc = posix_spawn(&pid, iso.exe, &fa, NULL, argv, iso.envp);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    close(shm);
    if (rc != 0) {
        fprintf(stderr, "hamel-server: cannot start an engine worker (%s): %s\n", iso.exe, strerror(rc));
        munmap(sh, sizeof *sh);
        close(sv[0]);
        close(rfd);
        return -1;
    }
    w->pid = pid;
    w->fd = sv[0];
    w->rfd = rfd;
    w->sh = sh;
    atomic_fetch_add(&iso.started, 1);
    return 0;
}

static void *iso__spawner_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&iso.mu);
    for (;;) {
        while (!iso.spawn_head && !iso.spawner_stop)
            pthread_cond_wait(&iso.spawn_more, &iso.mu);
        iso_spawn *r = iso.spawn_head;
        if (!r)
            break;
        iso.spawn_head = r->next;
        if (!iso.spawn_head)
            iso.spawn_tail = NULL;
        pthread_mutex_unlock(&iso.mu);
        int rc = iso__spawn(r->w);
        pthread_mutex_lock(&iso.mu);
        if (r->async) {
            r->w->busy = 0;
            pthread_cond_broadcast(&iso.freed);
            free(r);
            continue;
        }
        r->rc = rc;
        r->done = 1;
        pthread_cond_broadcast(&iso.spawn_done);
    }
    pthread_mutex_unlock(&iso.mu);
    return NULL;
}

/* Has the spawner thread start a worker in slot w (reserved by the caller): 0 or -1.
 * With async, returns at once (the slot is freed once it is started). */
static int iso__start_worker(iso_worker *w, int async)
{
    iso_spawn local = {w, -1, 0, 0, NULL};
    iso_spawn *r = async ? calloc(1, sizeof *r) : &local;
    if (!r)
        return -1;
    r->w = w;
    r->async = async;
    pthread_mutex_lock(&iso.mu);
    if (!iso.spawner_running || iso.spawner_stop) {
        pthread_mutex_unlock(&iso.mu);
        if (async)
            free(r);
        return -1;
    }
    if (iso.spawn_tail)
        iso.spawn_tail->next = r;
    else
        iso.spawn_head = r;
    iso.spawn_tail = r;
    pthread_cond_signal(&iso.spawn_more);
    while (!async && !local.done)
        pthread_cond_wait(&iso.spawn_done, &iso.mu);
    pthread_mutex_unlock(&iso.mu);
    return async ? 0 : local.rc;
}

/* Takes a free worker, preferring one known to hold the model `key`; NULL when stopping. */
static iso_worker *iso__acquire(uint64_t key)
{
    pthread_mutex_lock(&iso.mu);
    for (;;) {
        if (iso.stopping || !iso.active) {
            pthread_mutex_unlock(&iso.mu);
            return NULL;
        }
        iso_worker *best = NULL;
        int best_score = -1;
        for (int i = 0; i < iso.n; i++) {
            iso_worker *w = &iso.w[i];
            if (w->busy)
                continue;
            int score = w->pid ? 1 : 0; /* a running worker before starting one */
            for (int r = 0; key && w->pid && r < ISO_RECENT; r++)
                if (w->recent[r] == key)
                    score = 2;
            if (score > best_score) {
                best = w;
                best_score = score;
            }
        }
        if (best) {
            best->busy = 1;
            pthread_mutex_unlock(&iso.mu);
            return best;
        }
        pthread_cond_wait(&iso.freed, &iso.mu);
    }
}

/* Notes that w holds the model `key` (0: nothing). Called with iso.mu held. */
static void iso__remember(iso_worker *w, uint64_t key)
{
    if (!key || !w->pid)
        return;
    for (int r = 0; r < ISO_RECENT; r++)
        if (w->recent[r] == key)
            return;
    w->recent[w->recent_next] = key;
    w->recent_next = (w->recent_next + 1) % ISO_RECENT;
}

/* Frees w, which now holds the models `key` and `also` (0: none). */
static void iso__release(iso_worker *w, uint64_t key, uint64_t also)
{
    pthread_mutex_lock(&iso.mu);
    iso__remember(w, key);
    iso__remember(w, also);
    w->busy = 0;
    pthread_cond_broadcast(&iso.freed);
    pthread_mutex_unlock(&iso.mu);
}

void isolate_stop(void)
{
    pthread_mutex_lock(&iso.mu);
    if (!iso.active) {
        pthread_mutex_unlock(&iso.mu);
        return;
    }
    iso.stopping = 1;
    pthread_cond_broadcast(&iso.freed);
    while (1) { /* calls still running end first (they see stopping when they end) */
        int busy = 0;
        for (int i = 0; i < iso.n; i++)
            busy |= iso.w[i].busy;
        if (!busy)
            break;
        pthread_cond_wait(&iso.freed, &iso.mu);
    }
    iso.active = 0;
    iso_worker *w = iso.w;
    int n = iso.n;
    iso.w = NULL;
    iso.n = 0;
    char **env = iso.envp;
    iso.envp = NULL;
    pthread_mutex_unlock(&iso.mu);
    for (int i = 0; i < n; i++) /* end of file: each worker exits */
        if (w[i].pid) {
            shutdown(w[i].fd, SHUT_RDWR);
        }
    double deadline = iso__now() + ISO_STOP_SECONDS;
    for (int i = 0; i < n; i++) {
        if (!w[i].pid)
            continue;
        int status;
        while (waitpid(w[i].pid, &status, WNOHANG) == 0 && iso__now() < deadline) {
            struct timespec ts = {0, 10000000L};
            nanosleep(&ts, NULL);
        }
        kill(w[i].pid, SIGKILL); /* harmless when it has ended (not reaped yet: it stays ours) */
        iso__reap(&w[i]);
    }
    pthread_mutex_lock(&iso.mu);
    iso.spawner_stop = 1;
    pthread_cond_broadcast(&iso.spawn_more);
    int joined = iso.spawner_running;
    iso.spawner_running = 0;
    pthread_mutex_unlock(&iso.mu);
    if (joined)
        pthread_join(iso.spawner, NULL);
    free(w);
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

/* ---- calls --------------------------------------------------------------------------- */

typedef struct iso_call {
    int op;
    const char *model_id;      /* the model's id, or for a compilation the id of its text */
    const char *model_name;    /* for messages, may be NULL */
    const engine_model *model; /* a call on a model: its name is read from it on a fault */
    const char *what;          /* "compiling", "running", ... for messages */
    const char *text[ISO_STRINGS];
    size_t text_len[ISO_STRINGS];
    const engine_limits *limits;
    engine_control *ctl;
    double budget; /* seconds the engine may take (0: none) */
    /* the reply */
    int rc;
    int checked, check_rc;   /* iso_reply_head's */
    int prerun;              /* ISO_COMPILE: a prerun was asked (text[3], the head): keep the worker */
    struct iso_worker *kept; /* ... when it runs: the worker, still busy */
    char *out[ISO_REPLY_STRINGS];
    size_t out_len[ISO_REPLY_STRINGS];
    uint64_t bytes;
    /* ISO_SIMULATE_MANY: `want` replies, each into many[i] (rc, text; the rest unset);
     * `got` of them came */
    size_t want, got;
    isolate_result *many;
} iso_call;

static void iso__call_clear(iso_call *c)
{
    for (int i = 0; i < ISO_REPLY_STRINGS; i++) {
        free(c->out[i]);
        c->out[i] = NULL;
    }
}

static const char *iso__signal_name(int sig, char buf[32])
{
    const char *abbrev = sigabbrev_np(sig);
    if (abbrev)
        snprintf(buf, 32, "SIG%s", abbrev);
    else
        snprintf(buf, 32, "signal %d", sig);
    return buf;
}

/* The problem of a call whose worker died (status: its wait status), quarantining the
 * model. */
static char *iso__name_of(const engine_model *m);

static json_t *iso__fault(const iso_call *c, int status, int timed_out, const char *note)
{
    /* the model's name (its summary is built for it): only here, not on every call */
    char *owned = !c->model_name && c->model ? iso__name_of(c->model) : NULL;
    const char *name = owned ? owned : c->model_name;
    char sig[32] = "", detail[768], how[128];
    if (timed_out)
        snprintf(how, sizeof how, "did not answer within its deadline and was killed");
    else if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "died of %s", iso__signal_name(WTERMSIG(status), sig));
    else if (WIFEXITED(status))
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(how, sizeof how, "ended");
    snprintf(detail, sizeof detail,
             "the engine worker process %s while %s model %s%s%s%s%s; the model is quarantined (an "
             "operator can clear it: DELETE /v1/quarantine/%s)",
             how, c->what, name ? "\"" : "", name ? name : "", name ? "\" (" : "", c->model_id,
             name ? ")" : "", c->model_id);
    if (note && *note) {
        size_t l = strlen(detail);
        snprintf(detail + l, sizeof detail - l, "; %s", note);
    }
    json_t *p = hamel_problem_new(HAMEL_E_ENGINE_FAULT, detail);
    json_object_set_new(p, "model_id", json_string(c->model_id));
    if (name)
        json_object_set_new(p, "model_name", json_string(name));
    if (sig[0])
        json_object_set_new(p, "signal", json_string(sig));
    else if (timed_out)
        json_object_set_new(p, "signal", json_string("SIGKILL"));
    json_object_set_new(p, "operation", json_string(c->what));
    quarantine_add(c->model_id, p);
    atomic_fetch_add(&iso.faults, 1);
    fprintf(stderr, "hamel-server: engine fault: %s\n", detail);
    free(owned);
    return p;
}

/* Reads n bytes at the start of the reply memfd rfd into p. Returns 0 or -1. */
static int iso__pread_all(int rfd, char *p, size_t n)
{
    for (size_t at = 0; at < n;) {
        ssize_t r = pread(rfd, p + at, n - at, (off_t)at);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        at += (size_t)r;
    }
    return 0;
}

/* Faults in the pages of a fresh buffer p of n bytes in one call (Linux 5.14's
 * MADV_POPULATE_WRITE; elsewhere nothing): a result kept by the results cache is new
 * memory every time, and a 277 KB one read into it page by page took 68 page faults,
 * 0.12 ms where this takes 0.096 (measured with a memfd and pread, 300 reads). */
static void iso__populate(char *p, size_t n)
{
#ifdef __linux__
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)p + page - 1) & ~(page - 1), to = ((uintptr_t)p + n) & ~(page - 1);
    if (to > from && madvise((void *)from, to - from, MADV_POPULATE_WRITE) != 0) { /* an older kernel */
    }
#else
    (void)p;
    (void)n;
#endif
}

/* Reads a reply of worker w into c (rc, out, bytes). Returns 0, or -1 at end of file or on
 * an error. */
static int iso__read_reply(const iso_worker *w, iso_call *c)
{
    int fd = w->fd;
    iso_reply_head h;
    if (iso__read_all(fd, (char *)&h, sizeof h) != 0)
        return -1;
    c->rc = h.rc;
    c->checked = h.checked;
    c->check_rc = h.check_rc;
    c->bytes = h.bytes;
    for (int i = 0; i < ISO_REPLY_STRINGS; i++) {
        c->out_len[i] = 0;
        if (h.len[i] == UINT32_MAX)
            continue;
        if (h.len[i] >= ISO_MAX_FRAME)
            return -1;
        c->out[i] = malloc((size_t)h.len[i] + 1);
        if (!c->out[i])
            return -1;
        if (h.len[i] >= ISO_SHM_MIN)
            iso__populate(c->out[i], h.len[i]);
        if (i == 0 && h.in_shm ? iso__pread_all(w->rfd, c->out[i], h.len[i]) != 0
                               : iso__read_all(fd, c->out[i], h.len[i]) != 0)
            return -1;
        /* a large text's pages go now, not when this worker next replies (it may idle) */
        if (i == 0 && h.in_shm && h.len[i] > ISO_SHM_KEEP && ftruncate(w->rfd, 0) != 0)
            return -1;
        c->out[i][h.len[i]] = '\0';
        c->out_len[i] = h.len[i];
    }
    return 0;
}

/* Waits for the reply on w, forwarding cancel and progress, and reads it into c. Returns
 * 0, or -1 when the worker died (*timed_out: 1 when it was killed for its deadline, 2
 * when it was killed for not stopping after a cancel). */
static int iso__wait(iso_worker *w, iso_call *c, int *timed_out)
{
    double start = iso__now(), cancelled_at = 0;
    double deadline = start + (c->budget > 0 ? c->budget : ISO_NO_BUDGET) + ISO_GRACE_SECONDS;
    *timed_out = 0;
    for (;;) {
        struct pollfd pfd = {w->fd, POLLIN, 0};
        int r = poll(&pfd, 1, ISO_POLL_MS);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r > 0)
            break;
        if (c->ctl) {
            int cancel = atomic_load(&c->ctl->cancel);
            if (cancel && !atomic_load(&w->sh->ctl.cancel)) {
                atomic_store(&w->sh->ctl.cancel, cancel);
                cancelled_at = iso__now();
            }
            atomic_store(&c->ctl->progress, atomic_load(&w->sh->ctl.progress));
        }
        double now = iso__now();
        if (now > deadline || (cancelled_at > 0 && now > cancelled_at + ISO_CANCEL_GRACE)) {
            kill(w->pid, SIGKILL);
            *timed_out = now > deadline ? 1 : 2;
            return -1;
        }
    }
    if (c->ctl)
        atomic_store(&c->ctl->progress, atomic_load(&w->sh->ctl.progress));
    return iso__read_reply(w, c);
}

/* iso__wait for the c->want replies of ISO_SIMULATE_MANY, read as they come into
 * c->many[c->got++]; the deadline runs from the last reply. */
static int iso__wait_many(iso_worker *w, iso_call *c, int *timed_out)
{
    double budget = (c->budget > 0 ? c->budget : ISO_NO_BUDGET) + ISO_GRACE_SECONDS;
    double deadline = iso__now() + budget, cancelled_at = 0;
    *timed_out = 0;
    while (c->got < c->want) {
        struct pollfd pfd = {w->fd, POLLIN, 0};
        int r = poll(&pfd, 1, ISO_POLL_MS);
        if (r < 0 && errno != EINTR)
            return -1;
        if (r > 0) {
            iso_call one;
            memset(&one, 0, sizeof one);
            if (iso__read_reply(w, &one) != 0) {
                iso__call_clear(&one);
                return -1;
            }
            isolate_result *res = &c->many[c->got++];
            res->rc = one.rc;
            res->text = one.out[0];
            res->len = one.out_len[0];
            one.out[0] = NULL;
            iso__call_clear(&one);
            deadline = iso__now() + budget;
            continue;
        }
        if (c->ctl) {
            int cancel = atomic_load(&c->ctl->cancel);
            if (cancel && !atomic_load(&w->sh->ctl.cancel)) {
                atomic_store(&w->sh->ctl.cancel, cancel);
                cancelled_at = iso__now();
            }
        }
        double now = iso__now();
        if (now > deadline || (cancelled_at > 0 && now > cancelled_at + ISO_CANCEL_GRACE)) {
            kill(w->pid, SIGKILL);
            *timed_out = now > deadline ? 1 : 2;
            return -1;
        }
    }
    return 0;
}

/* The end of call c on w when the worker died or was killed (iso__wait's timed_out):
 * w reaped and freed; HAMEL_E_CANCELLED, or HAMEL_E_ENGINE_FAULT (the model quarantined),
 * with *problem. */
static int iso__failed(iso_worker *w, iso_call *c, int timed_out, json_t **problem)
{
    iso__call_clear(c);
    char note[sizeof w->sh->note];
    memcpy(note, w->sh->note, sizeof note);
    note[sizeof note - 1] = '\0';
    int status = iso__reap(w);
    iso__release(w, 0, 0);
    if (timed_out == 2) { /* cancelled: the call ends as cancelled, the model is not at fault */
        *problem = hamel_problem_new(HAMEL_E_CANCELLED, "cancelled (the engine worker was stopped)");
        return HAMEL_E_CANCELLED;
    }
    *problem = iso__fault(c, status, timed_out, note);
    return HAMEL_E_ENGINE_FAULT;
}

/* The end of call c on w when its reply came (c->rc, c->out): w freed, or kept for the
 * prerun that follows (c->kept); the engine's status, with *problem from the reply. */
static int iso__done(iso_worker *w, iso_call *c, uint64_t key, json_t **problem)
{
    /* A compilation's worker holds the model under its id too (the calls that follow
     * name it by that id, not by the spec's hash): they are sent to the same worker
     * rather than compiling it again in another one. */
    uint64_t also = c->op == ISO_COMPILE && c->rc == 0 && c->out[1] ? iso__hash(c->out[1]) : 0;
    if (c->prerun && c->rc == 0 && c->checked && c->check_rc == 0) { /* the worker runs on */
        pthread_mutex_lock(&iso.mu);
        iso__remember(w, key);
        iso__remember(w, also);
        pthread_mutex_unlock(&iso.mu);
        c->kept = w;
    } else {
        iso__release(w, key, also);
    }
    int rc = c->rc;
    if (rc != 0) { /* the problem document */
        *problem = c->out[0] ? json_loads(c->out[0], 0, NULL) : NULL;
        if (!*problem)
            *problem = hamel_problem_new(rc, NULL);
    }
    return rc;
}

/* Runs call c in a worker. Returns the engine's status (the reply in c->out), or
 * HAMEL_E_ENGINE_FAULT / HAMEL_E_UNAVAILABLE with *problem. */
static int iso__run(iso_call *c, json_t **problem)
{
    uint64_t key = iso__hash(c->model_id);
    iso_buf b = {0};
    iso__put_u32(&b, (uint32_t)c->op);
    engine_limits lim = c->limits ? *c->limits : engine_default_limits;
    iso__put(&b, &lim, sizeof lim);
    for (int i = 0; i < ISO_STRINGS; i++)
        iso__put_str(&b, c->text[i], c->text_len[i]);
    if (b.failed) {
        free(b.p);
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory sending the engine call");
        return HAMEL_E_INTERNAL;
    }
    for (int attempt = 0;; attempt++) {
        iso_worker *w = iso__acquire(key);
        if (!w) {
            free(b.p);
            *problem = hamel_problem_new(HAMEL_E_UNAVAILABLE, "the service is stopping; retry");
            return HAMEL_E_UNAVAILABLE;
        }
        if (!w->pid && iso__start_worker(w, 0) != 0) {
            iso__release(w, 0, 0);
            free(b.p);
            *problem = hamel_problem_new(HAMEL_E_UNAVAILABLE, "no engine worker could be started; retry");
            return HAMEL_E_UNAVAILABLE;
        }
        engine_control *sc = &w->sh->ctl;
        atomic_store(&sc->cancel, c->ctl ? atomic_load(&c->ctl->cancel) : 0);
        atomic_store(&sc->progress, 0.0);
        sc->max_steps = c->ctl ? c->ctl->max_steps : 0;
        sc->max_wall_seconds = c->ctl ? c->ctl->max_wall_seconds : 0;
        w->sh->note[0] = '\0';
        if (iso__send(w->fd, &b) != 0) {
            /* It had ended before this call (killed from outside): not this model's fault.
             * Start another and send once more; every worker may have been killed, so as
             * many times as there are slots (each dead one is reaped on the way). */
            kill(w->pid, SIGKILL);
            iso__reap(w);
            iso__release(w, 0, 0);
            pthread_mutex_lock(&iso.mu);
            int slots = iso.n;
            pthread_mutex_unlock(&iso.mu);
            if (attempt < slots)
                continue;
            free(b.p);
            *problem =
                hamel_problem_new(HAMEL_E_UNAVAILABLE, "the engine worker could not be reached; retry");
            return HAMEL_E_UNAVAILABLE;
        }
        int timed_out = 0;
        if ((c->many ? iso__wait_many(w, c, &timed_out) : iso__wait(w, c, &timed_out)) != 0) {
            free(b.p);
            return iso__failed(w, c, timed_out, problem);
        }
        free(b.p);
        return iso__done(w, c, key, problem);
    }
}

static double iso__budget(const engine_limits *lim, const engine_control *ctl, int run)
{
    if (!lim)
        lim = &engine_default_limits;
    /* the engine's own wall-clock bound: a run's max_wall_seconds, or the compile budget's
     * backstop (it counts CPU time, which a loaded machine spreads over more wall time) */
    double b = run ? lim->max_wall_seconds : lim->max_compile_seconds * ENGINE_COMPILE_WALL_FACTOR;
    if (ctl && ctl->max_wall_seconds > b)
        b = ctl->max_wall_seconds;
    return b;
}

/* The quarantine's answer for model id, if it is quarantined (returns 1). */
static int iso__quarantined(const char *id, json_t **problem) { return quarantine_check(id, problem); }

/* The request's JSON text without its model (the worker has it by id). */
static char *iso__request_text(const json_t *request)
{
    if (!json_is_object(request))
        return json_dumps(request, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *copy = json_copy((json_t *)request);
    if (!copy)
        return NULL;
    json_object_del(copy, "model");
    char *t = json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    return t;
}

/* The model's name (a new string) from its summary, for messages; NULL if none. */
static char *iso__name_of(const engine_model *m)
{
    json_t *s = engine_model_summary(m);
    const char *n = json_string_value(json_object_get(s, "name"));
    char *out = n ? strdup(n) : NULL;
    json_decref(s);
    return out;
}

/* A call on a compiled model (a shell): request text and head prepared, run in a worker. */
/* c made ready for op on model m: its id and canonical text as the first two strings,
 * then s2, s3, s4 (NULL: none), with their lengths; the rest zero. */
static void iso__call_on(iso_call *c, int op, const char *what, const engine_model *m, const char *s2,
                         const char *s3, const char *s4)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    c->what = what;
    c->model_id = engine_model_id(m);
    c->model = m;
    c->text[0] = c->model_id;
    c->text[1] = engine_model_canonical(m);
    c->text[2] = s2;
    c->text[3] = s3;
    c->text[4] = s4;
    for (int i = 0; i < ISO_STRINGS; i++)
        c->text_len[i] = c->text[i] ? strlen(c->text[i]) : 0;
}

static int iso__model_call(int op, const char *what, const engine_model *m, const json_t *request,
                           const char *arg, const json_t *head, const engine_limits *limits,
                           engine_control *ctl, int run, iso_call *c, json_t **problem)
{
    memset(c, 0, sizeof *c);
    if (iso__quarantined(engine_model_id(m), problem))
        return HAMEL_E_ENGINE_FAULT;
    char *req = request ? iso__request_text(request) : NULL;
    char *hd = head ? json_dumps(head, JSON_COMPACT) : NULL;
    if ((request && !req) || (head && !hd)) {
        free(req);
        free(hd);
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    iso__call_on(c, op, what, m, req, hd, arg);
    c->limits = limits;
    c->ctl = ctl;
    c->budget = iso__budget(limits, ctl, run);
    if (op == ISO_STEADY)
        c->budget *= ENGINE_STEADY_BUDGET_FACTOR; /* the whole search (engine_steady) */
    int rc = iso__run(c, problem);
    free(req);
    free(hd);
    return rc;
}

/* A call whose result is a JSON document. */
static int iso__json_call(int op, const char *what, const engine_model *m, const json_t *request,
                          const char *arg, const engine_limits *limits, engine_control *ctl, json_t **result,
                          json_t **problem)
{
    iso_call c;
    *result = NULL;
    *problem = NULL;
    int rc = iso__model_call(op, what, m, request, arg, NULL, limits, ctl, 0, &c, problem);
    if (rc == 0) {
        *result = c.out[0] ? json_loads(c.out[0], JSON_DECODE_ANY, NULL) : NULL;
        if (!*result) {
            rc = HAMEL_E_INTERNAL;
            *problem = hamel_problem_new(rc, "the engine worker's result could not be read");
        }
    }
    iso__call_clear(&c);
    return rc;
}

static void iso__prerun_new(iso_worker *w, engine_model *m, const engine_limits *limits,
                            isolate_prerun **out);

/* A prerun's place (returns 1), or none free (0). */
static int iso__prerun_take(void)
{
    pthread_mutex_lock(&iso.mu);
    int ok = iso.active && !iso.stopping && iso.preruns < ISO_MAX_PRERUNS && iso.n > ISO_MAX_PRERUNS;
    iso.preruns += ok;
    pthread_mutex_unlock(&iso.mu);
    return ok;
}

static void iso__prerun_give(void)
{
    pthread_mutex_lock(&iso.mu);
    iso.preruns--;
    pthread_mutex_unlock(&iso.mu);
}

int isolate_model_compile_ctl(const json_t *model, const engine_limits *limits, engine_control *ctl,
                              engine_model **out, json_t **problem)
{
    return isolate_model_compile_check(model, NULL, NULL, limits, ctl, out, problem, NULL, NULL, NULL);
}

/* isolate_model_compile_check without engine workers: here, with the check after. */
static int iso__compile_here(const json_t *model, const json_t *request, const engine_limits *limits,
                             engine_control *ctl, engine_model **out, json_t **problem, isolate_check *check)
{
    int rc = engine_model_compile_ctl(model, limits, ctl, out, problem);
    if (rc == 0 && iso__quarantined(engine_model_id(*out), problem)) {
        engine_model_release(*out);
        *out = NULL;
        return HAMEL_E_ENGINE_FAULT;
    }
    if (rc == 0 && request) {
        check->rc = engine_simulation_check(*out, request, limits, &check->problem);
        check->ran = 1;
    }
    return rc;
}

/* The shell of a compilation's reply c into *out (unless its model is quarantined), and
 * with `check` the outcome of the check that came with it. Returns 0 or the error. */
static int iso__compiled(const iso_call *c, isolate_check *check, engine_model **out, json_t **problem)
{
    json_t *summary = c->out[3] ? json_loads(c->out[3], 0, NULL) : NULL;
    *out = summary && c->out[1] && c->out[2] ? engine_model_shell(c->out[1], c->out[2], summary, c->bytes)
                                             : NULL;
    json_decref(summary);
    if (!*out) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "the engine worker's model could not be read");
        return HAMEL_E_INTERNAL;
    }
    if (iso__quarantined(engine_model_id(*out), problem)) {
        engine_model_release(*out);
        *out = NULL;
        return HAMEL_E_ENGINE_FAULT;
    }
    if (check && c->checked) {
        check->ran = 1;
        check->rc = c->check_rc;
        if (c->check_rc != 0) {
            check->problem = c->out[0] ? json_loads(c->out[0], 0, NULL) : NULL;
            if (!check->problem)
                check->problem = hamel_problem_new(c->check_rc, NULL);
        }
    }
    return 0;
}

int isolate_model_compile_check(const json_t *model, const char *model_text, const json_t *request,
                                const engine_limits *limits, engine_control *ctl, engine_model **out,
                                json_t **problem, isolate_check *check, const json_t *head,
                                isolate_prerun **prerun)
{
    *out = NULL;
    *problem = NULL;
    if (prerun)
        *prerun = NULL;
    if (check)
        *check = (isolate_check){0, 0, NULL};
    else
        request = NULL;
    if (!request || !prerun || !json_is_object(head))
        prerun = NULL;
    if (!isolate_active() || !json_is_object(model))
        return iso__compile_here(model, request, limits, ctl, out, problem, check);
    char *text = model_text ? strdup(model_text) : json_dumps(model, JSON_COMPACT | JSON_SORT_KEYS);
    char *req = request ? iso__request_text(request) : NULL;
    if (prerun && !iso__prerun_take())
        prerun = NULL;
    char *hd = prerun ? json_dumps(head, JSON_COMPACT) : NULL;
    if (prerun && !hd) { /* given back below: the call asks for no run */
        iso__prerun_give();
        prerun = NULL;
    }
    if (!text || (request && !req)) {
        if (prerun)
            iso__prerun_give();
        free(text);
        free(req);
        free(hd);
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)text, strlen(text), d);
    char spec_id[8 + 2 * SHA256_DIGEST_LENGTH + 1];
    snprintf(spec_id, sizeof spec_id, "sha256:");
    ids_hex(d, sizeof d, spec_id + 7);
    if (iso__quarantined(spec_id, problem)) {
        if (prerun)
            iso__prerun_give();
        free(text);
        free(req);
        free(hd);
        return HAMEL_E_ENGINE_FAULT;
    }
    iso_call c;
    memset(&c, 0, sizeof c);
    c.op = ISO_COMPILE;
    c.what = "compiling";
    c.model_id = spec_id;
    c.model_name = json_string_value(json_object_get(model, "name"));
    c.text[1] = text;
    c.text[2] = req; /* the check after the compilation, in the same call */
    c.text[3] = hd;  /* and the run after the check */
    c.prerun = hd != NULL;
    for (int i = 0; i < ISO_STRINGS; i++)
        c.text_len[i] = c.text[i] ? strlen(c.text[i]) : 0;
    c.limits = limits;
    c.ctl = ctl;
    c.budget = iso__budget(limits, ctl, 0);
    int rc = iso__run(&c, problem);
    free(text);
    free(req);
    free(hd);
    if (rc == 0)
        rc = iso__compiled(&c, request ? check : NULL, out, problem);
    if (c.kept) /* the worker runs the request now: a prerun, or (no model) dropped */
        iso__prerun_new(c.kept, *out, limits, prerun);
    else if (hd) /* it does not: its place back */
        iso__prerun_give();
    iso__call_clear(&c);
    return rc;
}

struct isolate_prerun {
    iso_worker *w;       /* reserved (busy) for this run */
    engine_model *model; /* the shell (a reference) */
    double budget;       /* the run's, as iso__model_call's */
};

/* *out: the prerun on w of model m (a new reference), or when there is none (m NULL, out
 * of memory) the run dropped. */
static void iso__prerun_new(iso_worker *w, engine_model *m, const engine_limits *limits, isolate_prerun **out)
{
    isolate_prerun *p = calloc(1, sizeof *p);
    if (p) {
        p->w = w;
        p->model = m ? engine_model_retain(m) : NULL;
        p->budget = iso__budget(limits, NULL, 1);
    }
    if (p && m) {
        *out = p;
        return;
    }
    if (p) {
        isolate_prerun_drop(p);
    } else { /* not even that: the worker's reply is not waited for; end the worker */
        kill(w->pid, SIGKILL);
        iso__reap(w);
        iso__release(w, 0, 0);
        iso__prerun_give();
    }
}

int isolate_prerun_finish(isolate_prerun *p, const json_t *request, const engine_limits *limits,
                          engine_control *ctl, const json_t *head, char **text, size_t *len, json_t **problem)
{
    *text = NULL;
    *len = 0;
    *problem = NULL;
    iso_worker *w = p->w;
    iso_call c;
    iso__call_on(&c, ISO_SIMULATE, "running", p->model, NULL, NULL, NULL);
    c.ctl = ctl;
    c.budget = p->budget;
    if (ctl && atomic_load(&ctl->cancel))
        atomic_store(&w->sh->ctl.cancel, atomic_load(&ctl->cancel));
    int timed_out = 0, rc;
    if (iso__wait(w, &c, &timed_out) != 0) {
        rc = iso__failed(w, &c, timed_out, problem);
    } else {
        rc = iso__done(w, &c, iso__hash(c.model_id), problem);
        if (rc == 0) {
            *text = c.out[0];
            *len = c.out_len[0];
            c.out[0] = NULL;
            if (!*text) {
                rc = HAMEL_E_INTERNAL;
                *problem = hamel_problem_new(rc, "the engine worker's result could not be read");
            }
        }
    }
    iso__call_clear(&c);
    iso__prerun_give(); /* its worker is free */
    if (rc == HAMEL_E_CANCELLED && !(ctl && atomic_load(&ctl->cancel))) {
        /* cancelled by what ran before it was taken, not by its job: once more */
        json_decref(*problem);
        *problem = NULL;
        rc = isolate_simulate_text(p->model, request, limits, ctl, head, text, len, problem);
    }
    engine_model_release(p->model);
    free(p);
    return rc;
}

void isolate_prerun_drop(isolate_prerun *p)
{
    if (!p)
        return;
    engine_control stop;
    memset(&stop, 0, sizeof stop);
    atomic_init(&stop.cancel, 1);
    atomic_init(&stop.progress, 0.0);
    atomic_store(&p->w->sh->ctl.cancel, 1);
    char *text = NULL;
    size_t len = 0;
    json_t *problem = NULL;
    if (p->model) {
        isolate_prerun_finish(p, NULL, NULL, &stop, NULL, &text, &len, &problem);
    } else { /* a model the server did not take (quarantined, out of memory): end its run */
        kill(p->w->pid, SIGKILL);
        iso__reap(p->w);
        iso__release(p->w, 0, 0);
        iso__prerun_give();
        free(p);
    }
    free(text);
    json_decref(problem);
}

int isolate_simulation_check(const engine_model *m, const json_t *request, const engine_limits *limits,
                             json_t **problem)
{
    *problem = NULL;
    if (!engine_model_is_shell(m))
        return engine_simulation_check(m, request, limits, problem);
    iso_call c;
    int rc = iso__model_call(ISO_CHECK, "checking a simulation of", m, request, NULL, NULL, limits, NULL, 0,
                             &c, problem);
    iso__call_clear(&c);
    return rc;
}

/* The text [base, [run, ...]] of a batch's runs (isolate_simulation_check_all, isolate_simulate_many) (base
 * without its model); NULL when out of memory. */
static char *iso__runs_text(const json_t *base, const json_t *const *runs, size_t n)
{
    json_t *b = json_is_object(base) ? json_copy((json_t *)base) : json_object();
    json_object_del(b, "model");
    char *bt = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    iso_buf out = {0};
    iso__put(&out, "[", 1);
    if (bt)
        iso__put(&out, bt, strlen(bt));
    iso__put(&out, ",[", 2);
    for (size_t i = 0; bt && i < n; i++) {
        char *t = json_dumps(runs[i], JSON_COMPACT);
        if (!t) {
            out.failed = 1;
            break;
        }
        if (i)
            iso__put(&out, ",", 1);
        iso__put(&out, t, strlen(t));
        free(t);
    }
    iso__put(&out, "]]", 3); /* with the terminating NUL */
    free(bt);
    if (!bt || out.failed) {
        free(out.p);
        return NULL;
    }
    return out.p;
}

int isolate_simulation_check_all(const engine_model *m, const json_t *base, const json_t *const *runs,
                                 size_t n, const engine_limits *limits, json_t **problems, json_t **problem)
{
    *problem = NULL;
    for (size_t i = 0; i < n; i++)
        problems[i] = NULL;
    if (!engine_model_is_shell(m)) {
        for (size_t i = 0; i < n; i++) {
            json_t *req = merge_run(base, runs[i]);
            if (!req)
                problems[i] = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
            else
                engine_simulation_check(m, req, limits, &problems[i]);
            json_decref(req);
        }
        return 0;
    }
    if (iso__quarantined(engine_model_id(m), problem))
        return HAMEL_E_ENGINE_FAULT;
    char *text = iso__runs_text(base, runs, n);
    if (!text) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    iso_call c;
    iso__call_on(&c, ISO_CHECK_ALL, "checking a simulation of", m, text, NULL, NULL);
    c.limits = limits;
    c.budget = iso__budget(limits, NULL, 0);
    int rc = iso__run(&c, problem);
    free(text);
    json_t *result = rc == 0 && c.out[0] ? json_loads(c.out[0], JSON_DECODE_ANY, NULL) : NULL;
    iso__call_clear(&c);
    if (rc == 0 && json_array_size(result) != n) {
        rc = HAMEL_E_INTERNAL;
        *problem = hamel_problem_new(rc, "the engine worker's checks could not be read");
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *p = json_array_get(result, i);
        problems[i] = json_is_object(p) ? json_incref(p) : NULL;
    }
    json_decref(result);
    return rc;
}

int isolate_simulate_text(const engine_model *m, const json_t *request, const engine_limits *limits,
                          engine_control *ctl, const json_t *head, char **text, size_t *len, json_t **problem)
{
    *text = NULL;
    *len = 0;
    *problem = NULL;
    if (!engine_model_is_shell(m))
        return engine_simulate_text(m, request, limits, ctl, head, text, len, problem);
    iso_call c;
    int rc = iso__model_call(ISO_SIMULATE, "running", m, request, NULL, head, limits, ctl, 1, &c, problem);
    if (rc == 0) { /* the result text, passed through */
        *text = c.out[0];
        *len = c.out_len[0];
        c.out[0] = NULL;
        if (!*text) {
            rc = HAMEL_E_INTERNAL;
            *problem = hamel_problem_new(rc, "the engine worker's result could not be read");
        }
    }
    iso__call_clear(&c);
    return rc;
}

/* The problems of the replies that came (their text parsed), and after a call that ended
 * early (frc: a fault or a cancel) the rest: the run in progress takes `fault`, and the
 * runs after it are not run (a fault) or cancelled. */
static void iso__many_finish(iso_call *c, size_t n, int frc, json_t *fault)
{
    isolate_result *results = c->many;
    for (size_t i = 0; i < c->got; i++) {
        isolate_result *r = &results[i];
        if (r->rc == 0 && !r->text) {
            r->rc = HAMEL_E_INTERNAL;
            r->problem = hamel_problem_new(r->rc, "the engine worker's result could not be read");
        } else if (r->rc != 0) {
            r->problem = r->text ? json_loads(r->text, 0, NULL) : NULL;
            if (!r->problem)
                r->problem = hamel_problem_new(r->rc, NULL);
            free(r->text);
            r->text = NULL;
            r->len = 0;
        }
    }
    if (frc != 0 && c->got < n) {
        results[c->got].rc = frc;
        results[c->got].problem = fault;
        fault = NULL;
        for (size_t i = c->got + 1; i < n; i++) {
            results[i].rc = frc == HAMEL_E_ENGINE_FAULT ? -1 : frc;
            results[i].problem = frc == HAMEL_E_ENGINE_FAULT ? NULL : json_deep_copy(results[c->got].problem);
        }
    }
    json_decref(fault);
}

int isolate_simulate_many(const engine_model *m, const json_t *base, const json_t *const *runs, size_t n,
                          const json_t *head, const char *const *job_ids, double native_wait,
                          const engine_limits *limits, engine_control *ctl, isolate_result *results,
                          json_t **problem)
{
    *problem = NULL;
    memset(results, 0, n * sizeof *results);
    json_t *h = json_deep_copy(head);
    if (!h) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
        return HAMEL_E_INTERNAL;
    }
    if (!engine_model_is_shell(m)) { /* in this process: one after another */
        double until = iso__now() + native_wait;
        while (native_wait > 0 && !(ctl && atomic_load(&ctl->cancel)) && iso__now() < until &&
               engine_model_native_wait((engine_model *)m, ISO_NATIVE_SLICE) == 0)
            ;
        for (size_t i = 0; i < n; i++) {
            isolate_result *r = &results[i];
            json_object_set_new(h, "job_id", json_string(job_ids[i]));
            if (ctl && atomic_load(&ctl->cancel)) {
                r->rc = HAMEL_E_CANCELLED;
                r->problem = hamel_problem_new(r->rc, "cancelled");
                continue;
            }
            json_t *req = merge_run(base, runs[i]);
            r->rc = req ? engine_simulate_text(m, req, limits, ctl, h, &r->text, &r->len, &r->problem)
                        : HAMEL_E_INTERNAL;
            if (!req)
                r->problem = hamel_problem_new(r->rc, "out of memory");
            json_decref(req);
        }
        json_decref(h);
        return 0;
    }
    json_object_del(h, "job_id");
    size_t idlen = 32; /* the native wait's line */
    for (size_t i = 0; i < n; i++)
        idlen += strlen(job_ids[i]) + 1;
    char *ids = malloc(idlen + 1), *p = ids;
    if (ids)
        p += snprintf(p, 32, "%.3f\n", native_wait > 0 && native_wait < 1e6 ? native_wait : 0.0);
    char *reqs = iso__runs_text(base, runs, n), *hd = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    for (size_t i = 0; ids && i < n; i++)
        p += sprintf(p, "%s\n", job_ids[i]);
    int rc = 0;
    if (!ids || !reqs || !hd) {
        rc = HAMEL_E_INTERNAL;
        *problem = hamel_problem_new(rc, "out of memory");
    }
    if (rc == 0 && iso__quarantined(engine_model_id(m), problem))
        rc = HAMEL_E_ENGINE_FAULT;
    if (rc == 0) {
        iso_call c;
        iso__call_on(&c, ISO_SIMULATE_MANY, "running", m, reqs, hd, ids);
        c.limits = limits;
        c.ctl = ctl;
        c.budget = iso__budget(limits, ctl, 1) + (native_wait > 0 ? native_wait : 0);
        c.want = n;
        c.many = results;
        json_t *fault = NULL;
        int frc = iso__run(&c, &fault);
        if (frc != 0 && c.got == 0 && frc != HAMEL_E_ENGINE_FAULT && frc != HAMEL_E_CANCELLED) {
            rc = frc; /* nothing was sent or run */
            *problem = fault;
        } else {
            iso__many_finish(&c, n, frc, fault);
        }
    }
    free(ids);
    free(reqs);
    free(hd);
    return rc;
}

int isolate_hamel(const engine_model *m, const json_t *request, const engine_limits *limits, json_t **result,
                  json_t **problem)
{
    if (!engine_model_is_shell(m))
        return engine_hamel(m, request, limits, result, problem);
    return iso__json_call(ISO_HAMEL, "computing the Hamel coefficients of", m, request, NULL, limits, NULL,
                          result, problem);
}

int isolate_evaluate_ctl(const engine_model *m, const json_t *request, const engine_limits *limits,
                         engine_control *ctl, json_t **result, json_t **problem)
{
    if (!engine_model_is_shell(m))
        return engine_evaluate_ctl(m, request, limits, ctl, result, problem);
    return iso__json_call(ISO_EVALUATE, "evaluating", m, request, NULL, limits, ctl, result, problem);
}

int isolate_linearize(const engine_model *m, const json_t *request, const engine_limits *limits,
                      engine_control *ctl, json_t **result, json_t **problem)
{
    if (!engine_model_is_shell(m))
        return engine_linearize(m, request, limits, ctl, result, problem);
    return iso__json_call(ISO_LINEARIZE, "linearizing", m, request, NULL, limits, ctl, result, problem);
}

int isolate_equations_form_ctl(const engine_model *m, const char *form, const engine_limits *limits,
                               engine_control *ctl, json_t **result, json_t **problem)
{
    if (!engine_model_is_shell(m))
        return form ? engine_equations_form_ctl(m, form, limits, ctl, result, problem)
                    : engine_equations(m, result, problem);
    return iso__json_call(form ? ISO_FORM : ISO_EQUATIONS, "deriving the equations of", m, NULL, form, limits,
                          ctl, result, problem);
}

int isolate_steady(const engine_model *m, const json_t *request, const engine_limits *limits,
                   engine_control *ctl, json_t **result, json_t **problem)
{
    if (!engine_model_is_shell(m))
        return engine_steady(m, request, limits, ctl, result, problem);
    return iso__json_call(ISO_STEADY, "finding steady motions of", m, request, NULL, limits, ctl, result,
                          problem);
}

int isolate_code(const engine_model *m, const json_t *request, const char *lang, const engine_limits *limits,
                 char **text, size_t *len, json_t **problem)
{
    *text = NULL;
    *len = 0;
    *problem = NULL;
    if (!engine_model_is_shell(m))
        return engine_code(m, request, lang, limits, text, len, problem);
    iso_call c;
    int rc = iso__model_call(ISO_CODE, "generating the code of", m, request, lang ? lang : "c", NULL, limits,
                             NULL, 0, &c, problem);
    if (rc == 0) { /* the source text, passed through */
        *text = c.out[0];
        *len = c.out_len[0];
        c.out[0] = NULL;
        if (!*text) {
            rc = HAMEL_E_INTERNAL;
            *problem = hamel_problem_new(rc, "the engine worker's file could not be read");
        }
    }
    iso__call_clear(&c);
    return rc;
}

/* ---- the worker ---------------------------------------------------------------------- */

typedef struct wk_model {
    engine_model *m;
    int abort_on_run; /* the test hook's __fault_abort__ */
    int abort_t13;    /* ... and __fault_abort_t13__: a run with t_end 13 */
    unsigned long used;
} wk_model;

static struct {
    wk_model cache[ISO_WORKER_MODELS];
    size_t bytes;
    unsigned long tick;
    int test_faults;
    long memory_mb;
    size_t max_bytes; /* of the compiled models kept */
    iso_shared *sh;
    int rfd; /* the reply memfd (iso_reply_head.in_shm), -1: none */
} wk;

/* Puts a reply's text in the reply memfd when it is long enough to be worth it; returns 1
 * if it did (the server reads it there before it sends the next call). */
static int wk__text_to_shm(const char *text, size_t len)
{
    if (wk.rfd < 0 || !text || len < ISO_SHM_MIN || len > ISO_SHM_MAX)
        return 0;
    for (size_t at = 0; at < len;) {
        ssize_t w = pwrite(wk.rfd, text + at, len - at, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0; /* no room (tmpfs full): the socket */
        at += (size_t)w;
    }
    return 1;
}

/* The test hook (HAMEL_TEST_FAULTS=1): a model named __fault_segv__ raises SIGSEGV and one
 * named __fault_oom__ allocates without bound while compiled. */
static void wk__compile_hook(const char *name)
{
    if (!wk.test_faults || !name)
        return;
    if (!strcmp(name, "__fault_segv__")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGSEGV, &sa, NULL);
        raise(SIGSEGV);
    }
    if (!strcmp(name, "__fault_oom__")) {
        size_t total = 0;
        for (;;) {
            char *p = malloc(ISO_OOM_CHUNK);
            if (!p || (!wk.memory_mb && total >= ISO_OOM_UNCAPPED)) {
                snprintf(wk.sh->note, sizeof wk.sh->note,
                         "an allocation failed after %zu MiB (the worker's memory cap is %ld MiB)",
                         total >> 20, wk.memory_mb);
                abort();
            }
            memset(p, 1, ISO_OOM_CHUNK);
            total += ISO_OOM_CHUNK;
            __asm__ volatile("" : : "r"(p) : "memory"); /* kept: the allocation is not optimised away */
        }
    }
}

/* Drops the least recently used models until the cache has a free slot and is within
 * its bytes, never the one in slot `keep` (-1: none). */
static void wk__evict(int keep)
{
    while (1) {
        int n = 0, oldest = -1;
        for (int i = 0; i < ISO_WORKER_MODELS; i++) {
            if (!wk.cache[i].m)
                continue;
            n++;
            if (i != keep && (oldest < 0 || wk.cache[i].used < wk.cache[oldest].used))
                oldest = i;
        }
        if (oldest < 0 || (n < ISO_WORKER_MODELS && wk.bytes <= wk.max_bytes))
            return;
        wk.bytes -= engine_model_bytes(wk.cache[oldest].m);
        engine_model_release(wk.cache[oldest].m);
        memset(&wk.cache[oldest], 0, sizeof wk.cache[oldest]);
    }
}

/* Compiles the model text and keeps it. Returns the engine's status. */
static int wk__compile(const char *text, const engine_limits *lim, engine_control *ctl, wk_model **out,
                       json_t **problem)
{
    *out = NULL;
    json_error_t err;
    json_t *spec = json_loads(text ? text : "", 0, &err);
    if (!spec) {
        *problem = hamel_problem_new(HAMEL_E_INTERNAL, "the engine worker could not read the model");
        return HAMEL_E_INTERNAL;
    }
    const char *name = json_string_value(json_object_get(spec, "name"));
    wk__compile_hook(name);
    engine_model *m = NULL;
    int rc = engine_model_compile_ctl(spec, lim, ctl, &m, problem);
    int abort_on_run = wk.test_faults && name && !strcmp(name, "__fault_abort__");
    int abort_t13 = wk.test_faults && name && !strcmp(name, "__fault_abort_t13__");
    json_decref(spec);
    if (rc != 0)
        return rc;
    for (int i = 0; i < ISO_WORKER_MODELS; i++)
        if (wk.cache[i].m && !strcmp(engine_model_id(wk.cache[i].m), engine_model_id(m))) {
            engine_model_release(m);
            wk.cache[i].used = ++wk.tick;
            *out = &wk.cache[i];
            return 0;
        }
    int slot = -1;
    for (int i = 0; i < ISO_WORKER_MODELS && slot < 0; i++)
        if (!wk.cache[i].m)
            slot = i;
    if (slot < 0) {
        wk__evict(-1);
        for (int i = 0; i < ISO_WORKER_MODELS && slot < 0; i++)
            if (!wk.cache[i].m)
                slot = i;
    }
    wk.cache[slot].m = m;
    wk.cache[slot].abort_on_run = abort_on_run;
    wk.cache[slot].abort_t13 = abort_t13;
    wk.cache[slot].used = ++wk.tick;
    wk.bytes += engine_model_bytes(m);
    *out = &wk.cache[slot];
    wk__evict(slot);
    return 0;
}

/* The compiled model of id (compiled from text when this worker does not hold it). */
static int wk__model(const char *id, const char *text, const engine_limits *lim, engine_control *ctl,
                     wk_model **out, json_t **problem)
{
    for (int i = 0; id && i < ISO_WORKER_MODELS; i++)
        if (wk.cache[i].m && !strcmp(engine_model_id(wk.cache[i].m), id)) {
            wk.cache[i].used = ++wk.tick;
            *out = &wk.cache[i];
            return 0;
        }
    return wk__compile(text, lim, ctl, out, problem);
}

/* The test hook: __fault_abort__ aborts every run, __fault_abort_t13__ a run with
 * t_end 13 (a fault in the middle of a batch's block). */
static int wk__aborts(const wk_model *wm, const json_t *request)
{
    return wm->abort_on_run ||
           (wm->abort_t13 && json_number_value(json_object_get(request, "t_end")) == 13.0);
}

/* Writes one reply (rc, text) in one write. Returns 0 or -1. */
static int wk__reply_one(int fd, int rc, const char *text, size_t len)
{
    iso_reply_head h = {rc, 0, 0, {0}, 0, 0};
    h.len[0] = text ? (uint32_t)len : UINT32_MAX;
    for (int i = 1; i < ISO_REPLY_STRINGS; i++)
        h.len[i] = UINT32_MAX;
    if (len >= ISO_MAX_FRAME)
        return -1;
    iso_buf b = {0};
    iso__put(&b, &h, sizeof h);
    if (text)
        iso__put(&b, text, len);
    int sent = !b.failed && iso__write_all(fd, b.p, b.len) == 0;
    free(b.p);
    return sent ? 0 : -1;
}

/* ISO_SIMULATE_MANY: s[2] [base, [run, ...]] (each run merged over the base), s[3] the
 * head, s[4] the seconds to wait for the native tier, then the job ids, one a line. One
 * reply per run, written as each finishes. */
static int wk__serve_many(const engine_limits *lim, char **s, int bad, int fd)
{
    double native_wait = s[4] ? strtod(s[4], NULL) : 0;
    const char *id = s[4] ? strchr(s[4], '\n') : NULL;
    id = id ? id + 1 : "";
    size_t n = 0;
    for (const char *p = id; *p; p++)
        n += *p == '\n';
    engine_control *ctl = &wk.sh->ctl;
    json_t *problem = NULL, *requests = NULL, *head = NULL;
    wk_model *wm = NULL;
    int rc = bad ? HAMEL_E_INTERNAL : 0;
    if (rc != 0)
        problem = hamel_problem_new(rc, "the engine worker could not read the call");
    if (rc == 0)
        rc = wk__model(s[0], s[1], lim, ctl, &wm, &problem);
    if (rc == 0) {
        requests = json_loads(s[2] ? s[2] : "", 0, NULL); /* [base, [run, ...]] */
        head = json_loads(s[3] ? s[3] : "", 0, NULL);
        if (!json_is_object(json_array_get(requests, 0)) ||
            json_array_size(json_array_get(requests, 1)) != n || !json_is_object(head)) {
            rc = HAMEL_E_INTERNAL;
            problem = hamel_problem_new(rc, "the engine worker could not read the requests");
        }
    }
    int sent = 0;
    if (rc != 0) { /* every run answers with the problem */
        char *text = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
        for (size_t i = 0; sent == 0 && i < n; i++)
            sent = wk__reply_one(fd, rc, text, text ? strlen(text) : 0);
        free(text);
    }
    /* a long sweep: its runs start on native code (the wait ends with a cancel) */
    double until = iso__now() + native_wait;
    while (rc == 0 && native_wait > 0 && !atomic_load(&ctl->cancel) && iso__now() < until &&
           engine_model_native_wait(wm->m, ISO_NATIVE_SLICE) == 0)
        ;
    for (size_t i = 0; rc == 0 && sent == 0 && i < n; i++) {
        const char *nl = strchr(id, '\n');
        json_object_set_new(head, "job_id", json_stringn(id, (size_t)(nl - id)));
        id = nl + 1;
        char *text = NULL;
        size_t len = 0;
        json_t *p = NULL;
        int r;
        atomic_store(&ctl->progress, 0.0);
        if (atomic_load(&ctl->cancel)) {
            r = HAMEL_E_CANCELLED;
            p = hamel_problem_new(r, "cancelled");
        } else {
            json_t *req =
                merge_run(json_array_get(requests, 0), json_array_get(json_array_get(requests, 1), i));
            if (req && wk__aborts(wm, req))
                abort(); /* the test hook */
            r = req ? engine_simulate_text(wm->m, req, lim, ctl, head, &text, &len, &p) : HAMEL_E_INTERNAL;
            if (!req)
                p = hamel_problem_new(r, "out of memory");
            json_decref(req);
        }
        if (r != 0) {
            free(text);
            text = p ? json_dumps(p, JSON_COMPACT) : NULL;
            len = text ? strlen(text) : 0;
        }
        sent = wk__reply_one(fd, r, text, len);
        free(text);
        json_decref(p);
    }
    json_decref(problem);
    json_decref(requests);
    json_decref(head);
    return sent;
}

/* Writes a reply (its head and strings in one message: one wake-up of the server; a long
 * text through the reply memfd). Returns 0, or -1 when it could not be sent. */
static int wk__reply(int fd, int rc, int checked, int check_rc, const char *text, size_t text_len,
                     const char *const out3[3], uint64_t bytes)
{
    const char *out[ISO_REPLY_STRINGS] = {text, out3[0], out3[1], out3[2]};
    iso_reply_head h = {rc, checked, check_rc, {0}, 0, bytes};
    h.len[0] = text ? (uint32_t)text_len : UINT32_MAX;
    for (int i = 1; i < ISO_REPLY_STRINGS; i++)
        h.len[i] = out[i] ? (uint32_t)strlen(out[i]) : UINT32_MAX;
    h.in_shm = (uint32_t)wk__text_to_shm(text, text_len);
    struct iovec v[1 + ISO_REPLY_STRINGS];
    int nv = 0;
    v[nv++] = (struct iovec){&h, sizeof h};
    for (int i = h.in_shm ? 1 : 0; i < ISO_REPLY_STRINGS; i++)
        if (out[i])
            v[nv++] = (struct iovec){(void *)out[i], h.len[i]};
    return text_len < ISO_MAX_FRAME && iso__writev_all(fd, v, nv) == 0 ? 0 : -1;
}

/* After a compilation's reply with a passed check: the request run at once with the head
 * s[3] (its "model_id" this model's), the second reply of the call. Returns as wk__reply. */
static int wk__prerun(int fd, wk_model *wm, const json_t *request, const char *head_text,
                      const engine_limits *lim)
{
    engine_control *ctl = &wk.sh->ctl;
    /* the job's controls, not the compilation's: no wall or step bound of its own */
    ctl->max_steps = 0;
    ctl->max_wall_seconds = 0;
    atomic_store(&ctl->progress, 0.0);
    json_t *head = json_loads(head_text, 0, NULL), *problem = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (!json_is_object(head)) {
        rc = HAMEL_E_INTERNAL;
        problem = hamel_problem_new(rc, "the engine worker could not read the head");
    } else {
        json_object_set_new(head, "model_id", json_string(engine_model_id(wm->m)));
        if (wk__aborts(wm, request))
            abort(); /* the test hook */
        rc = engine_simulate_text(wm->m, request, lim, ctl, head, &text, &len, &problem);
    }
    if (rc != 0) {
        free(text);
        text = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
        len = text ? strlen(text) : 0;
    }
    const char *none[3] = {NULL, NULL, NULL};
    int sent = wk__reply(fd, rc, 0, 0, text, len, none, 0);
    free(text);
    json_decref(problem);
    json_decref(head);
    return sent;
}

/* Answers one call with a reply on fd. Returns 0, or -1 when the reply could not be sent. */
static int wk__serve(iso_msg *in, int fd)
{
    uint32_t op = 0;
    engine_limits lim;
    iso__get(in, &op, sizeof op);
    iso__get(in, &lim, sizeof lim);
    char *s[ISO_STRINGS];
    for (int i = 0; i < ISO_STRINGS; i++)
        s[i] = iso__get_str(in, NULL);
    if (op == ISO_SIMULATE_MANY) {
        int sent = wk__serve_many(&lim, s, in->bad, fd);
        for (int i = 0; i < ISO_STRINGS; i++)
            free(s[i]);
        return sent;
    }
    engine_control *ctl = &wk.sh->ctl;
    json_t *problem = NULL, *result = NULL, *request = NULL, *head = NULL;
    char *text = NULL;
    size_t text_len = 0;
    const char *id = NULL, *canonical = NULL;
    char *summary = NULL;
    uint64_t bytes = 0;
    int rc = 0, checked = 0, check_rc = 0;
    wk_model *wm = NULL;
    if (in->bad) {
        rc = HAMEL_E_INTERNAL;
        problem = hamel_problem_new(rc, "the engine worker could not read the call");
    } else if (op == ISO_COMPILE) {
        rc = wk__compile(s[1], &lim, ctl, &wm, &problem);
        if (rc == 0) {
            id = engine_model_id(wm->m);
            canonical = engine_model_canonical(wm->m);
            json_t *sj = engine_model_summary(wm->m);
            summary = sj ? json_dumps(sj, JSON_COMPACT) : NULL;
            json_decref(sj);
            bytes = engine_model_bytes(wm->m);
        }
        if (rc == 0 && s[2]) { /* and the simulation's check: its problem is the text */
            request = json_loads(s[2], JSON_DECODE_ANY, NULL);
            json_t *cp = NULL;
            checked = request != NULL; /* unreadable: the separate check call */
            check_rc = request ? engine_simulation_check(wm->m, request, &lim, &cp) : 0;
            if (check_rc != 0 && cp) {
                text = json_dumps(cp, JSON_COMPACT);
                text_len = text ? strlen(text) : 0;
            }
            json_decref(cp);
        }
    } else {
        rc = wk__model(s[0], s[1], &lim, ctl, &wm, &problem);
        if (rc == 0 && s[2]) {
            request = json_loads(s[2], JSON_DECODE_ANY, NULL);
            if (!request) {
                rc = HAMEL_E_INTERNAL;
                problem = hamel_problem_new(rc, "the engine worker could not read the request");
            }
        }
        if (rc == 0 && s[3])
            head = json_loads(s[3], 0, NULL);
    }
    if (rc == 0 && op != ISO_COMPILE) {
        const engine_model *m = wm->m;
        switch (op) {
        case ISO_CHECK: rc = engine_simulation_check(m, request, &lim, &problem); break;
        case ISO_CHECK_ALL: /* [base, [run, ...]]: an array of null or problems */
            result = json_array();
            for (size_t i = 0; result && i < json_array_size(json_array_get(request, 1)); i++) {
                json_t *p = NULL;
                json_t *req =
                    merge_run(json_array_get(request, 0), json_array_get(json_array_get(request, 1), i));
                if (!req)
                    p = hamel_problem_new(HAMEL_E_INTERNAL, "out of memory");
                else
                    engine_simulation_check(m, req, &lim, &p);
                json_decref(req);
                json_array_append_new(result, p ? p : json_null());
            }
            break;
        case ISO_SIMULATE:
            if (wk__aborts(wm, request))
                abort(); /* the test hook */
            rc = engine_simulate_text(m, request, &lim, ctl, head, &text, &text_len, &problem);
            break;
        case ISO_HAMEL: rc = engine_hamel(m, request, &lim, &result, &problem); break;
        case ISO_EVALUATE: rc = engine_evaluate_ctl(m, request, &lim, ctl, &result, &problem); break;
        case ISO_LINEARIZE: rc = engine_linearize(m, request, &lim, ctl, &result, &problem); break;
        case ISO_EQUATIONS: rc = engine_equations(m, &result, &problem); break;
        case ISO_FORM: rc = engine_equations_form_ctl(m, s[4], &lim, ctl, &result, &problem); break;
        case ISO_STEADY: rc = engine_steady(m, request, &lim, ctl, &result, &problem); break;
        case ISO_CODE: rc = engine_code(m, request, s[4], &lim, &text, &text_len, &problem); break;
        default: rc = HAMEL_E_INTERNAL; problem = hamel_problem_new(rc, "unknown engine call");
        }
    }
    if (rc != 0) {
        free(text);
        text = problem ? json_dumps(problem, JSON_COMPACT) : NULL;
        text_len = text ? strlen(text) : 0;
    } else if (result) {
        text = json_dumps(result, JSON_COMPACT | JSON_ENCODE_ANY);
        text_len = text ? strlen(text) : 0;
    }
    const char *out3[3] = {id, canonical, summary};
    int sent = wk__reply(fd, rc, checked, check_rc, text, text_len, out3, bytes) == 0;
    /* a compilation whose check passed, with a head: the run follows (the server keeps
     * this worker for it; the same rule on both sides) */
    if (sent && op == ISO_COMPILE && rc == 0 && checked && check_rc == 0 && s[3])
        sent = wk__prerun(fd, wm, request, s[3], &lim) == 0;
    free(text);
    free(summary);
    json_decref(problem);
    json_decref(result);
    json_decref(request);
    json_decref(head);
    for (int i = 0; i < ISO_STRINGS; i++)
        free(s[i]);
    return sent ? 0 : -1;
}

/* Caps the address space at what the process maps now plus mb MiB. */
static void wk__memory_cap(long mb)
{
    if (mb <= 0)
        return;
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    rlim_t cap = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)mb << 20);
    struct rlimit rl = {cap, cap};
    if (setrlimit(RLIMIT_AS, &rl) != 0)
        fprintf(stderr, "hamel-server: engine worker: RLIMIT_AS: %s\n", strerror(errno));
}

int isolate_worker_main(int argc, char **argv)
{
    if (argc < 7)
        return 2;
    int fd = atoi(argv[2]), shm = atoi(argv[3]);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the server gone (even kill -9): the worker too */
    if (getppid() == 1)
        return 0;
    signal(SIGPIPE, SIG_IGN);
    wk.sh = mmap(NULL, sizeof *wk.sh, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
    close(shm);
    if (wk.sh == MAP_FAILED)
        return 2;
    wk.rfd = argc > 7 ? atoi(argv[7]) : -1;
    wk.memory_mb = atol(argv[4]);
    wk.max_bytes = (size_t)strtoull(argv[6], NULL, 10);
    const char *tf = getenv("HAMEL_TEST_FAULTS");
    wk.test_faults = tf && !strcmp(tf, "1");
    engine_init();
    if (argv[5][0] && engine_code_cache(argv[5]) != 0)
        fprintf(stderr, "hamel-server: engine worker: code cache %s cannot be made\n", argv[5]);
    wk__memory_cap(wk.memory_mb);
    for (;;) {
        char *data = NULL;
        size_t len = 0;
        if (iso__recv(fd, &data, &len) != 0)
            break;
        iso_msg in = {data, len, 0, 0};
        int sent = wk__serve(&in, fd);
        free(data);
        if (sent != 0)
            break;
    }
    for (int i = 0; i < ISO_WORKER_MODELS; i++)
        engine_model_release(wk.cache[i].m);
    engine_shutdown();
    munmap(wk.sh, sizeof *wk.sh);
    return 0;
}
