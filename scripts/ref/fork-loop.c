/* The reference oscost's spawn/fork is checked against: the plain loop every course program
 * writes. fork + _exit + waitpid, N times, each timed with CLOCK_MONOTONIC; prints the median
 * in ns (of the last 5000). Pin it with taskset.
 *
 *   fork-loop [N [MAPPINGS ANON_MAPPINGS ANON_KIB ANON_REGIONS]]
 *
 * With the four figures the parent first grows to the shape of the one oscost's worker forks
 * from (spawn/fork records them: parent_mappings, parent_anon_mappings, parent_anon_kib,
 * parent_anon_regions), counted from /proc/self/smaps as oscost counts them: a fork's cost
 * is per mapping it duplicates, and per anonymous page and table page it copies, and only
 * mappings holding anonymous pages have their entries copied (a file mapping nobody wrote is
 * refilled by faults in the child). So the loop adds, in a space of its own far from the
 * libraries: one touched page in each 2 MiB region it lacks (a table page each), one touched
 * block for the rest of the memory, touched one-page mappings for the rest of the anonymous
 * mappings, and untouched one-page mappings (duplicated, nothing copied) for the rest of
 * the count, a free page between any two so that none merges. An earlier shape matched the
 * mapping count and VmPTE with touched pages only, and so copied three times the entries
 * oscost's fork copies (copy_page_range 6-11% of perf's samples against 2-3% of oscost's;
 * docs/design-notes.md, "Why the fork profiles differ"). The shape reached is printed on
 * stderr.
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

struct shape { int mappings, anon_mappings, anon_regions; long anon_kib; };

/* The address space as oscost's AddressSpace reads it from /proc/self/smaps. */
static struct shape shape_now(void) {
    static unsigned long regions[1 << 16];
    struct shape s = {0, 0, 0, 0};
    unsigned long start = 0, end = 0, a, b;
    int nregions = 0;
    char line[512];
    long kib;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) { perror("smaps"); exit(1); }
    while (fgets(line, sizeof line, f)) {
        /* A mapping's first line: its range (a field's name may read as hex: "Anon..."). */
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            start = a, end = b;
            s.mappings++;
        } else if (sscanf(line, "Anonymous: %ld kB", &kib) == 1 && kib > 0) {
            s.anon_mappings++;
            s.anon_kib += kib;
            for (unsigned long r = start >> 21; r <= (end - 1) >> 21; r++) {
                int seen = 0;
                for (int i = 0; i < nregions && !seen; i++) seen = regions[i] == r;
                if (!seen && nregions < (int)(sizeof regions / sizeof *regions)) regions[nregions++] = r;
            }
        }
    }
    fclose(f);
    s.anon_regions = nregions;
    return s;
}

/* LEN bytes at ADDR, which must be free (MAP_FIXED_NOREPLACE), touched or not. */
static void map_at(char *addr, size_t len, int touch) {
    void *p = mmap(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); exit(1); }
    if (touch) memset(p, 1, len);
}

static void grow(int want_maps, int want_anon_maps, long want_kib, int want_regions) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), region = 2UL << 20;
    /* A space of its own, 1 GiB-aligned and 64 GiB below the libraries: a touched page at
     * the start of each region it adds, the block and the extra mappings in the first one
     * (the block in its second half, the mappings one page apart after its first page). */
    void *probe = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *space = (char *)(((unsigned long)probe & ~((1UL << 30) - 1)) - (64UL << 30));
    char *next = space + 2 * page;
    munmap(probe, page);
    struct shape s = shape_now();
    for (int i = 0; s.anon_regions + i < want_regions; i++) map_at(space + (size_t)i * region, page, 1);
    s = shape_now();
    if (want_kib > s.anon_kib) {
        size_t len = (size_t)(want_kib - s.anon_kib) * 1024;
        map_at(len <= region / 2 ? space + region / 2 : space + 1024 * region, len, 1);
    }
    for (s = shape_now(); s.anon_mappings < want_anon_maps; s.anon_mappings++, next += 2 * page)
        map_at(next, page, 1);
    for (s = shape_now(); s.mappings < want_maps; s.mappings++, next += 2 * page) map_at(next, page, 0);
    s = shape_now();
    fprintf(stderr, "parent: %d mappings, %d with %ld KiB anonymous in %d regions of 2 MiB\n",
            s.mappings, s.anon_mappings, s.anon_kib, s.anon_regions);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    /* The last KEEP times only, their pages touched before the parent grows: the loop keeps
     * the shape it printed however long it runs. */
    int keep = n < 5000 ? n : 5000;
    long long *t = malloc(sizeof(long long) * keep);
    memset(t, 0, sizeof(long long) * keep);
    if (argc > 5) grow(atoi(argv[2]), atoi(argv[3]), atol(argv[4]), atoi(argv[5]));
    for (int i = 0; i < n; i++) {
        long long t0 = now();
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        if (pid < 0) { perror("fork"); return 1; }
        waitpid(pid, NULL, 0);
        t[i % keep] = now() - t0;
    }
    qsort(t, keep, sizeof *t, cmp);
    printf("%lld\n", t[keep / 2]);
    return 0;
}
