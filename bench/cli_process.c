/* cli_process.c — `hamel run CASE` as a whole process against the hand-written C process
 * (bench/hand_disk.c) on the same case, interleaved (issue 19, item 3): wall time of
 * fork + exec + wait, and the child's CPU time (user + system, from wait4), standard
 * output and error to /dev/null, RUNS pairs run back to back. Prints each side's median
 * and fastest, the median of the pairs' ratios (the judged figure; goal <= 2) with its
 * quartiles, the same for CPU time, the load average before and after, and the median of
 * the runs' own stats.compile_ms (read from RUNS more runs into a temporary file).
 * With BEFORE (another hamel, e.g. one built from main), it runs third in each round and
 * its ratios are printed beside.
 *
 * Usage: bench-cli_process HAND HAMEL CASE [RUNS [BEFORE]]   (exit 1: the goal is missed)
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

/* Runs argv with standard output to `out` (a path); returns the wall ms, or -1, and the
 * child's CPU ms in *cpu when cpu is not NULL. */
static double cli_time(char *const argv[], const char *out, double *cpu)
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
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    double wall = cli_now_ms() - t0;
    if (cpu)
        *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
    return wall;
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

/* The median of the ratios a[i] / b[i] and its quartiles, printed as one row. */
static double cli_ratio_row(const char *what, const double *a, const double *b, int n, double goal)
{
    static double r[CLI_MAX_RUNS];
    for (int i = 0; i < n; i++)
        r[i] = a[i] / b[i];
    double med = cli_median(r, n); /* sorts r */
    printf("%-52s %10.2f   (quartiles %.2f-%.2f)", what, med, r[n / 4], r[(3 * n) / 4]);
    if (goal > 0)
        printf("   <= %.1f (%s)", goal, med <= goal ? "met" : "MISSED");
    putchar('\n');
    return med;
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
        fprintf(stderr, "usage: bench-cli_process HAND HAMEL CASE [RUNS [BEFORE]]\n");
        return 2;
    }
    int runs = argc > 4 ? atoi(argv[4]) : 50;
    runs = runs < 1 ? 1 : (runs > CLI_MAX_RUNS ? CLI_MAX_RUNS : runs);
    const char *before = argc > 5 && argv[5][0] ? argv[5] : NULL;
    char *hand[] = {argv[1], argv[3], NULL};
    char *hamel[] = {argv[2], "run", argv[3], NULL};
    char *old[] = {(char *)before, "run", argv[3], NULL};
    static double th[CLI_MAX_RUNS], tc[CLI_MAX_RUNS], tb[CLI_MAX_RUNS], cm[CLI_MAX_RUNS];
    static double ch[CLI_MAX_RUNS], cc[CLI_MAX_RUNS], cb[CLI_MAX_RUNS];
    char tmp[] = "/tmp/hamel-bench-cli-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) {
        perror("mkstemp");
        return 2;
    }
    close(fd);
    cli_load("before");
    /* one warm-up each: the page cache holds both programs and their libraries */
    if (cli_time(hand, "/dev/null", NULL) < 0 || cli_time(hamel, "/dev/null", NULL) < 0 ||
        (before && cli_time(old, "/dev/null", NULL) < 0)) {
        fprintf(stderr, "bench-cli_process: a program failed\n");
        unlink(tmp);
        return 2;
    }
    for (int i = 0; i < runs; i++) {
        th[i] = cli_time(hand, "/dev/null", &ch[i]);
        tc[i] = cli_time(hamel, "/dev/null", &cc[i]);
        if (before)
            tb[i] = cli_time(old, "/dev/null", &cb[i]);
    }
    int ncm = 0;
    for (int i = 0; i < runs; i++) {
        if (cli_time(hamel, tmp, NULL) < 0)
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
    double ratio =
        cli_ratio_row("one-shot CLI, hamel run / hand C process (pairs)", tc, th, runs, CLI_GOAL_RATIO);
    cli_ratio_row("the same in CPU time (user + system)", cc, ch, runs, 0);
    if (before) {
        cli_ratio_row("BEFORE hamel run / hand C process (pairs)", tb, th, runs, 0);
        cli_ratio_row("BEFORE, the same in CPU time", cb, ch, runs, 0);
    }
    /* medians first: each sorts its array, whose [0] is then the fastest */
    double mh = cli_median(th, runs), mc = cli_median(tc, runs), mb = before ? cli_median(tb, runs) : 0;
    double mch = cli_median(ch, runs), mcc = cli_median(cc, runs), mcb = before ? cli_median(cb, runs) : 0;
    printf("hand-written C process (bench/hand_disk.c), median of %d: %.2f ms (fastest %.2f), CPU %.2f ms\n",
           runs, mh, th[0], mch);
    printf("hamel run, median of %d:                               %.2f ms (fastest %.2f), CPU %.2f ms\n",
           runs, mc, tc[0], mcc);
    if (before)
        printf("BEFORE hamel run, median of %d:                        %.2f ms (fastest %.2f), CPU %.2f ms\n",
               runs, mb, tb[0], mcb);
    if (ncm > 0) {
        double mcm = cli_median(cm, ncm);
        printf("hamel run stats.compile_ms, median of %d:              %.3f ms (quartiles %.3f-%.3f)\n", ncm,
               mcm, cm[ncm / 4], cm[(3 * ncm) / 4]);
    }
    return ratio <= CLI_GOAL_RATIO ? 0 : 1;
}
