/* test_helpers.c — the server's shared helpers, without a daemon: waiter lists
 * (waiters.h), the growable buffer (dynbuf.h), ids (ids.h) and blobs (blob.h).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "dynbuf.h"
#include "ids.h"
#include "waiters.h"

static void count_wake(void *arg) { (*(int *)arg)++; }

Test(helpers, waiters_expire_detach_on_and_fire)
{
    int woken[4] = {0};
    waiter w[4];
    waiter *head = NULL;
    const double deadlines[4] = {5.0, 0.0, 2.0, 9.0}; /* 0: none */
    int target_a, target_b;
    for (int i = 0; i < 4; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].wake = count_wake;
        w[i].arg = &woken[i];
        w[i].deadline = deadlines[i];
        w[i].on = i % 2 ? (void *)&target_b : (void *)&target_a;
        waiters_add(&head, &w[i]);
        cr_assert(w[i].armed);
    }
    waiter *fired = NULL;
    double next = waiters_expire(&head, 3.0, &fired); /* only w[2] (2.0) is due */
    cr_assert_float_eq(next, 5.0, 1e-12, "the earliest deadline left is 5, got %g", next);
    cr_assert(fired == &w[2] && !w[2].armed);
    waiters_fire(fired);
    cr_assert_eq(woken[2], 1);
    fired = NULL;
    waiters_detach_on(&head, &target_b, &fired); /* w[1] and w[3] */
    waiters_fire(fired);
    cr_assert(woken[1] == 1 && woken[3] == 1 && woken[0] == 0, "only target b's waiters woke");
    cr_assert(head == &w[0] && !w[0].next && !w[0].prev, "w[0] alone is left");
    cr_assert_float_eq(waiters_expire(&head, 3.0, &fired), 5.0, 1e-12);
    waiters_remove(&head, &w[0]);
    cr_assert(!head && !w[0].armed);
    cr_assert_eq(waiters_expire(&head, 100.0, &fired), 0.0, "an empty list has no deadline");
}

Test(helpers, dynbuf_grows_to_its_maximum_and_fails_sticky)
{
    dynbuf b;
    dynbuf_init(&b, 4, 64);
    char chunk[10];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 6; i++)
        cr_assert_eq(dynbuf_add(&b, chunk, sizeof chunk), 0, "write %d of 10 bytes", i);
    cr_assert_eq(b.len, 60u);
    cr_assert(b.cap <= 64u, "never past the maximum: cap %zu", b.cap);
    cr_assert_eq(dynbuf_add(&b, chunk, sizeof chunk), -1, "70 bytes do not fit in 64");
    cr_assert(b.failed);
    cr_assert_eq(dynbuf_add(&b, chunk, 1), -1, "a failure is sticky");
    dynbuf_free(&b);
    cr_assert(!b.s && b.len == 0 && !b.failed);
    cr_assert_eq(dynbuf_printf(&b, "%s=%d;", "abc", 12345), 0);
    cr_assert_eq(dynbuf_printf(&b, "%s", "tail"), 0);
    cr_assert_str_eq(b.s, "abc=12345;tail");
    dynbuf_free(&b);
}

Test(helpers, ids_random_hex_and_hash)
{
    char a[33], b[33];
    ids_random(a, 32);
    ids_random(b, 32);
    cr_assert_eq(strlen(a), 32u);
    cr_assert_eq(strspn(a, "0123456789abcdef"), 32u, "lowercase hex: %s", a);
    cr_assert_str_neq(a, b, "two random ids differ");
    unsigned char d[3] = {0x00, 0xab, 0xff};
    char hex[7];
    ids_hex(d, 3, hex);
    cr_assert_str_eq(hex, "00abff");
    cr_assert_eq(ids_hash(""), 1469598103934665603ull, "FNV-1a of nothing is its offset basis");
    cr_assert_neq(ids_hash("job-a"), ids_hash("job-b"));
}

Test(helpers, blob_take_adopts_the_text)
{
    /* blob_take_len keeps the malloc'd text itself (a result of a few hundred KB is
     * not copied); blob_new copies; both end in a NUL and free everything on release */
    size_t n = 300000;
    char *text = malloc(n + 1);
    cr_assert_not_null(text);
    memset(text, 'x', n);
    text[n] = 0;
    blob *b = blob_take_len(text, n);
    cr_assert_not_null(b);
    cr_expect_eq(b->data, text, "adopted, not copied");
    cr_expect_eq(b->len, n);
    cr_expect_eq(b->data[n], 0);
    blob_retain(b);
    blob_release(b);
    cr_expect_eq(b->data[0], 'x', "alive while a reference is left");
    blob_release(b);
    char *s = strdup("{\"a\":1}");
    blob *t = blob_take(s);
    cr_assert_not_null(t);
    cr_expect_eq(t->data, s);
    cr_expect_eq(t->len, 7u);
    blob_release(t);
    blob *c = blob_new("abc", 3);
    cr_assert_not_null(c);
    cr_expect_str_eq(c->data, "abc");
    cr_expect_eq(c->len, 3u);
    blob_release(c);
    cr_expect_null(blob_take(NULL));
    cr_expect_null(blob_take_len(NULL, 0));
}
