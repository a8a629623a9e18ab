/* http_cold.c — cold simulations over HTTP against a running hamel-server (issue 8,
 * item 5): N POST /v1/simulations?wait=30 requests of the rolling disk, 1001 samples,
 * each one new to the server (distinct models: the mass parameter differs, so each
 * request compiles its model; or, with BENCH_SAME_MODEL=1, one model and distinct
 * initial speeds), one connection per request on loopback, one at a time. Prints the
 * median, 10th and 90th percentiles of the whole request (connect to the body's last
 * byte).
 *
 * Usage: http_cold PORT [N [TARGET_MS]]   (HAMEL_CASES_DIR as for the other benchmarks)
 * With TARGET_MS, a goal line (median <= TARGET_MS: met/MISSED) follows, and the exit
 * status is 1 when it is missed (scripts/bench-http-cold.sh; issue 8: 5 ms).
 * With BENCH_PORT_B set, requests alternate between PORT and that second server (say, an
 * older build), so that both see the same machine load, and both are reported.
 * BENCH_SEED (default: the time) picks the models: clients run side by side with
 * different seeds send distinct models.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

/* One request; returns the HTTP status (0 on a transport error) and the body size. */
static int post(int port, const char *body, size_t blen, size_t *got)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return 0;
    }
    /* head and body in one write, as curl sends a small request: two segments would
     * make the timing depend on how the server reads them */
    char *msg = malloc(blen + 256);
    int hl = msg ? snprintf(msg, 256,
                            "POST /v1/simulations?wait=30 HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                            "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                            blen)
                 : -1;
    if (hl < 0 || hl >= 256) {
        free(msg);
        close(fd);
        return 0;
    }
    memcpy(msg + hl, body, blen);
    ssize_t w = write(fd, msg, (size_t)hl + blen);
    free(msg);
    if (w != (ssize_t)((size_t)hl + blen)) {
        close(fd);
        return 0;
    }
    /* the request ends with the last byte of the body (Content-Length), as a keep-alive
     * client sees it; waiting for the server's close would add how long the server takes
     * to close a "Connection: close" socket (about 45 ms on main as of 2026-11-26) */
    static char buf[1 << 20];
    char head_buf[8192];
    size_t total = 0, head_len = 0, want = 0;
    int status = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        if (want == 0 && total < sizeof head_buf - 1) {
            size_t c = (size_t)n < sizeof head_buf - 1 - total ? (size_t)n : sizeof head_buf - 1 - total;
            memcpy(head_buf + total, buf, c);
            head_buf[total + c] = 0;
            char *end = strstr(head_buf, "\r\n\r\n");
            if (end) {
                head_len = (size_t)(end - head_buf) + 4;
                status = atoi(head_buf + 9);
                for (char *h = head_buf; h && h < end; h = strstr(h, "\r\n"), h = h ? h + 2 : NULL)
                    if (strncasecmp(h, "Content-Length:", 15) == 0)
                        want = head_len + strtoul(h + 15, NULL, 10);
            }
        }
        total += (size_t)n;
        if (want > 0 && total >= want)
            break;
    }
    close(fd);
    *got = total;
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: http_cold PORT [N]\n");
        return 2;
    }
    int port = atoi(argv[1]), n = argc > 2 ? atoi(argv[2]) : 200;
    double target_ms = argc > 3 ? atof(argv[3]) : 0;
    int same = getenv("BENCH_SAME_MODEL") && atoi(getenv("BENCH_SAME_MODEL"));
    const char *dir = getenv("HAMEL_CASES_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/greenwood-5.3-rolling-disk.json", dir && *dir ? dir : "../shared/cases");
    json_t *c = json_load_file(path, 0, NULL);
    if (!c || n < 1 || n > 100000) {
        fprintf(stderr, "http_cold: cannot load %s\n", path);
        return 2;
    }
    const char *pb = getenv("BENCH_PORT_B");
    int port_b = pb ? atoi(pb) : 0;
    double *ms = calloc((size_t)n, sizeof *ms), *ms_b = calloc((size_t)n, sizeof *ms_b);
    const char *sd = getenv("BENCH_SEED");
    unsigned seed = sd ? (unsigned)strtoul(sd, NULL, 10) : (unsigned)time(NULL);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        json_t *req = json_deep_copy(json_object_get(c, "simulation"));
        json_t *model = json_deep_copy(json_object_get(c, "model"));
        double salt = (double)(seed % 100000) * 1e-7 + i * 1e-9;
        if (same)
            json_object_set_new(json_object_get(json_object_get(req, "initial"), "speeds"), "wd",
                                json_real(0.3 + salt));
        else
            json_object_set_new(json_object_get(model, "parameters"), "m", json_real(1.0 + salt));
        json_object_set_new(req, "model", model);
        json_object_set_new(req, "t_end", json_real(10.0));
        json_object_set_new(req, "output", json_pack("{s:i}", "samples", 1001));
        json_object_set_new(req, "hamel", json_string("none"));
        char *body = json_dumps(req, JSON_COMPACT);
        double t0 = now_ms();
        int st = post(port, body, strlen(body), &bytes);
        ms[i] = now_ms() - t0;
        if (st != 200) {
            fprintf(stderr, "request %d: status %d\n", i, st);
            return 1;
        }
        if (port_b) {
            size_t bytes_b = 0;
            t0 = now_ms();
            st = post(port_b, body, strlen(body), &bytes_b);
            ms_b[i] = now_ms() - t0;
            if (st != 200) {
                fprintf(stderr, "request %d (port %d): status %d\n", i, port_b, st);
                return 1;
            }
        }
        free(body);
        json_decref(req);
    }
    qsort(ms, (size_t)n, sizeof *ms, cmp_double);
    printf("%d cold requests (%s), 1001 samples, response %zu bytes: median %.2f ms, p10 %.2f, p90 %.2f\n", n,
           same ? "one model, distinct requests" : "distinct models", bytes, ms[n / 2], ms[n / 10],
           ms[n * 9 / 10]);
    if (port_b) {
        qsort(ms_b, (size_t)n, sizeof *ms_b, cmp_double);
        printf("  port %d, alternating: median %.2f ms, p10 %.2f, p90 %.2f\n", port_b, ms_b[n / 2],
               ms_b[n / 10], ms_b[n * 9 / 10]);
    }
    int missed = 0;
    if (target_ms > 0) {
        missed = !(ms[n / 2] <= target_ms);
        printf("%-52s %10.2f   <= %g ms (%s)\n", "cold request over HTTP, median (ms)", ms[n / 2], target_ms,
               missed ? "MISSED" : "met");
    }
    free(ms);
    free(ms_b);
    json_decref(c);
    return missed;
}
