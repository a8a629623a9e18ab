/* cli_process.c — `hamel run CASE` as a whole process against the hand-written C process
 * (bench/hand_disk.c) on the same case, interleaved (issue 19, item 3): wall time of
 * fork + exec + wait, standard output and error to /dev/null, RUNS pairs run back to
 * back. Prints each side's median and fastest, the median of the pairs' ratios (the
 * judged figure; goal <= 2), the load average before and after, and the median of the
 * runs' own stats.compile_ms (read from RUNS more runs into a temporary file).
 *
 * Usage: bench-cli_process HAND HAMEL CASE [RUNS]   (exit 1 when the goal is missed)
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_MAX_RUNS 1000
#define CLI_GOAL_RATIO 2.0

static double cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Runs argv with standard output to `out` (a path); returns the wall ms, or -1. */
static double cli_time(char *const argv[], const char *out)
{
    double t0 = cli_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nul = open("/dev/null", O_WRONLY);
        if (fd >= 0)
            dup2(fd, STDOUT_FILENO);
        if (nul >= 0)
            dup2(nul, STDERR_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
        if (nul > STDERR_FILENO)
            close(nul);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return cli_now_ms() - t0;
}

static int cli_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cli_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cli_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void cli_load(const char *when)
{
    char buf[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f))
            snprintf(buf, sizeof buf, "?\n");
        fclose(f);
    }
    printf("load average %s: %s", when, buf);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench-cli_process HAND HAMEL CASE [RUNS]\n");
        return 2;
    }
    int runs = argc > 4 ? atoi(argv[4]) : 50;
    runs = runs < 1 ? 1 : (runs > CLI_MAX_RUNS ? CLI_MAX_RUNS : runs);
    char *hand[] = {argv[1], argv[3], NULL};
    char *hamel[] = {argv[2], "run", argv[3], NULL};
    static double th[CLI_MAX_RUNS], tc[CLI_MAX_RUNS], cm[CLI_MAX_RUNS];
    char tmp[] = "/tmp/hamel-bench-cli-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
        perror("mkstemp");
        return 2;
    }
    close(fd);
    cli_load("before");
    /* one warm-up each: the page cache holds both programs and their libraries */
    if (cli_time(hand, "/dev/null") < 0 || cli_time(hamel, "/dev/null") < 0) {
        fprintf(stderr, "bench-cli_process: a program failed\n");
        unlink(tmp);
        return 2;
    }
    for (int i = 0; i < runs; i++) {
        th[i] = cli_time(hand, "/dev/null");
        tc[i] = cli_time(hamel, "/dev/null");
    }
    int ncm = 0;
    for (int i = 0; i < runs; i++) {
        if (cli_time(hamel, tmp) < 0)
            continue;
        json_t *r = json_load_file(tmp, 0, NULL);
        json_t *c = json_object_get(json_object_get(r, "stats"), "compile_ms");
        if (json_is_number(c))
            cm[ncm++] = json_number_value(c);
        json_decref(r);
    }
    unlink(tmp);
    cli_load("after");
    /* each pair ran back to back under the same load: the median of the pairs' ratios is
     * the judged figure (the medians of each side move with the machine's load) */
    static double pr[CLI_MAX_RUNS];
    for (int i = 0; i < runs; i++)
        pr[i] = tc[i] / th[i];
    double ratio = cli_median(pr, runs);
    double mh = cli_median(th, runs), mc = cli_median(tc, runs);
    printf("hand-written C process (bench/hand_disk.c), median of %d: %.2f ms (fastest %.2f)\n", runs, mh,
           th[0]);
    printf("hamel run, median of %d:                               %.2f ms (fastest %.2f)\n", runs, mc,
           tc[0]);
    if (ncm > 0)
        printf("hamel run stats.compile_ms, median of %d:              %.3f ms\n", ncm, cli_median(cm, ncm));
    printf("%-52s %10.2f   <= %.1f (%s)\n", "one-shot CLI, hamel run / hand C process (pairs)", ratio,
           CLI_GOAL_RATIO, ratio <= CLI_GOAL_RATIO ? "met" : "MISSED");
    return ratio <= CLI_GOAL_RATIO ? 0 : 1;
}
