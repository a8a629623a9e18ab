/* native.c — the optimizing tier: C for the reduced equations, compiled by the system
 * compiler in a background thread, cached on disk, loaded with dlopen (see native.h).
 *
 * Lock order: native_lock guards the directory name, the key, the stopping flag and the
 * two pools' pointers (the cc build and the first tier, each an engine/base/pool.h pool
 * of one thread); it is held for those and around pool_submit (the pool's mutex is a
 * leaf, taken inside it), never across a build, a libtcc compile, a model call or dlopen.
 * A task's run and done take it only for a moment, never while the pool's is held.
 */
#include "native.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "error.h"
#include "engine_types.h"
#include "hamel.h"
#include "identity.h"
#include "jit.h"
#include "model.h"
#include "pool.h"
#include "sha256.h"

_Static_assert(NATIVE_MAC_BYTES == SHA256_BYTES, "a record is one HMAC-SHA256");

extern char **environ;

static pthread_mutex_t native_lock = PTHREAD_MUTEX_INITIALIZER;
static int native_stopping;     /* native_shutdown: nothing more is queued or built */
static atomic_int native_child; /* pid of the running compiler, or 0 */
static char native_dir[1024];
/* The secret that signs what this tier writes to the cache (native__key_load); set with
 * native_dir, under native_lock. */
static unsigned char native_key[NATIVE_KEY_MAX];
static size_t native_key_len;
static atomic_uint native_seq;
static atomic_uint native_builds; /* compiler runs: the directory is pruned every 64 */

static int native__disabled(void)
{
    const char *v = getenv("HAMEL_NO_NATIVE");
    return v && *v && strcmp(v, "0") != 0;
}

/* Whether a file or directory is ours and no one else may write it. */
static int native__private(const struct stat *st)
{
    return st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Reads the key file at path (a regular file of ours, mode 0600 or stricter, not a link),
 * creating it with NATIVE_KEY_BYTES random bytes first if it does not exist (written under
 * a temporary name and linked into place, so two processes starting at once agree on
 * one key). Returns 0 with key[*len], or -1. */
static int native__key_load(const char *path, unsigned char key[NATIVE_KEY_MAX], size_t *len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        char tmp[1200];
        snprintf(tmp, sizeof tmp, "%s.tmp-%ld", path, (long)getpid());
        unsigned char fresh[NATIVE_KEY_BYTES];
        int w = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int ok = w >= 0 && getrandom(fresh, sizeof fresh, 0) == (ssize_t)sizeof fresh &&
                 write(w, fresh, sizeof fresh) == (ssize_t)sizeof fresh && fsync(w) == 0;
        if (w >= 0 && close(w) != 0)
            ok = 0;
        if (ok && link(tmp, path) != 0 && errno != EEXIST)
            ok = 0;
        if (w >= 0)
            unlink(tmp);
        sha256_wipe(fresh, sizeof fresh);
        if (!ok)
            return -1;
        fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && !(st.st_mode & 077))
        n = read(fd, key, NATIVE_KEY_MAX);
    close(fd);
    if (n < NATIVE_KEY_BYTES)
        return -1;
    *len = (size_t)n;
    return 0;
}

/* Checks dir (made if missing) and reads its key; 0, or -1. */
static int native__open_dir(const char *dir, unsigned char key[NATIVE_KEY_MAX], size_t *key_len)
{
    if (strlen(dir) >= sizeof native_dir - 200)
        return -1;
    /* the directory and its parent (e.g. <data>/native under a new data dir) */
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        mkdir(parent, 0755);
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return -1;
    /* Only this user may write there: another who could would plant objects. */
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || !native__private(&st))
        return -1;
    const char *kf = getenv("HAMEL_NATIVE_KEY_FILE");
    char key_path[1100];
    if (kf && *kf) {
        snprintf(key_path, sizeof key_path, "%s", kf);
    } else { /* beside the directory, never in it: <dir>.key */
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            n--;
        snprintf(key_path, sizeof key_path, "%.*s.key", (int)n, dir);
    }
    if (native__key_load(key_path, key, key_len) != 0)
        return -1;
    return 0;
}

int native_configure(const char *dir)
{
    unsigned char key[NATIVE_KEY_MAX];
    size_t key_len = 0;
    int rc = dir && *dir ? native__open_dir(dir, key, &key_len) : 0;
    if (rc != 0)
        key_len = 0;
    /* A directory that fails the checks turns the tier off (not: keeps the last one). */
    pthread_mutex_lock(&native_lock);
    snprintf(native_dir, sizeof native_dir, "%s", rc == 0 && dir ? dir : "");
    memcpy(native_key, key, key_len);
    native_key_len = key_len;
    pthread_mutex_unlock(&native_lock);
    sha256_wipe(key, sizeof key);
    return rc;
}

int engine_code_cache(const char *dir) { return native_configure(dir); }

/* ---- the generated source ------------------------------------------------------- */

/* Marks in used[] the inputs that t's computation reads. */
static void native__used(const tape *t, char *used)
{
    for (int i = 0; i < t->n_ins; i++) {
        const tape_ins *p = &t->ins[i];
        if (p->op == TAPE_INPUT || p->op == TAPE_CONST)
            continue;
        if (p->a >= 0 && p->a < t->n_ins && t->ins[p->a].op == TAPE_INPUT)
            used[t->ins[p->a].a] = 1;
        if (p->op == TAPE_ADD || p->op == TAPE_SUB || p->op == TAPE_MUL || p->op == TAPE_DIV ||
            p->op == TAPE_POW || p->op == TAPE_ATAN2)
            if (p->b >= 0 && p->b < t->n_ins && t->ins[p->b].op == TAPE_INPUT)
                used[t->ins[p->b].a] = 1;
    }
    for (int o = 0; o < t->n_outputs; o++)
        if (t->ins[t->outputs[o]].op == TAPE_INPUT)
            used[t->ins[t->outputs[o]].a] = 1;
}

/* How each tape input is read by fy: from t or y (ex_y); parameters folded as values
 * (val). -1 when an input fy cannot provide is used, or out of memory. */
static int native__inputs(const struct engine_model *m, int ni, const char *used, char **ex_y, double *val)
{
    int n = m->n, k = m->k;
    for (int a = 0; a < ni; a++) {
        char buf[32];
        if (a < m->np) {
            val[a] = m->param_values[a]; /* folded: ex_* stay NULL */
            continue;
        }
        if (a == model_input_t(m))
            snprintf(buf, sizeof buf, "t");
        else if (a >= model_input_q(m) && a < model_input_q(m) + n)
            snprintf(buf, sizeof buf, "y[%d]", a - model_input_q(m));
        else
            snprintf(buf, sizeof buf, "0.0");
        for (int r = 0; r < k; r++)
            if (m->u_slot[r] == a)
                snprintf(buf, sizeof buf, "y[%d]", n + r);
        if (strcmp(buf, "0.0") == 0 && used[a])
            return -1; /* an input fy cannot provide */
        ex_y[a] = strdup(buf);
        if (!ex_y[a])
            return -1;
    }
    return 0;
}

/* How the generated C is cut into functions: cc -O2's time and memory grow faster than
 * the size of a function (register allocation: the bicycle's 6,593 slots as one function
 * 1.3 s and 122 MB, as parts 0.55 s and 60 MB; a car with 24 trailers 14.6 s and 888 MB
 * against 2.2 s and 162 MB), so a tape of more than NATIVE_SPLIT_ABOVE slots is written
 * as parts of at most NATIVE_PART slots each (jit_source). Below it one function builds
 * about as fast. HAMEL_NATIVE_PART (slots per part, 0: one function) overrides it, for
 * measurements (bench/bench_scale.c). */
#define NATIVE_SPLIT_ABOVE 4000
#define NATIVE_PART 500
/* Parts per translation unit: each unit is compiled on its own, so the compiler's peak
 * memory is a unit's (16,000 slots: about 100 MB), whatever the size of the tape. */
#define NATIVE_UNIT_PARTS 32

static int native__block(const tape *t)
{
    const char *v = getenv("HAMEL_NATIVE_PART");
    if (v && *v)
        return atoi(v) > 0 ? atoi(v) : 0;
    return t->n_ins > NATIVE_SPLIT_ABOVE ? NATIVE_PART : 0;
}

/* Appends to buf (cap bytes, *len used) with vsnprintf; 0, or -1 when it is full. */
static int native__put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int native__put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = *len < cap ? vsnprintf(buf + *len, cap - *len, fmt, ap) : -1;
    va_end(ap);
    if (w < 0 || (size_t)w >= cap - *len)
        return -1;
    *len += (size_t)w;
    return 0;
}

/* fy: the tape once, reading t and y = (q, u), its outputs into out; f, g and h call it.
 * NULL when out of memory. */
static char *native__source_body(const tape *t, char **ex_y, double *val)
{
    char nomem[96]; /* NaN outputs: the run fails as with any non-finite value */
    snprintf(nomem, sizeof nomem, "for (int i = 0; i < %d; i++) out[i] = 0.0 / 0.0;", t->n_outputs);
    size_t cap = (size_t)t->n_outputs * 32 + 1, len = 0;
    char *epi = malloc(cap);
    if (!epi)
        return NULL;
    epi[0] = 0;
    for (int o = 0; o < t->n_outputs; o++)
        len += (size_t)snprintf(epi + len, cap - len, "out[%d] = s%d;\n", o, t->outputs[o]);
    jit_inputs map = {(const char *const *)ex_y, val};
    jit_function fn = {.name = "fy",
                       .params = "double t, const double *y, double *out",
                       .args = "t, y, out",
                       .epilogue = epi,
                       .on_nomem = nomem,
                       .block = native__block(t),
                       .unit_parts = NATIVE_UNIT_PARTS};
    char *src = jit_source(t, &map, &fn, 1, NULL);
    free(epi);
    return src;
}

/* f: the tape's outputs from its inputs in[] (t, q and the speeds' slots; the native
 * code reads no other input, native__inputs), through fy. */
static int native__wrap_f(const struct engine_model *m, char *e, size_t cap, size_t *len)
{
    int n = m->n, k = m->k, bad = 0;
    bad |= native__put(e, cap, len, "void f(const double *in, double *out)\n{\ndouble y[%d];\n", n + k);
    for (int i = 0; i < n && !bad; i++)
        bad |= native__put(e, cap, len, "y[%d] = in[%d];\n", i, model_input_q(m) + i);
    for (int r = 0; r < k && !bad; r++)
        bad |= native__put(e, cap, len, "y[%d] = in[%d];\n", n + r, m->u_slot[r]);
    bad |= native__put(e, cap, len, "fy(in[%d], y, out);\n}\n", model_input_t(m));
    return bad ? -1 : 0;
}

/* g: dydt = (q', M*^-1 F), the products in hamel.c's order, when M* is constant and
 * invertible (-1 otherwise, or when out of room). M*^-1 is written as k*k literals, so
 * only up to NATIVE_MINV_MAX_K speeds (the source grows as k^2); past it the object has
 * f only and hamel.c applies M*^-1, as it does when there is no g. */
static int native__wrap_g(const struct engine_model *m, const tape *t, char *e, size_t cap, size_t *len)
{
    enum { NATIVE_MINV_MAX_K = 64 };
    int n = m->n, k = m->k, bad = 0;
    if (!m->fast_mass_const || k > NATIVE_MINV_MAX_K)
        return -1;
    double *minv = calloc((size_t)k * k + 1, sizeof *minv);
    if (!minv || hamel_const_mass_inverse(m, m->param_values, minv) != 0) {
        free(minv);
        return -1;
    }
    bad |= native__put(e, cap, len, "void g(double t, const double *y, double *dydt)\n{\ndouble o[%d];\n",
                       t->n_outputs);
    bad |= native__put(e, cap, len, "fy(t, y, o);\nfor (int i = 0; i < %d; i++) dydt[i] = o[i];\n", n);
    for (int r = 0; r < k && !bad; r++) {
        bad |= native__put(e, cap, len, "{ double a = 0.0;");
        for (int c = 0; c < k && !bad; c++) {
            uint64_t bits;
            double v = minv[(size_t)r * k + c];
            /* a zero entry adds +-0 to a sum that starts at +0.0: no change for a finite F
             * (a non-finite F fails the run on either tier) */
            if (v == 0.0)
                continue;
            memcpy(&bits, &v, sizeof bits);
            /* the constant by its bits: exact whatever the printing; F follows q' */
            bad |= native__put(e, cap, len, " { union jit_k kk = {0x%016llxULL}; a += kk.d * o[%d]; }",
                               (unsigned long long)bits, n + c);
        }
        bad |= native__put(e, cap, len, " dydt[%d] = a; }\n", n + r);
    }
    bad |= native__put(e, cap, len, "}\n");
    free(minv);
    return bad ? -1 : 0;
}

/* h: dydt = (q', M*^-1 F) for a mass matrix that is not constant, up to
 * NATIVE_SOLVE_MAX_K speeds (the unrolled factorization grows as k^3), so the solve is
 * compiled with the rest instead of hamel.c copying the tape's outputs out and calling
 * linalg per evaluation: M* u' = F solved as hamel.c's solve_spd does when its Cholesky
 * succeeds (linalg_chol and linalg_chol_solve unrolled: the same operations in the same
 * order, so the same results); a pivot that is not positive and finite sets *fail (the
 * caller then takes the tape's path, whose LU handles it). L_i_j (i >= j) is the factor,
 * z_i the forward and x_i the backward solution. -1 when not written. */
static int native__wrap_h(const struct engine_model *m, const tape *t, char *e, size_t cap, size_t *len)
{
    enum { NATIVE_SOLVE_MAX_K = 24 };
    int n = m->n, k = m->k, bad = 0;
    if (m->fast_mass_const || k < 1 || k > NATIVE_SOLVE_MAX_K || t->n_outputs != n + k * (k + 1) / 2 + k)
        return -1;
    const int ms = n, F = n + k * (k + 1) / 2; /* o = (q', M* (upper, by rows), F) */
    bad |= native__put(e, cap, len,
                       "void h(double t, const double *y, double *dydt, int *fail)\n{\ndouble o[%d];\n"
                       "fy(t, y, o);\nfor (int i = 0; i < %d; i++) dydt[i] = o[i];\n",
                       t->n_outputs, n);
    for (int j = 0; j < k && !bad; j++) {
        int row = ms + j * k - j * (j - 1) / 2; /* (j, j) */
        bad |= native__put(e, cap, len, "double d%d = o[%d]", j, row);
        for (int c = 0; c < j && !bad; c++)
            bad |= native__put(e, cap, len, " - L_%d_%d * L_%d_%d", j, c, j, c);
        bad |=
            native__put(e, cap, len,
                        ";\nif (!(d%d > 0.0) || !(d%d <= 0x1.fffffffffffffp+1023)) { *fail = 1; return; }\n"
                        "double L_%d_%d = sqrt(d%d);\ndouble i%d = 1.0 / L_%d_%d;\n",
                        j, j, j, j, j, j, j, j);
        for (int i = j + 1; i < k && !bad; i++) {
            bad |= native__put(e, cap, len, "double L_%d_%d = (o[%d]", i, j, row + i - j);
            for (int c = 0; c < j && !bad; c++)
                bad |= native__put(e, cap, len, " - L_%d_%d * L_%d_%d", i, c, j, c);
            bad |= native__put(e, cap, len, ") * i%d;\n", j);
        }
    }
    for (int i = 0; i < k && !bad; i++) {
        bad |= native__put(e, cap, len, "double z%d = (o[%d]", i, F + i);
        for (int c = 0; c < i && !bad; c++)
            bad |= native__put(e, cap, len, " - L_%d_%d * z%d", i, c, c);
        bad |= native__put(e, cap, len, ") / L_%d_%d;\n", i, i);
    }
    for (int i = k - 1; i >= 0 && !bad; i--) {
        bad |= native__put(e, cap, len, "double x%d = (z%d", i, i);
        for (int c = i + 1; c < k && !bad; c++)
            bad |= native__put(e, cap, len, " - L_%d_%d * x%d", c, i, c);
        bad |= native__put(e, cap, len, ") / L_%d_%d;\ndydt[%d] = x%d;\n", i, i, n + i, i);
    }
    bad |= native__put(e, cap, len, "}\n");
    return bad ? -1 : 0;
}

/* The source for m: fy (tape_fast once, parameters folded), f (the tape's outputs) and,
 * when M* is constant and invertible, g (the whole right-hand side with M*^-1 folded),
 * else h (the whole right-hand side with M* solved) for up to 24 speeds. NULL if the
 * tape reads an input the native code does not provide. Caller frees. */
static char *native__source(const struct engine_model *m)
{
    const tape *t = m->tape_fast;
    int ni = t->n_inputs, k = m->k;
    char **ex_y = calloc(ni, sizeof *ex_y);
    double *val = calloc(ni, sizeof *val);
    char *used = calloc(ni, 1);
    char *src = NULL, *body = NULL, *wrap = NULL;
    /* f's copies, g's k*k products or h's k^3/6 factorization, and their lines */
    size_t cap = (size_t)(m->n + k) * 40 + (size_t)k * k * 72 + (size_t)k * k * k * 16 + 1024, len = 0;
    if (!ex_y || !val || !used)
        goto out;
    native__used(t, used);
    if (native__inputs(m, ni, used, ex_y, val) < 0)
        goto out;
    body = native__source_body(t, ex_y, val);
    wrap = malloc(cap);
    if (!body || !wrap || native__wrap_f(m, wrap, cap, &len) < 0)
        goto out;
    size_t keep = len;
    if (native__wrap_g(m, t, wrap, cap, &len) < 0) {
        len = keep;
        if (native__wrap_h(m, t, wrap, cap, &len) < 0)
            len = keep;
    }
    wrap[len] = 0;
    size_t lb = strlen(body);
    src = malloc(lb + len + 1);
    if (src) {
        memcpy(src, body, lb);
        memcpy(src + lb, wrap, len + 1);
    }
out:
    for (int a = 0; a < ni && ex_y; a++)
        free(ex_y[a]);
    free(ex_y);
    free(val);
    free(used);
    free(body);
    free(wrap);
    return src;
}

/* ---- building -------------------------------------------------------------------- */

static double native__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the compiler on the n sources c_paths (each a translation unit of its own) into
 * so_path; 0 on success. */
/* The instruction set the code is compiled for, as a compiler flag, or "" for the
 * compiler's default: -mavx where this CPU (and its OS) has AVX, whose three-operand
 * (VEX) forms save the register copies SSE2's two-operand forms need (a car with 10
 * trailers: about 0.83x the time per right-hand side). The operations stay lane-wise
 * IEEE and unfused (-ffp-contract=off), so the results are the same to the bit.
 * HAMEL_NATIVE_ISA=0 keeps the default (measurements). Part of the object's name
 * (native__build), so a cache shared with a machine without AVX never hands it one. */
static const char *native__isa(void)
{
    const char *v = getenv("HAMEL_NATIVE_ISA");
    if (v && strcmp(v, "0") == 0)
        return "";
#if defined(__x86_64__) && defined(__GNUC__)
    /* (libgcc's constructor has filled in what this reads: no __builtin_cpu_init, which
     * would write it again from whichever thread builds) */
    if (__builtin_cpu_supports("avx"))
        return "-mavx";
#endif
    return "";
}

static int native__cc(char *const *c_paths, int n, const char *so_path)
{
    const char *cc = getenv("HAMEL_CC"), *isa = native__isa();
    if (!cc || !*cc)
        cc = "cc";
    char *flags[] = {(char *)cc,        "-O2", "-fPIC", "-shared", "-ffp-contract=off",
                     "-fno-math-errno", "-w",  "-pipe", "-o",      (char *)so_path};
    int nf = (int)(sizeof flags / sizeof flags[0]);
    char **argv = calloc((size_t)(nf + n + 3), sizeof *argv);
    if (!argv)
        return -1;
    memcpy(argv, flags, sizeof flags);
    if (*isa)
        argv[nf++] = (char *)isa;
    memcpy(argv + nf, c_paths, (size_t)n * sizeof *argv);
    argv[nf + n] = "-lm";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, cc, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(argv);
    if (rc != 0)
        return -1;
    atomic_store(&native_child, (int)pid);
    double deadline = native__now() + NATIVE_MAX_SECONDS;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (native__now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            atomic_store(&native_child, 0);
            return -1;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&native_child, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Writes src as its translation units (split at JIT_UNIT_MARK) to <stem>-<i>.c and
 * compiles them into so_path; the sources are removed. 0 on success. */
static int native__compile(const char *src, const char *stem, const char *so_path)
{
    int n = 1, ok = 1;
    for (const char *q = src; (q = strstr(q, JIT_UNIT_MARK)) != NULL; q += strlen(JIT_UNIT_MARK))
        n++;
    char **paths = calloc((size_t)n, sizeof *paths);
    if (!paths)
        return -1;
    const char *at = src;
    for (int i = 0; i < n && ok; i++) {
        const char *end = strstr(at, JIT_UNIT_MARK);
        size_t len = end ? (size_t)(end - at) : strlen(at);
        size_t pl = strlen(stem) + 16;
        FILE *fp = NULL;
        paths[i] = malloc(pl);
        if (paths[i]) {
            snprintf(paths[i], pl, "%s-%d.c", stem, i);
            fp = fopen(paths[i], "w");
        }
        ok = fp && fwrite(at, 1, len, fp) == len;
        if (fp && fclose(fp) != 0)
            ok = 0;
        at = end ? end + strlen(JIT_UNIT_MARK) : at + len;
    }
    ok = ok && native__cc(paths, n, so_path) == 0;
    for (int i = 0; i < n; i++) {
        if (paths[i])
            unlink(paths[i]);
        free(paths[i]);
    }
    free(paths);
    return ok ? 0 : -1;
}

/* ---- what the cache holds: objects signed by the server that built them -------------- */

/* The record of an object: HMAC-SHA256 under the key of its file name and its bytes, so
 * neither a planted object nor a real one under another model's name verifies. */
static void native__mac(const unsigned char *key, size_t key_len, const char *name,
                        const unsigned char *bytes, size_t len, unsigned char mac[NATIVE_MAC_BYTES])
{
    size_t nl = strlen(name) + 1;
    unsigned char *msg = malloc(nl + len);
    if (!msg) {
        memset(mac, 0, NATIVE_MAC_BYTES);
        free(msg);
        return;
    }
    memcpy(msg, name, nl);
    memcpy(msg + nl, bytes, len);
    hmac_sha256(key, key_len, msg, nl + len, mac);
    free(msg);
}

/* The whole content of the regular file at path, read through one descriptor opened
 * without following a link, when the file is ours and no one else may write it.
 * Returns it (caller frees) with *len, or NULL. */
static unsigned char *native__read_private(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    unsigned char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && native__private(&st) && st.st_size > 0 &&
        (size_t)st.st_size <= max)
        buf = malloc((size_t)st.st_size);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf || got != (size_t)st.st_size) {
        free(buf);
        return NULL;
    }
    *len = got;
    return buf;
}

/* The record's path for an object's: <name>.mac for <name>.so. */
static void native__mac_path(const char *so_path, char *out, size_t cap)
{
    size_t n = strlen(so_path);
    snprintf(out, cap, "%.*s.mac", (int)(n > 3 ? n - 3 : n), so_path);
}

static const char *native__base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The bytes of the object at so_path when its record proves that a server holding the
 * key wrote them; NULL for anything else (a planted object, a link, a missing or forged
 * record). Caller frees. */
static unsigned char *native__read_signed(const char *so_path, const unsigned char *key, size_t key_len,
                                          size_t *len)
{
    char mac_path[1400];
    native__mac_path(so_path, mac_path, sizeof mac_path);
    size_t rlen = 0;
    unsigned char *rec = native__read_private(mac_path, 2 * NATIVE_MAC_BYTES + 1, &rlen);
    unsigned char *obj = rec ? native__read_private(so_path, NATIVE_MAX_OBJECT_BYTES, len) : NULL;
    int ok = obj && rlen >= 2 * NATIVE_MAC_BYTES;
    if (ok) {
        unsigned char want[NATIVE_MAC_BYTES], got[NATIVE_MAC_BYTES];
        native__mac(key, key_len, native__base(so_path), obj, *len, want);
        for (int i = 0; i < NATIVE_MAC_BYTES && ok; i++)
            ok = sscanf((const char *)rec + 2 * i, "%2hhx", &got[i]) == 1;
        ok = ok && sha256_equal(want, got, NATIVE_MAC_BYTES);
    }
    free(rec);
    if (!ok) {
        free(obj);
        return NULL;
    }
    return obj;
}

/* Writes the record of bytes under so_path's name (a temporary file renamed into place).
 * Returns 0 or -1. */
static int native__sign(const char *so_path, const unsigned char *key, size_t key_len,
                        const unsigned char *bytes, size_t len)
{
    unsigned char mac[NATIVE_MAC_BYTES];
    native__mac(key, key_len, native__base(so_path), bytes, len, mac);
    char hex[2 * NATIVE_MAC_BYTES + 2];
    for (int i = 0; i < NATIVE_MAC_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    hex[2 * NATIVE_MAC_BYTES] = '\n';
    char mac_path[1400], tmp[1500];
    native__mac_path(so_path, mac_path, sizeof mac_path);
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", mac_path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    int ok = fd >= 0 && write(fd, hex, 2 * NATIVE_MAC_BYTES + 1) == 2 * NATIVE_MAC_BYTES + 1;
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    if (ok && rename(tmp, mac_path) != 0)
        ok = 0;
    if (!ok)
        unlink(tmp);
    return ok ? 0 : -1;
}

/* Loads an object from its verified bytes and checks f against the interpreter at a
 * test point. The bytes go to a sealed memfd and dlopen reads that, so what runs is
 * exactly what was verified, whatever happens to the file meanwhile; the memfd stays
 * open while the object is loaded (its /proc/self/fd name must not be reused then). */
static native_code *native__load(const struct engine_model *m, const unsigned char *bytes, size_t len)
{
    int fd = memfd_create("hamel-native", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return NULL;
    size_t put = 0;
    while (put < len) {
        ssize_t n = write(fd, bytes + put, len - put);
        if (n <= 0)
            break;
        put += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *dl =
        put == len && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0
            ? dlopen(path, RTLD_NOW | RTLD_LOCAL)
            : NULL;
    if (!dl) {
        close(fd);
        return NULL;
    }
    void *f = dlsym(dl, "f"), *g = dlsym(dl, "g"), *h = dlsym(dl, "h");
    native_code *c = f ? calloc(1, sizeof *c) : NULL;
    const tape *t = m->tape_fast;
    double *in = calloc(m->n_in + 1, sizeof *in), *work = calloc(t->n_ins + 1, sizeof *work);
    double *a = calloc(t->n_outputs + 1, sizeof *a), *b = calloc(t->n_outputs + 1, sizeof *b);
    int ok = c && in && work && a && b;
    if (ok) {
        memcpy(&c->fast, &f, sizeof c->fast);
        if (g)
            memcpy(&c->rhs, &g, sizeof c->rhs);
        if (h)
            memcpy(&c->solve, &h, sizeof c->solve);
        model_test_point(m, 1, in);
        tape_eval(t, in, work, a);
        c->fast(in, b);
        for (int o = 0; o < t->n_outputs && ok; o++) {
            double s = fabs(a[o]) > 1.0 ? fabs(a[o]) : 1.0;
            if (!(fabs(a[o] - b[o]) <= 1e-12 * s) && !(isnan(a[o]) && isnan(b[o])))
                ok = 0;
        }
    }
    free(in);
    free(work);
    free(a);
    free(b);
    if (!ok) {
        free(c);
        dlclose(dl);
        close(fd);
        return NULL;
    }
    atomic_init(&c->refs, 1);
    c->dl = dl;
    c->fd = fd;
    return c;
}

typedef struct native_file {
    char name[256];
    double mtime;
} native_file;

static int native__older(const void *a, const void *b)
{
    double x = ((const native_file *)a)->mtime, y = ((const native_file *)b)->mtime;
    return (x > y) - (x < y);
}

/* Keeps dir within NATIVE_MAX_FILES shared objects (oldest deleted first) and removes
 * temporary files a killed process left more than an hour ago. */
static void native__prune(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    native_file *files = NULL;
    size_t n = 0, cap = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || len >= sizeof files[0].name)
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (!strncmp(e->d_name, ".tmp-", 5)) {
            if (now - st.st_mtime > 3600)
                unlink(path);
            continue;
        }
        if (strcmp(e->d_name + len - 3, ".so") != 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 256;
            native_file *nf = realloc(files, nc * sizeof *nf);
            if (!nf)
                break;
            files = nf;
            cap = nc;
        }
        snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
        files[n++].mtime = (double)st.st_mtime;
    }
    closedir(d);
    if (n > NATIVE_MAX_FILES) {
        qsort(files, n, sizeof *files, native__older);
        for (size_t i = 0; i < n - NATIVE_MAX_FILES * 3 / 4; i++) {
            char path[1400];
            snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
            unlink(path); /* a process that has it loaded keeps its mapping */
            char mac_path[1400];
            native__mac_path(path, mac_path, sizeof mac_path);
            unlink(mac_path);
        }
    }
    free(files);
}

static int native__build(struct engine_model *m, const char *dir)
{
    char *src = native__source(m);
    if (!src)
        return -1;
    unsigned char md[SHA256_BYTES];
    /* the compiler and its flags are part of what the file holds */
    const char *cc = getenv("HAMEL_CC");
    sha256_ctx ctx;
    sha256_init(&ctx);
    sha256_update(&ctx, cc ? cc : "cc", strlen(cc ? cc : "cc"));
    sha256_update(&ctx, "-O2 v1\n", 7);
    sha256_update(&ctx, native__isa(), strlen(native__isa()));
    sha256_update(&ctx, engine_identity(), strlen(engine_identity()));
    sha256_update(&ctx, src, strlen(src));
    sha256_final(&ctx, md);
    const char *id = strchr(m->id, ':');
    id = id ? id + 1 : m->id;
    char so_path[1400], tmp_c[1400], tmp_so[1400];
    snprintf(so_path, sizeof so_path, "%s/%.64s-%02x%02x%02x%02x%02x%02x%02x%02x.so", dir, id, md[0], md[1],
             md[2], md[3], md[4], md[5], md[6], md[7]);
    unsigned char key[NATIVE_KEY_MAX];
    pthread_mutex_lock(&native_lock);
    size_t key_len = native_key_len;
    memcpy(key, native_key, key_len);
    pthread_mutex_unlock(&native_lock);
    native_code *c = NULL;
    size_t len = 0;
    struct stat st;
    if (lstat(so_path, &st) == 0) {
        /* Only what a server holding the key wrote is loaded; anything else under the
         * name (a planted object, a link, a stale or damaged file) is removed and built
         * again. */
        unsigned char *obj = key_len ? native__read_signed(so_path, key, key_len, &len) : NULL;
        if (obj)
            c = native__load(m, obj, len);
        free(obj);
        if (!c) {
            char mac_path[1400];
            native__mac_path(so_path, mac_path, sizeof mac_path);
            unlink(so_path);
            unlink(mac_path);
        }
    }
    if (!c && key_len) {
        unsigned seq = atomic_fetch_add(&native_seq, 1);
        snprintf(tmp_c, sizeof tmp_c, "%s/.tmp-%ld-%u", dir, (long)getpid(), seq);
        snprintf(tmp_so, sizeof tmp_so, "%s/.tmp-%ld-%u.so", dir, (long)getpid(), seq);
        /* The compiler's output is read once; those bytes are signed, renamed into place
         * and loaded (from memory), so a file swapped in meanwhile is never the one run. */
        /* 0600 first: under a umask of 0 the compiler's output would be writable by all */
        unsigned char *obj = native__compile(src, tmp_c, tmp_so) == 0 && chmod(tmp_so, 0600) == 0
                                 ? native__read_private(tmp_so, NATIVE_MAX_OBJECT_BYTES, &len)
                                 : NULL;
        if (obj && native__sign(so_path, key, key_len, obj, len) == 0 && rename(tmp_so, so_path) == 0)
            c = native__load(m, obj, len);
        free(obj);
        unlink(tmp_so);
        if (atomic_fetch_add(&native_builds, 1) % 64 == 0)
            native__prune(dir);
    }
    free(src);
    sha256_wipe(key, sizeof key);
    if (!c)
        return -1;
    native_code *expected = NULL;
    if (!atomic_compare_exchange_strong(&m->native, &expected, c))
        native_release(c);
    return 0;
}

/* ---- the two queues: a pool of one thread each (engine/base/pool.h) ---------------- */

/* The cc builds' pool and the first tier's (libtcc for a model's tapes, on a thread of its
 * own, never behind a cc build): made on first use and taken away by native_shutdown,
 * under native_lock. A queued task holds a reference to its model, released by its done. */
static pool *native_pool, *first_pool;

/* Builds the model arg on the cc pool's thread (nothing once the tier stops). */
static void native__build_run(void *arg)
{
    struct engine_model *m = arg;
    /* Linux: the nice value is per thread, and the compiler inherits it */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    char dir[sizeof native_dir];
    pthread_mutex_lock(&native_lock);
    snprintf(dir, sizeof dir, "%s", native_stopping ? "" : native_dir);
    pthread_mutex_unlock(&native_lock);
    int rc = dir[0] ? native__build(m, dir) : -1;
    atomic_store(&m->native_state, rc == 0 ? NATIVE_READY : NATIVE_FAILED);
}

/* After a build, or for one dropped at shutdown (ran 0: never built), the queue's
 * reference goes. */
static void native__build_done(void *arg, int ran)
{
    struct engine_model *m = arg;
    if (!ran)
        atomic_store(&m->native_state, NATIVE_FAILED);
    engine_model_release(m);
}

static void native__jit_now(struct engine_model *m)
{
    /* tape_obs too: the checks evaluate it at every sample (interpreted, it was most of
     * checks_ms); in the same unit it adds little to libtcc's fixed cost */
    jit_compile_many((tape *[]){m->tape_psi, m->tape_dyn, m->tape_fast, m->tape_det, m->tape_obs}, 5);
    atomic_store(&m->jit_done, 1);
}

static void native__jit_run(void *arg) { native__jit_now(arg); }

/* A dropped first-tier task (ran 0) leaves its model on the interpreter, which gives the
 * same numbers. */
static void native__jit_done(void *arg, int ran)
{
    (void)ran;
    engine_model_release(arg);
}

void native_jit(struct engine_model *m)
{
    int rc = POOL_STOPPING;
    pthread_mutex_lock(&native_lock);
    if (native_dir[0] && !native_stopping) {
        if (!first_pool)
            first_pool = pool_new(1, NATIVE_MAX_QUEUE, 0);
        if (first_pool)
            rc = pool_submit(first_pool, native__jit_run, native__jit_done, engine_model_retain(m));
        if (first_pool && rc != POOL_OK)
            engine_model_release(m); /* the caller's reference remains */
    }
    pthread_mutex_unlock(&native_lock);
    if (rc != POOL_OK) /* no cache (a one-shot run), stopping, full: here and now */
        native__jit_now(m);
}

int native_wait_jit(const struct engine_model *m, double seconds)
{
    double end = native__now() + seconds;
    while (!atomic_load(&((struct engine_model *)m)->jit_done) && native__now() < end) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return atomic_load(&((struct engine_model *)m)->jit_done);
}

void native_shutdown(void)
{
    pthread_mutex_lock(&native_lock);
    native_stopping = 1;
    pool *first = first_pool, *build = native_pool;
    first_pool = native_pool = NULL;
    pthread_mutex_unlock(&native_lock);
    /* The first tier first: its queue is dropped, so that no model is left referenced
     * and shutting down costs at most the one compile in progress. */
    pool_free(first);
    /* A build in progress: stop its compiler (a build that starts now builds nothing);
     * then the queued builds are dropped (NATIVE_FAILED) and the thread is joined. */
    int pid = atomic_load(&native_child);
    if (pid > 0)
        kill((pid_t)pid, SIGKILL);
    pool_free(build);
}

void engine_shutdown(void) { native_shutdown(); }

void native_note_run(const struct engine_model *m, long rhs_evals)
{
    struct engine_model *mm = (struct engine_model *)m; /* only its atomic counters */
    if (!m->tape_fast || atomic_load(&mm->native_state) != NATIVE_NONE)
        return;
    int runs = atomic_fetch_add(&mm->native_runs, 1) + 1;
    long evals = atomic_fetch_add(&mm->native_evals, rhs_evals) + rhs_evals;
    if (runs >= 2 || evals >= NATIVE_HOT_EVALS)
        native_schedule(mm);
}

void native_schedule(struct engine_model *m)
{
    if (!m->tape_fast || m->tape_fast->n_ins > NATIVE_MAX_INS || native__disabled())
        return;
    int rc = POOL_STOPPING;
    pthread_mutex_lock(&native_lock);
    if (native_dir[0] && !native_stopping && !native_pool) /* 8 MiB: generation, tape_eval checks */
        native_pool = pool_new(1, NATIVE_MAX_QUEUE, (size_t)8 << 20);
    int none = NATIVE_NONE;
    if (native_pool && native_dir[0] && !native_stopping &&
        atomic_compare_exchange_strong(&m->native_state, &none, NATIVE_QUEUED)) {
        rc = pool_submit(native_pool, native__build_run, native__build_done, engine_model_retain(m));
        if (rc != POOL_OK) { /* full, or no thread: not queued, a later run may try again */
            atomic_store(&m->native_state, NATIVE_NONE);
            engine_model_release(m); /* the caller's reference remains */
        }
    }
    pthread_mutex_unlock(&native_lock);
}

native_code *native_acquire(const struct engine_model *m, const double *params)
{
    if (atomic_load(&m->native_state) != NATIVE_READY)
        return NULL;
    native_code *c = atomic_load(&((struct engine_model *)m)->native);
    if (!c)
        return NULL;
    if (m->np && memcmp(params, m->param_values, (size_t)m->np * sizeof *params) != 0)
        return NULL;
    /* m holds a reference until it is freed, and the caller holds m: c is alive */
    atomic_fetch_add(&c->refs, 1);
    return c;
}

void native_release(native_code *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    dlclose(c->dl);
    close(c->fd); /* after dlclose: the name /proc/self/fd/N is free again only now */
    free(c);
}

int native_wait(const struct engine_model *m, double seconds)
{
    double end = native__now() + seconds;
    for (;;) {
        int s = atomic_load(&m->native_state);
        if (s != NATIVE_QUEUED || native__now() > end)
            return s;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}
