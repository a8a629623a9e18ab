/* hamel-remote.c — `hamel remote ...`: the service from the command line, over
 * libhamelclient and libcurl. A program of its own so that the one-shot `hamel run`
 * does not load libcurl and everything it pulls in (issue 19: the dynamic loader spent a
 * fifth of a local run relocating them); `hamel remote ARGS` execs `hamel-remote ARGS`.
 */
#include "hamelclient.h"

int main(int argc, char **argv) { return hamelclient_remote_main(argc, argv); }
