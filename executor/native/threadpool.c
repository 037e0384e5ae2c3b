/* A small pool of native threads that split one kernel's rows, for the compiled kernels.
 *
 * Why: handing half of a convolution to a Python ThreadPoolExecutor costs about 56 us per call
 * on the 2-core machine (submit, a futex wake-up, the GIL, the result), a tenth of a typical
 * layer. Here the caller publishes the job and works on it at once; workers that finished a
 * job a moment ago are still polling and start within a microsecond or two, and sleep on a
 * condition variable after half a millisecond of it (spin_ns) so idle cores come free. They
 * poll with sched_yield, not PAUSE: a thread that wants the core meanwhile (a threaded BLAS
 * product's, numpy's on the executor's other thread) gets it. An LSTM(256) at 64 rows, its
 * recurrent product by BLAS after each cell's chain split on this pool, took 11.2 ms a step
 * with PAUSE (the product ran beside the spinning worker) and 6.9 with sched_yield; the
 * Transformer, U-Net, ResNet-style and CNN benches 0.93-0.98x of their PAUSE times. Still,
 * a yielding poller takes turns on the core: a threaded BLAS product right after a split job
 * calls dfg_pool_rest first (bench_matmul_branches 19.4-20.2 -> 17.5 ms with no poll at all).
 *
 * One job at a time (guarded by job_lock): a second caller that finds the pool busy runs its
 * whole job itself. Chunks are handed out by an atomic counter, so a slow worker takes fewer.
 * Invariants: `job` and `gen` change only under `mu`, by the thread holding job_lock; a
 * worker takes `job` under `mu` and counts itself in its `users`; the caller, after every
 * chunk is done, clears `job` under `mu` and waits for `users` to reach 0 before the job (on
 * its stack) goes away. After fork() the child has no workers: an atfork handler
 * forgets them and they are started again on first use.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "native.h"

typedef dfg_range_fn range_fn;

#if defined(__x86_64__) || defined(__i386__)
#define PAUSE() __builtin_ia32_pause()
#else
#define PAUSE() ((void)0)
#endif

struct job {
    range_fn fn;
    const void *args;
    long rows, chunks;
    atomic_long next;      /* the next chunk to take */
    atomic_long done;      /* chunks finished */
    atomic_int err;        /* any chunk's nonzero return */
    atomic_int users;      /* workers holding this job: the caller waits for 0 to return */
};

#define MAX_WORKERS 63
/* How long an idle worker polls for the next job before it sleeps, in nanoseconds, read by
 * the clock. It was a count of 20000 PAUSEs, whose time depends on the CPU: 0.52 ms on a
 * Zen 4 (a PAUSE ~26 ns), about 1 ms where a PAUSE takes 140 cycles (Intel since Skylake),
 * tens of microseconds where it takes ten. On the Zen 4, paired in-process steps, 50 us
 * against 520: bench_cnn 1.14x and ResNet-style 1.10x slower (their next convolution finds
 * the workers asleep), the Transformer and U-Net within noise; so half a millisecond, now on
 * every CPU. dfg_pool_spin sets it (module.c: DFG_POOL_SPIN_US at import, for a machine
 * whose other work needs the cores more); a worker reads it each time it starts to wait. */
static atomic_long spin_ns = 500000L;

/* Bumped by dfg_pool_rest: a worker polling since before the bump stops polling and sleeps
 * (a threaded BLAS product about to start wants both cores for its own threads). */
static atomic_long rest;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static struct job *volatile job;    /* guarded by mu (written), read after gen moves */
static atomic_long gen;             /* bumped once per job */
static int nworkers;                /* started so far; guarded by job_lock */
static int atfork_set;

static void run_chunks(struct job *j) {
    long i;
    while ((i = atomic_fetch_add(&j->next, 1)) < j->chunks) {
        long r0 = j->rows * i / j->chunks, r1 = j->rows * (i + 1) / j->chunks;
        int e = j->fn(j->args, r0, r1);
        if (e) atomic_store(&j->err, e);
        atomic_fetch_add(&j->done, 1);
    }
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000000000L + t.tv_nsec;
}

static void *worker(void *unused) {
    (void)unused;
    long seen = atomic_load(&gen);
    for (;;) {
        long g = seen;
        /* poll for the next job until spin_ns have passed (the clock read every 64 polls:
         * ~25 ns against 64 sched_yield calls of a few tenths of a microsecond each), then
         * sleep */
        long until = now_ns() + atomic_load(&spin_ns);
        const long rested = atomic_load(&rest);
        for (unsigned s = 1; (g = atomic_load(&gen)) == seen; s++) {
            sched_yield();
            if (atomic_load(&rest) != rested)
                break;
            if ((s & 63) == 0 && now_ns() >= until)
                break;
        }
        if (g == seen) {
            pthread_mutex_lock(&mu);
            while ((g = atomic_load(&gen)) == seen) pthread_cond_wait(&cv, &mu);
            pthread_mutex_unlock(&mu);
        }
        seen = g;
        pthread_mutex_lock(&mu);
        struct job *j = job;
        if (j) atomic_fetch_add(&j->users, 1);
        pthread_mutex_unlock(&mu);
        if (j) {
            run_chunks(j);
            atomic_fetch_sub(&j->users, 1);    /* the last touch of j */
        }
    }
    return NULL;
}

static void forget_workers(void) {   /* in the child after fork(): no threads came along */
    nworkers = 0;
    pthread_mutex_init(&mu, NULL);
    pthread_cond_init(&cv, NULL);
    pthread_mutex_init(&job_lock, NULL);
    job = NULL;
}

/* Set how long idle workers poll before they sleep (us >= 0, microseconds); returns the
 * previous value. A negative us only reads it. */
long dfg_pool_spin(long us) {
    long old = atomic_load(&spin_ns) / 1000L;
    if (us >= 0)
        atomic_store(&spin_ns, us * 1000L);
    return old;
}

/* Idle workers that are polling go to sleep now (the next job wakes them). */
void dfg_pool_rest(void) {
    atomic_fetch_add(&rest, 1);
}

/* Run fn(args, r0, r1) over [0, rows) in `chunks` pieces on up to `threads` threads, the
 * caller one of them. Returns 0, or a chunk's nonzero return. */
int dfg_pool_run(range_fn fn, const void *args, long rows, long chunks, int threads) {
    if (chunks > rows) chunks = rows;
    if (threads > MAX_WORKERS + 1) threads = MAX_WORKERS + 1;
    if (chunks <= 1 || threads <= 1 || pthread_mutex_trylock(&job_lock) != 0)
        return rows > 0 ? fn(args, 0, rows) : 0;
    if (!atfork_set) {
        pthread_atfork(NULL, NULL, forget_workers);
        atfork_set = 1;
    }
    while (nworkers < threads - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int ok = pthread_create(&t, &attr, worker, NULL) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break;
        nworkers++;
    }
    struct job j = {fn, args, rows, chunks, 0, 0, 0, 0};
    pthread_mutex_lock(&mu);
    job = &j;
    atomic_fetch_add(&gen, 1);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    run_chunks(&j);
    while (atomic_load(&j.done) < chunks)
        PAUSE();
    pthread_mutex_lock(&mu);
    job = NULL;                         /* no worker picks j up from here on */
    pthread_mutex_unlock(&mu);
    while (atomic_load(&j.users) > 0)   /* and those that did are done with it */
        PAUSE();
    pthread_mutex_unlock(&job_lock);
    return atomic_load(&j.err);
}
