// heapmap: an LD_PRELOAD library that keeps a table of the live heap blocks (address, size,
// allocation time, stack of return addresses) and writes it out, with /proc/self/maps, each time
// the file $HEAPMAP_DIR/dump-now appears (checked every 0.3 s; HEAPMAP_DIR defaults to /tmp).
// heapmap.py then says which blocks sit on the heap's pages, by allocation site: what keeps pages
// that malloc_trim cannot give back (BENCHMARKS.md, "Soak"). A measuring aid, not built by CI:
//   gcc -O2 -shared -fPIC -o heapmap.so heapmap.c /usr/lib/x86_64-linux-gnu/libunwind.so.8 -lpthread
//   LD_PRELOAD=$PWD/heapmap.so totemd ...     (then: touch $HEAPMAP_DIR/dump-now)
// glibc's tcache is invisible here: a block in a thread's cache counts as freed.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern int unw_backtrace(void **, int);

#define DEPTH 20
#define LIVE_BITS 22
#define LIVE_CAP (1ul << LIVE_BITS)
#define STACK_BITS 20
#define STACK_CAP (1ul << STACK_BITS)

typedef struct {
  uint64_t ptr;
  uint32_t size;
  uint32_t ms;
  uint32_t stack;
  uint32_t pad;
} live_t;

typedef struct {
  uint64_t hash;
  uint32_t n;
  uint32_t pad;
  uint64_t ip[DEPTH];
} stack_t_;

static live_t *live;
static stack_t_ *stacks;
static uint32_t nstacks = 1;
static uint64_t nlive;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int active;
static struct timespec t0;
static __thread int in_hook __attribute__((tls_model("initial-exec")));
static char dir[200] = "/tmp";

static inline uint64_t hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static uint32_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint32_t)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
}

// under lock
static uint32_t intern_stack(void **ip, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) h = hash64(h ^ (uint64_t)ip[i]);
  if (h == 0) h = 1;
  uint64_t mask = STACK_CAP - 1, i = h & mask;
  for (;;) {
    stack_t_ *s = &stacks[i];
    if (s->hash == 0) {
      if (nstacks > STACK_CAP * 3 / 4) return 0;
      s->hash = h;
      s->n = n;
      s->pad = nstacks++;
      for (int k = 0; k < n; k++) s->ip[k] = (uint64_t)ip[k];
      return s->pad;
    }
    if (s->hash == h && s->n == (uint32_t)n) return s->pad;
    i = (i + 1) & mask;
  }
}

static void live_insert(uint64_t p, size_t size, uint32_t st) {
  uint64_t mask = LIVE_CAP - 1, i = hash64(p) & mask;
  while (live[i].ptr != 0 && live[i].ptr != p) i = (i + 1) & mask;
  if (live[i].ptr == 0) nlive++;
  live[i].ptr = p;
  live[i].size = size > 0xffffffffu ? 0xffffffffu : (uint32_t)size;
  live[i].ms = now_ms();
  live[i].stack = st;
}

static void live_remove(uint64_t p) {
  uint64_t mask = LIVE_CAP - 1, i = hash64(p) & mask;
  while (live[i].ptr != p) {
    if (live[i].ptr == 0) return;
    i = (i + 1) & mask;
  }
  nlive--;
  uint64_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (live[j].ptr == 0) break;
    uint64_t k = hash64(live[j].ptr) & mask;
    int move = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
    if (move) {
      live[i] = live[j];
      i = j;
    }
  }
  live[i].ptr = 0;
}

static void record_alloc(void *p, size_t size) {
  if (!active || !p || in_hook) return;
  in_hook = 1;
  void *ip[DEPTH + 2];
  int n = unw_backtrace(ip, DEPTH + 2);
  int skip = n > 2 ? 2 : 0;
  pthread_mutex_lock(&lock);
  uint32_t st = intern_stack(ip + skip, n - skip);
  live_insert((uint64_t)p, size, st);
  pthread_mutex_unlock(&lock);
  in_hook = 0;
}

static void record_free(void *p) {
  if (!active || !p || in_hook) return;
  in_hook = 1;
  pthread_mutex_lock(&lock);
  live_remove((uint64_t)p);
  pthread_mutex_unlock(&lock);
  in_hook = 0;
}

void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  record_alloc(p, n);
  return p;
}
void free(void *p) {
  record_free(p);
  __libc_free(p);
}
void *calloc(size_t a, size_t b) {
  void *p = __libc_calloc(a, b);
  record_alloc(p, a * b);
  return p;
}
void *realloc(void *o, size_t n) {
  if (o) record_free(o);
  void *p = __libc_realloc(o, n);
  if (p) record_alloc(p, n);
  else if (o && n) record_alloc(o, n);  // failed: old block stays (size unknown, approx)
  return p;
}
void *memalign(size_t a, size_t n) {
  void *p = __libc_memalign(a, n);
  record_alloc(p, n);
  return p;
}
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
  void *p = __libc_memalign(a, n);
  if (!p) return 12;
  record_alloc(p, n);
  *out = p;
  return 0;
}

static void dump(int seq) {
  char path[256];
  snprintf(path, sizeof path, "%s/heapmap.%d.%d.bin", dir, getpid(), seq);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return;
  in_hook = 1;
  pthread_mutex_lock(&lock);
  uint64_t hdr[4] = {0x4d454d32, nlive, nstacks, now_ms()};
  write(fd, hdr, sizeof hdr);
  for (uint64_t i = 0; i < LIVE_CAP; i++)
    if (live[i].ptr) write(fd, &live[i], sizeof(live_t));
  for (uint64_t i = 0; i < STACK_CAP; i++)
    if (stacks[i].hash) write(fd, &stacks[i], sizeof(stack_t_));
  pthread_mutex_unlock(&lock);
  in_hook = 0;
  close(fd);
  // maps beside it
  snprintf(path, sizeof path, "%s/heapmap.%d.%d.maps", dir, getpid(), seq);
  int out = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  int in = open("/proc/self/maps", O_RDONLY);
  char buf[4096];
  ssize_t r;
  while (in >= 0 && out >= 0 && (r = read(in, buf, sizeof buf)) > 0) write(out, buf, r);
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  snprintf(path, sizeof path, "%s/heapmap.%d.%d.done", dir, getpid(), seq);
  out = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (out >= 0) close(out);
}

static void *poller(void *arg) {
  (void)arg;
  in_hook = 1;  // this thread's own allocations are not recorded
  int seq = 0;
  char trigger[256];
  snprintf(trigger, sizeof trigger, "%s/dump-now", dir);
  for (;;) {
    usleep(300000);
    if (access(trigger, F_OK) == 0) {
      unlink(trigger);
      dump(seq++);
    }
  }
  return 0;
}

static void child_after_fork(void) {
  active = 0;
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  lock = fresh;
}
static void before_fork(void) { pthread_mutex_lock(&lock); }
static void parent_after_fork(void) { pthread_mutex_unlock(&lock); }

__attribute__((constructor)) static void init(void) {
  const char *d = getenv("HEAPMAP_DIR");
  if (d && strlen(d) < sizeof dir) strcpy(dir, d);
  unsetenv("LD_PRELOAD");
  clock_gettime(CLOCK_MONOTONIC, &t0);
  live = mmap(0, LIVE_CAP * sizeof(live_t), PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  stacks = mmap(0, STACK_CAP * sizeof(stack_t_), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (live == MAP_FAILED || stacks == MAP_FAILED) return;
  pthread_atfork(before_fork, parent_after_fork, child_after_fork);
  in_hook = 1;
  pthread_t t;
  pthread_create(&t, 0, poller, 0);
  in_hook = 0;
  active = 1;
}
