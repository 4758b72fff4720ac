/*
 * oscost-helper: the smallest program oscost can exec. Static, no libc, no dynamic loader:
 * `_start` reads argc/argv from the stack, and
 *   - with no argument, exits 0 at once (spawn/fork-exec, spawn/posix-spawn);
 *   - with a count N > 0, re-executes itself (/proc/self/exe) with N - 1 (spawn/exec), so a
 *     chain of N execs costs N execve calls and nothing else.
 * Built by build.rs with -static -nostdlib and embedded in oscost, which runs it from a memfd.
 */

static long sys3(long n, long a, long b, long c) {
    long ret;
#if defined(__x86_64__)
    __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    ret = x0;
#else
#error "oscost-helper supports x86_64 and aarch64"
#endif
    return ret;
}

#if defined(__x86_64__)
#define SYS_EXECVE 59
#define SYS_EXIT_GROUP 231
#else
#define SYS_EXECVE 221
#define SYS_EXIT_GROUP 94
#endif

__attribute__((noreturn)) static void die(long code) {
    for (;;) sys3(SYS_EXIT_GROUP, code, 0, 0);
}

__attribute__((noreturn, used)) void oscost_helper_main(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    char **envp = argv + argc + 1;
    if (argc < 2) die(0);
    unsigned long n = 0;
    for (const char *p = argv[1]; *p >= '0' && *p <= '9'; p++) n = n * 10 + (unsigned long)(*p - '0');
    if (n == 0) die(0);
    n -= 1;
    char buf[24];
    int i = 23;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    char *nargv[3] = {argv[0], buf + i, 0};
    sys3(SYS_EXECVE, (long)"/proc/self/exe", (long)nargv, (long)envp);
    die(127);
}

#if defined(__x86_64__)
__asm__(".text\n.global _start\n_start:\n"
        "  xor %rbp, %rbp\n  mov %rsp, %rdi\n  and $-16, %rsp\n  call oscost_helper_main\n  hlt\n");
#else
__asm__(".text\n.global _start\n_start:\n"
        "  mov x0, sp\n  bl oscost_helper_main\n");
#endif
