/* A tunable, small slowdown for measuring what `oscost ab` can detect: run a command under one
 * seccomp filter of about L instructions that reads the first argument (so the kernel cannot
 * cache its verdict) and then compares it L-3 times with a value it never has, falling
 * through each time, before allowing the call. Every system call runs all of it: about
 * 0.25 ns per instruction on the hosts this was tried on, so 8 more instructions add ~2 ns,
 * ~1-2% of getppid. Usage:
 *   seccomp-length L -- COMMAND [ARGS...]      (3 <= L <= 4096)
 * e.g. oscost ab --a 'scripts/ref/seccomp-length 200 --' --b 'scripts/ref/seccomp-length 208 --' */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: %s L -- COMMAND [ARGS...]\n", argv[0]);
        return 2;
    }
    int len = atoi(argv[1]);
    if (len < 3 || len > BPF_MAXINSNS) {
        fprintf(stderr, "%s: L must be 3 to %d\n", argv[0], BPF_MAXINSNS);
        return 2;
    }
    struct sock_filter *insns = calloc((size_t)len, sizeof *insns);
    if (!insns) {
        perror("calloc");
        return 1;
    }
    /* A = low word of the first argument: not constant, so no verdict cache. */
    insns[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
                                            offsetof(struct seccomp_data, args[0]));
    for (int i = 1; i < len - 1; i++)
        insns[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x5ecc0000u + i, 0, 0);
    insns[len - 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = (unsigned short)len, .filter = insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("PR_SET_NO_NEW_PRIVS");
        return 1;
    }
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("PR_SET_SECCOMP");
        return 1;
    }
    execvp(argv[3], argv + 3);
    fprintf(stderr, "%s: cannot run %s: %s\n", argv[0], argv[3], strerror(errno));
    return 127;
}
