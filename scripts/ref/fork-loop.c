/* The reference oscost's spawn/fork is checked against: the plain loop every course program
 * writes. fork + _exit + waitpid, N times, each timed with CLOCK_MONOTONIC; prints the median
 * in ns. Pin it with taskset. usage: fork-loop [N] */
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3000;
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
