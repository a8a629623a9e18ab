/* test_client_example.c — clients/c/example.c (build/hamelclient-example, beside the
 * test binary) run against the real server: its simulation, batch, linearization and
 * evaluation answer, and the numbers it prints are the service's (the wobble of the
 * upright disk, the case's initial acceleration). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static harness_server srv;

static void setup(void)
{
    unsetenv("HAMEL_TOKEN");
    unsetenv("HAMEL_URL");
    cr_assert_eq(harness_start(&srv, NULL), 0, "the server did not start (log above)");
}

static void teardown(void) { harness_stop(&srv); }

TestSuite(client_example, .init = setup, .fini = teardown, .timeout = 120);

Test(client_example, simulates_sweeps_linearizes_and_evaluates)
{
    char bin[PATH_MAX], example[PATH_MAX + 32], cs[PATH_MAX], cmd[3 * PATH_MAX];
    /* beside this test binary (build/ or build-san/), whichever server the run uses */
    ssize_t len = readlink("/proc/self/exe", bin, sizeof bin - 1);
    cr_assert(len > 0);
    bin[len] = '\0';
    char *slash = strrchr(bin, '/');
    snprintf(example, sizeof example, "%.*shamelclient-example", slash ? (int)(slash - bin + 1) : 0, bin);
    harness_case_path("greenwood-5.3-rolling-disk.json", cs, sizeof cs);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' 2>/dev/null", example, srv.url, cs);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    static char out[16384];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s exited %d:\n%s", example, WEXITSTATUS(st), out);
    cr_assert(strstr(out, "simulate: done, 11 samples to t = 5,"), "%s", out);
    cr_assert(strstr(out, "batch: done, 3 runs"), "%s", out);
    cr_assert(strstr(out, "run 2: done"), "%s", out);
    /* the upright disk spinning at Omega = 4: a pair 0 +- 4.76487i (the wobble) */
    cr_assert(strstr(out, "linearize: 8 eigenvalues:") && strstr(out, "+4.76487i") &&
                  strstr(out, "-4.76487i"),
              "%s", out);
    /* the case's initial state: thd' = -7.120569 (api/examples/evaluate.200.json) */
    cr_assert(strstr(out, "evaluate: thd' = -7.120569"), "%s", out);
}
