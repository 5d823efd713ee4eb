// A reproduction of a libzmq 4.3.4 abort that a Handoff broker or node can meet when it stops:
// `Resource temporarily unavailable (src/session_base.cpp:260)`, then SIGABRT on a ZMQbg/IO thread.
//
// A PUB/XPUB that sends multipart messages (a topic frame and an envelope frame, as the bus does)
// to a peer that reads slowly often has a message half taken by its connection's encoder (the
// first frame pulled, the socket buffer full). Closing the socket with linger 0 closes its pipe to
// reads at once; if the connection drops before the pipe has finished closing (the peer closes
// at the same moment), the session's clean_pipes() pulls for the rest of the half-taken message,
// the pipe refuses, and an errno_assert aborts the whole process (libzmq issue #3442, closed as
// stale). With a linger, the pipe stays readable while the linger runs, and a connection that
// drops meanwhile finds the rest: what matters is the linger of the socket that *sends*.
//
//   gcc -O2 -o clean-pipes-abort deploy/libzmq/clean-pipes-abort.c -lzmq -lpthread
//   ./clean-pipes-abort 200 0 0      # rounds, the proxy's linger, the publisher's linger (ms)
//
// Here the publisher (in the same process) sends to the proxy's XSUB, which closes first: with the
// publisher's linger 0 this aborted within 200 rounds in each of two runs (2026-12-02), with 100
// it ran 200 rounds clean in each of two, whatever the proxy's linger. The broker's own case (its
// XPUB closing as a subscriber drops) is tests' `HandoffTestNode broker-stop-race`: with the
// backend's linger 0 it aborted in each of five runs (within 5 to 20 rounds), with 200 ms none in 80.
//
// Found because `handoff-bench adverts --count 50000 --trials 5` aborted so in about one run in six
// (2026-11-27, this project's 2-core VM, libzmq 4.3.4 from Debian 12).

#include <zmq.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int linger_value = 0;
static int publisher_linger = 0;

struct flood { void *ctx; char endpoint[256]; volatile int stop; };

static void *publisher(void *raw) {
    struct flood *f = raw;
    void *pub = zmq_socket(f->ctx, ZMQ_PUB);
    int hwm = 0, linger = publisher_linger;
    zmq_setsockopt(pub, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(pub, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(pub, f->endpoint);
    char body[266];
    memset(body, 7, sizeof body);
    while (!f->stop) {
        zmq_send(pub, "A:org.x", 7, ZMQ_SNDMORE);
        zmq_send(pub, body, sizeof body, 0);
    }
    zmq_close(pub);
    return NULL;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    if (argc > 2) linger_value = atoi(argv[2]);
    if (argc > 3) publisher_linger = atoi(argv[3]);
    for (int round = 0; round < rounds; round++) {
        void *ctx = zmq_ctx_new();
        void *xsub = zmq_socket(ctx, ZMQ_XSUB), *xpub = zmq_socket(ctx, ZMQ_XPUB);
        int hwm = 0;
        zmq_setsockopt(xsub, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt(xpub, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(xsub, ZMQ_LINGER, &linger_value, sizeof linger_value);
        zmq_setsockopt(xpub, ZMQ_LINGER, &linger_value, sizeof linger_value);
        zmq_bind(xsub, "tcp://127.0.0.1:*");
        zmq_bind(xpub, "tcp://127.0.0.1:*");
        struct flood f = {ctx, "", 0};
        size_t size = sizeof f.endpoint;
        zmq_getsockopt(xsub, ZMQ_LAST_ENDPOINT, f.endpoint, &size);
        char backend[256];
        size = sizeof backend;
        zmq_getsockopt(xpub, ZMQ_LAST_ENDPOINT, backend, &size);
        // A subscriber in another context (another process, as a node would be) that reads slowly.
        void *subctx = zmq_ctx_new();
        void *sub = zmq_socket(subctx, ZMQ_SUB);
        int zero = 0;
        zmq_setsockopt(sub, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "A:", 2);
        zmq_connect(sub, backend);
        pthread_t thread;
        pthread_create(&thread, NULL, publisher, &f);
        // Forward for a while: subscriptions up, messages down.
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        int forwarded = 0;
        for (int step = 0; step < 20000; step++) {
            zmq_pollitem_t items[2] = {{xsub, 0, ZMQ_POLLIN, 0}, {xpub, 0, ZMQ_POLLIN, 0}};
            if (zmq_poll(items, 2, 10) <= 0) continue;
            if (items[1].revents & ZMQ_POLLIN) {
                zmq_msg_recv(&msg, xpub, 0);
                zmq_msg_send(&msg, xsub, 0);
            }
            if (items[0].revents & ZMQ_POLLIN) {
                int more;
                do {
                    zmq_msg_recv(&msg, xsub, 0);
                    more = zmq_msg_more(&msg);
                    zmq_msg_send(&msg, xpub, more ? ZMQ_SNDMORE : 0);
                } while (more);
                forwarded++;
            }
            if (step % 50 == 0) {
                char buffer[512];
                while (zmq_recv(sub, buffer, sizeof buffer, ZMQ_DONTWAIT) >= 0) {}
            }
        }
        zmq_msg_close(&msg);
        // Close the proxy's sockets while the subscriber still has a backlog coming.
        zmq_close(xpub);
        zmq_close(xsub);
        f.stop = 1;
        pthread_join(thread, NULL);
        zmq_ctx_term(ctx);
        zmq_close(sub);
        zmq_ctx_term(subctx);
        if (round % 10 == 0) { printf("round %d forwarded %d\n", round, forwarded); fflush(stdout); }
    }
    printf("no abort in %d rounds (linger %d, the publisher's %d)\n", rounds, linger_value, publisher_linger);
    return 0;
}
