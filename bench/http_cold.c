/* http_cold.c — cold simulations over HTTP against a running hamel-server (issue 8,
 * item 5): N POST /v1/simulations?wait=30 requests of the rolling disk, 1001 samples,
 * each one new to the server (distinct models: the mass parameter differs, so each
 * request compiles its model; or, with BENCH_SAME_MODEL=1, one model and distinct
 * initial speeds), one connection per request on loopback, one at a time. Prints the
 * median, 10th and 90th percentiles of the whole request (connect to last byte).
 *
 * Usage: http_cold PORT [N]   (HAMEL_CASES_DIR as for the other benchmarks)
 * With BENCH_PORT_B set, requests alternate between PORT and that second server (say, an
 * older build), so that both see the same machine load, and both are reported.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

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
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "POST /v1/simulations?wait=30 HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                      "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                      blen);
    if (write(fd, head, (size_t)hl) != hl || write(fd, body, blen) != (ssize_t)blen) {
        close(fd);
        return 0;
    }
    static char buf[1 << 20];
    size_t total = 0;
    int status = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        if (total == 0 && n > 12)
            status = atoi(buf + 9);
        total += (size_t)n;
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
    unsigned seed = (unsigned)time(NULL);
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
    free(ms);
    free(ms_b);
    json_decref(c);
    return 0;
}
