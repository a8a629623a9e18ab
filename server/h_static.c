/* h_static.c — the static web front end: GET of any path outside /v1 (HAMEL_STATIC).
 *
 * Owns the file answer: a regular file under HAMEL_STATIC ("/" is index.html), sent from
 * its descriptor with a Content-Type by extension and an ETag made of its size, inode and
 * modification time (a 304 to a matching If-None-Match); ".." and any file whose resolved path
 * leaves the directory (a symbolic link out) are 404. Without HAMEL_STATIC, "/" lists the
 * endpoints. (open and fstat of a local file are the one file-system touch on a poll
 * thread: a page cache lookup, bounded, as MHD's own sendfile is.)
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http_conn.h"

static const char *http__mime(const char *path)
{
    static const char *const map[][2] = {
        {".html", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".wasm", "application/wasm"},
        {".map", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof map / sizeof map[0]; i++)
        if (!strcasecmp(dot, map[i][0]))
            return map[i][1];
    return "application/octet-stream";
}

/* Whether the file open on fd lies under directory root once every symbolic link is
 * resolved: the path the kernel opened (/proc/self/fd) against realpath(root). Checking
 * the opened file, not the name, leaves no window for a link swapped in between. */
static int http__inside(const char *root, int fd)
{
    char base[PATH_MAX], link[64], got[PATH_MAX];
    if (!realpath(root, base))
        return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, got, sizeof got - 1);
    if (n <= 0)
        return 0;
    got[n] = '\0';
    size_t b = strlen(base);
    if (b == 1) /* root is "/" */
        return 1;
    return strncmp(got, base, b) == 0 && got[b] == '/';
}

enum MHD_Result http__static(http_conn *c)
{
    const char *url = c->url;
    const char *root = c->srv->d.cfg->statics;
    if (!root[0]) {
        if (!strcmp(url, "/"))
            return http__json(c, 200,
                              json_pack("{s:s, s:s, s:[s,s,s,s,s,s,s,s]}", "service", "hamel", "version",
                                        ENGINE_VERSION, "endpoints", "/v1/health", "/v1/models", "/v1/hamel",
                                        "/v1/simulations", "/v1/jobs/{id}", "/v1/batches", "/metrics",
                                        "/readyz"));
        return http__error(c, HAMEL_E_NOT_FOUND, NULL);
    }
    char rel[CONFIG_PATH_MAX];
    const char *u = !strcmp(url, "/") ? "/index.html" : url;
    if (strstr(u, "..") || strlen(u) >= sizeof rel)
        return http__error(c, HAMEL_E_NOT_FOUND, NULL);
    snprintf(rel, sizeof rel, "%s", u);
    char full[2 * CONFIG_PATH_MAX + 2];
    snprintf(full, sizeof full, "%s%s", root, rel);
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && !http__inside(root, fd)) { /* a symbolic link out of HAMEL_STATIC */
        close(fd);
        fd = -1;
    }
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return http__error(c, HAMEL_E_NOT_FOUND, NULL);
    }
    /* What changes when the file is replaced or rewritten: its size, inode and mtime. */
    char etag[96];
    snprintf(etag, sizeof etag, "\"%llx-%llx-%llx.%09ld\"", (unsigned long long)st.st_size,
             (unsigned long long)st.st_ino, (unsigned long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
    if (http__not_modified_since(c, etag)) {
        close(fd);
        return http__not_modified(c, etag, NULL, NULL);
    }
    struct MHD_Response *r = MHD_create_response_from_fd((size_t)st.st_size, fd);
    if (!r) {
        close(fd);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
    return http__send(c, 200, r, http__mime(rel), (size_t)st.st_size);
}
