#ifndef HANDOFF_CZEROMQ_SHIM_H
#define HANDOFF_CZEROMQ_SHIM_H

#include <errno.h>
#include <sys/epoll.h>   // the readiness watcher waits on ZMQ_FD with epoll (not in Glibc's module)
#include <sys/eventfd.h>
#include <malloc.h>      // mallopt, for Handoff's AllocatorTuning (not in Glibc's module either)
#include <zmq.h>

// libzmq's own error numbers are macro expressions (ZMQ_HAUSNUMERO + n), which Swift does not
// import. These constants carry the same values into Swift.
static const int CZMQ_EFSM = EFSM;
static const int CZMQ_ENOCOMPATPROTO = ENOCOMPATPROTO;
static const int CZMQ_ETERM = ETERM;
static const int CZMQ_EMTHREAD = EMTHREAD;

#endif
