/* test_config.c — the settings table (server/config.c): --help lists every setting, the
 * README's list is the table's, a bad value is refused naming its variable, an empty one
 * keeps the default. The server binary is run for real. */
#include <criterion/criterion.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "config.h"
#include "harness.h"

#define CONFIG_TEST_OUT (256 * 1024)

/* Runs `env... hamel-server args` with stderr into stdout; the output goes to out[cap],
 * the exit status is returned (-1 if it did not exit). */
static int run_server(const char *env, const char *args, char *out, size_t cap)
{
    char bin[PATH_MAX], cmd[PATH_MAX + 512];
    harness_server_bin(bin, sizeof bin);
    snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, bin, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "popen %s", cmd);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(config, help_lists_every_setting)
{
    static char out[CONFIG_TEST_OUT];
    cr_assert_eq(run_server("", "--help", out, sizeof out), 0, "--help exits 0: %s", out);
    /* Every setting the server had before the table, by name: dropping one fails here. */
    static const char *const known[] = {
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
        "HAMEL_CACHE_DIR",
        "HAMEL_NO_NATIVE",
        "HAMEL_CC",
        "HAMEL_NATIVE_KEY_FILE",
        "HAMEL_ISOLATE",
        "HAMEL_WORKER_MEMORY_MB",
        "HAMEL_QUARANTINE_SECONDS",
        "HAMEL_TEST_FAULTS",
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        char line[96];
        snprintf(line, sizeof line, "  %s\n", known[i]);
        char line2[96];
        snprintf(line2, sizeof line2, "  %s,", known[i]);
        cr_expect(strstr(out, line) || strstr(out, line2), "--help lists %s", known[i]);
    }
    for (size_t i = 0; i < config_n_settings; i++) {
        const config_setting *row = &config_settings[i];
        cr_expect(strstr(out, row->env) != NULL, "--help lists %s", row->env);
        cr_expect(row->help && *row->help, "%s has a help text", row->env);
        char flag[96];
        snprintf(flag, sizeof flag, "--%s", row->name);
        cr_expect(!row->has_flag || strstr(out, flag), "--help shows %s", flag);
    }
}

Test(config, readme_list_is_the_table)
{
    static char out[CONFIG_TEST_OUT], readme[1 << 20];
    cr_assert_eq(run_server("", "--help-markdown", out, sizeof out), 0);
    char bin[PATH_MAX], path[PATH_MAX + 32];
    harness_server_bin(bin, sizeof bin);
    snprintf(path, sizeof path, "%s/../README.md", dirname(bin));
    FILE *f = fopen(path, "r");
    if (!f)
        f = fopen("README.md", "r");
    cr_assert(f != NULL, "README.md beside the build directory (%s)", path);
    size_t n = fread(readme, 1, sizeof readme - 1, f);
    readme[n] = '\0';
    fclose(f);
    const char *a = strstr(readme, "<!-- settings:");
    const char *b = a ? strstr(a, "<!-- end of settings -->") : NULL;
    cr_assert(a && b, "README has the generated settings section");
    a = strchr(a, '\n') + 1;
    cr_expect(strlen(out) == (size_t)(b - a) && !strncmp(a, out, (size_t)(b - a)),
              "README's settings list equals build/hamel-server --help-markdown (regenerate it: "
              "scripts/settings-readme.sh)");
}

Test(config, bad_value_is_refused_naming_the_variable)
{
    static char out[4096];
    cr_expect_eq(run_server("HAMEL_MAX_BODY=12x", "", out, sizeof out), 2);
    cr_expect(strstr(out, "HAMEL_MAX_BODY=12x") != NULL, "names the variable: %s", out);
    cr_expect_eq(run_server("HAMEL_REDIS_LEASE=0.1", "", out, sizeof out), 2);
    cr_expect(strstr(out, "HAMEL_REDIS_LEASE=0.1: at least 0.3 seconds") != NULL, "%s", out);
    cr_expect_eq(run_server("", "--max-body 5", out, sizeof out), 2);
    cr_expect(strstr(out, "HAMEL_MAX_BODY=5: expected an integer in [1024, 1073741824]") != NULL,
              "a flag's bad value names its variable: %s", out);
    cr_expect_eq(run_server("", "--no-such-setting 1", out, sizeof out), 2);
}

Test(config, empty_value_keeps_the_default)
{
    harness_server s;
    const char *const env[] = {
        "HAMEL_QUEUE=", "HAMEL_MAX_BODY=", "HAMEL_HEAD_SECONDS=", "HAMEL_CACHE_DIR=", NULL};
    cr_assert_eq(harness_start(&s, env), 0, "empty numeric variables keep their defaults");
    harness_resp r = {0};
    cr_expect_eq(harness_request(&s, "GET", "/livez", NULL, NULL, &r), CURLE_OK);
    cr_expect_eq(r.status, 200);
    harness_resp_free(&r);
    harness_stop(&s);
}
