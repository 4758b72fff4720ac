/* The reference oscost's spawn/fork is checked against: the plain loop every course program
 * writes. fork + _exit + waitpid, N times, each timed with CLOCK_MONOTONIC; prints the median
 * in ns. Pin it with taskset.
 *
 *   fork-loop [N [MAPPINGS ANON_KIB [PAGE_TABLE_KIB]]]
 *
 * With MAPPINGS and ANON_KIB the parent first grows to that shape (lines of /proc/self/maps,
 * `Anonymous` of /proc/self/smaps_rollup): one touched anonymous block for the memory, then
 * one-page mappings of alternating protection (so that none merges with its neighbour) for
 * the count. That is the parent oscost's worker is when it forks (spawn/fork records
 * `parent_mappings` and `parent_anon_kib`): a fork's cost is per mapping and per page, so
 * its profile is compared with this loop's in the same shape. With PAGE_TABLE_KIB (`VmPTE`
 * of /proc/self/status, spawn/fork's `parent_page_table_kib`) the first one-page mappings
 * are placed a 2 MiB region apart, each touched, until the page tables are that size: a
 * fork allocates, zeroes and fills a table page in the child for each of the parent's that
 * maps anonymous pages, and a Rust process's pages are spread over more regions than one
 * block needs. The shape reached is printed on stderr.
 *
 * Build it with `cc -O2 -Wl,-z,now`. Linked lazily (gcc's default here), the parent never
 * calls _exit, so every child resolves _exit's PLT entry through the dynamic linker before it
 * can leave: ten more page faults a child (ld.so's text, libc's symbol tables, a copy of the
 * GOT page), 16 instead of 6, and about 20 us a fork on the AMD guest. oscost is a Rust
 * binary, linked with -z now, and its child faults 6 times: the lazy loop times ld.so, not
 * fork (docs/design-notes.md, "A C fork loop times the dynamic linker"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Lines of /proc/self/maps. */
static int mappings(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    int n = 0, c;
    if (!f) return -1;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

/* The KiB of a "Name: N kB" line of a /proc file (FORMAT: "Name: %ld kB"), or -1. */
static long kib_field(const char *path, const char *format) {
    FILE *f = fopen(path, "r");
    char line[256];
    long kib = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, format, &kib) == 1) break;
    fclose(f);
    return kib;
}

static long anon_kib(void) { return kib_field("/proc/self/smaps_rollup", "Anonymous: %ld kB"); }
static long page_table_kib(void) { return kib_field("/proc/self/status", "VmPTE: %ld kB"); }

/* LEN bytes at HINT if that range is free (anywhere the kernel likes if HINT is NULL or taken). */
static void *map(void *hint, size_t len, int prot) {
    void *p = mmap(hint, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    return p;
}

static void grow(int want_maps, long want_kib, long want_table_kib) {
    long page = sysconf(_SC_PAGESIZE);
    long more = want_kib - anon_kib();
    /* Regions of 2 MiB, each one table page's reach, from a 1 GiB-aligned base far below the
     * libraries and above the heap: each touched page placed there needs a table page. */
    char *spread = (char *)((unsigned long)map(NULL, (size_t)page, PROT_READ) & ~((1UL << 30) - 1)) - (64UL << 30);
    if (more > 0) memset(map(NULL, (size_t)more * 1024, PROT_READ | PROT_WRITE), 1, (size_t)more * 1024);
    for (int i = 0; mappings() < want_maps; i++) {
        int spreading = want_table_kib > 0 && page_table_kib() < want_table_kib;
        char *p = map(spreading ? spread + (size_t)i * (2UL << 20) : NULL, (size_t)page,
                      spreading || i % 2 == 0 ? PROT_READ | PROT_WRITE : PROT_READ);
        if (spreading || i % 2 == 0) p[0] = 1;
        if (i > 4 * want_maps) break; /* merging beat us: stop, and say the shape reached */
    }
    fprintf(stderr, "parent: %d mappings, %ld KiB anonymous, %ld KiB page tables\n", mappings(),
            anon_kib(), page_table_kib());
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    if (argc > 3) grow(atoi(argv[2]), atol(argv[3]), argc > 4 ? atol(argv[4]) : 0);
    long long *t = malloc(sizeof(long long) * n);
    for (int i = 0; i < n; i++) {
        long long t0 = now();
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        if (pid < 0) { perror("fork"); return 1; }
        waitpid(pid, NULL, 0);
        t[i] = now() - t0;
    }
    qsort(t, n, sizeof *t, cmp);
    printf("%lld\n", t[n / 2]);
    return 0;
}
