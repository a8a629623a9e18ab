/* client_harness.h — starts the real hamel-server for the client tests.
 *
 * harness_start forks build/hamel-server (the hamel-server beside the running test
 * binary, so build-san/ tests run build-san/ servers; $HAMEL_SERVER_BIN overrides) with
 * HAMEL_PORT=0 and a fresh temporary HAMEL_DATA, its output going to server.log in the
 * same temporary directory, and waits for its "listening on http://127.0.0.1:PORT"
 * line. harness_stop sends SIGTERM (SIGKILL after a grace period), reaps it and removes
 * the directory. The server dies with the test process (PR_SET_PDEATHSIG), so a crashed
 * or timed-out test leaves no daemon behind.
 *
 * Header-only (static functions) so a test file includes it and nothing else links it.
 */
#ifndef HAMEL_TESTS_CLIENT_HARNESS_H
#define HAMEL_TESTS_CLIENT_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HARNESS_START_SECONDS 20.0 /* longest wait for the listening line */
#define HARNESS_STOP_SECONDS 10.0  /* SIGTERM grace before SIGKILL */
#define HARNESS_MAX_ENV 8
#define HARNESS_DIR_MAX 1024 /* directory paths, short enough to append file names */

typedef struct harness_server {
    pid_t pid;
    int port;
    char url[64];
    char dir[HARNESS_DIR_MAX]; /* temporary directory: data/ and server.log */
    char data[PATH_MAX];       /* HAMEL_DATA */
    char log[PATH_MAX];        /* the server's stdout and stderr */
} harness_server;

static double harness__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void harness__nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The directory of the running executable (e.g. /repo/build), into buf[size]. */
static int harness__exe_dir(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    return 0;
}

/* The path of the server binary to run, into buf[size]. */
static void harness_server_bin(char *buf, size_t size)
{
    const char *env = getenv("HAMEL_SERVER_BIN");
    char dir[HARNESS_DIR_MAX];
    if (env != NULL && env[0] != '\0')
        snprintf(buf, size, "%s", env);
    else if (harness__exe_dir(dir, sizeof dir) == 0)
        snprintf(buf, size, "%s/hamel-server", dir);
    else
        snprintf(buf, size, "build/hamel-server");
}

/* The path of a shared case file (../shared/cases/NAME from the repository root, found
 * from the test binary's build directory, else from the working directory). */
static void harness_case_path(const char *name, char *buf, size_t size)
{
    char dir[HARNESS_DIR_MAX];
    if (harness__exe_dir(dir, sizeof dir) == 0) {
        snprintf(buf, size, "%s/../../shared/cases/%s", dir, name);
        if (access(buf, R_OK) == 0)
            return;
    }
    snprintf(buf, size, "../shared/cases/%s", name);
}

/* Scans the log for the listening line; returns the port or 0. */
static int harness__port_from_log(const char *log)
{
    FILE *f = fopen(log, "r");
    if (f == NULL)
        return 0;
    char line[512];
    int port = 0;
    while (port == 0 && fgets(line, sizeof line, f) != NULL) {
        const char *p = strstr(line, "listening on http://127.0.0.1:");
        if (p != NULL)
            port = atoi(p + strlen("listening on http://127.0.0.1:"));
    }
    fclose(f);
    return port;
}

/* Starts a server. `env` is a NULL-terminated list of extra "NAME=value" settings (or
 * NULL). Returns 0 with *s filled, or -1 (with the log printed to stderr). */
static int harness_start(harness_server *s, const char *const *env)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s/hamel-client-test.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(s->dir) == NULL) {
        perror("harness: mkdtemp");
        return -1;
    }
    snprintf(s->data, sizeof s->data, "%s/data", s->dir);
    snprintf(s->log, sizeof s->log, "%s/server.log", s->dir);
    if (mkdir(s->data, 0700) != 0) {
        perror("harness: mkdir");
        return -1;
    }
    char bin[PATH_MAX];
    harness_server_bin(bin, sizeof bin);
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "harness: no server binary at %s\n", bin);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("harness: fork");
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        setenv("HAMEL_PORT", "0", 1);
        setenv("HAMEL_ADDR", "127.0.0.1", 1);
        setenv("HAMEL_DATA", s->data, 1);
        unsetenv("HAMEL_TOKEN");
        for (int i = 0; env != NULL && env[i] != NULL && i < HARNESS_MAX_ENV; i++)
            putenv((char *)env[i]);
        execl(bin, bin, (char *)NULL);
        perror("harness: exec");
        _exit(127);
    }
    s->pid = pid;
    double deadline = harness__now() + HARNESS_START_SECONDS;
    while (harness__now() < deadline) {
        s->port = harness__port_from_log(s->log);
        if (s->port > 0)
            break;
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->pid = 0;
            break;
        }
        harness__nap(10);
    }
    if (s->port <= 0) {
        fprintf(stderr, "harness: %s did not start; its log:\n", bin);
        FILE *f = fopen(s->log, "r");
        char line[512];
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            fputs(line, stderr);
        if (f != NULL)
            fclose(f);
        return -1;
    }
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    return 0;
}

static int harness__rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Stops the server (if running), reaps it and removes its directory. Safe to call on
 * a harness_server that failed to start or was already stopped. */
static void harness_stop(harness_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        double deadline = harness__now() + HARNESS_STOP_SECONDS;
        int status;
        while (waitpid(s->pid, &status, WNOHANG) == 0) {
            if (harness__now() > deadline) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, &status, 0);
                break;
            }
            harness__nap(10);
        }
        s->pid = 0;
    }
    if (s->dir[0] != '\0' && getenv("HAMEL_KEEP_TEST_DIRS") == NULL)
        nftw(s->dir, harness__rm, 16, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
}

#endif
