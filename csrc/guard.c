/* See guard.h. */
#include "guard.h"

#if defined(_WIN32)

int tfl_guard_install(void) { return 0; }
void tfl_guard_enter(void) {}
uintptr_t tfl_guard_leave(void) { return 0; }

#else

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    int depth;
    uintptr_t low;  /* the lowest address that faulted in the outermost guard, or UINTPTR_MAX */
} guard_state;

/* initial-exec: the handler reads it without any call that could allocate. */
static __thread guard_state guard __attribute__((tls_model("initial-exec")));
static struct sigaction previous;  /* the action SIGBUS had before ours */
static uintptr_t page_size;
static volatile sig_atomic_t chaining;  /* a fault is with the previous handler */

static void fall_back(int sig) {
    /* The default action, as without any handler: the access faults again and ends the
     * process (a fault cannot be ignored). */
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigaction(sig, &fallback, NULL);
}

static void chain(int sig, siginfo_t *info, void *context) {
    /* A previous handler that raises the signal again after reinstalling its own previous
     * one (Python's faulthandler, when it was enabled after our first install) hands it back
     * to us at once (SA_NODEFER): it gets the default action then, not the handler again. */
    if (chaining) {
        fall_back(sig);
        return;
    }
    chaining = 1;
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, info, context);
    } else if (previous.sa_handler == SIG_DFL || previous.sa_handler == SIG_IGN) {
        fall_back(sig);
    } else {
        previous.sa_handler(sig);
    }
    chaining = 0;
}

static void on_bus(int sig, siginfo_t *info, void *context) {
    int saved = errno;
    if (guard.depth > 0 && info->si_code == BUS_ADRERR) {
        uintptr_t at = (uintptr_t)info->si_addr;
        /* Only the faulting page: every page past a file's end faults on its own. */
        if (mmap((void *)(at & ~(page_size - 1)), page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                 -1, 0) != MAP_FAILED) {
            if (at < guard.low) guard.low = at;
            errno = saved;
            return;
        }
    }
    errno = saved;
    chain(sig, info, context);
}

int tfl_guard_install(void) {
    struct sigaction now, ours;
    if (sigaction(SIGBUS, NULL, &now) != 0) return -1;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_bus) return 0;
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_bus;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&ours.sa_mask);
    previous = now;
    return sigaction(SIGBUS, &ours, NULL);
}

void tfl_guard_enter(void) {
    if (guard.depth++ == 0) guard.low = UINTPTR_MAX;
}

uintptr_t tfl_guard_leave(void) {
    if (--guard.depth > 0 || guard.low == UINTPTR_MAX) return 0;
    return guard.low;
}

#endif

const tfl_guard_fns tfl_guard_functions = {tfl_guard_enter, tfl_guard_leave};
