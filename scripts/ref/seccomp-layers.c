/* A known, small slowdown for checking `oscost ab`: run a command under N seccomp filters that
 * allow everything but look at the first argument, so the kernel cannot cache their verdict
 * and every system call runs all N filters (tens of ns each). Usage:
 *   seccomp-layers N -- COMMAND [ARGS...]
 * e.g. oscost ab --b 'scripts/ref/seccomp-layers 8 --' syscall/ */
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
        fprintf(stderr, "usage: %s N -- COMMAND [ARGS...]\n", argv[0]);
        return 2;
    }
    int layers = atoi(argv[1]);
    struct sock_filter insns[] = {
        /* A = low word of the first argument: not constant, so no verdict cache. */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x5eccu, 0, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof insns / sizeof insns[0], .filter = insns};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("PR_SET_NO_NEW_PRIVS");
        return 1;
    }
    for (int i = 0; i < layers; i++) {
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
            perror("PR_SET_SECCOMP");
            return 1;
        }
    }
    execvp(argv[3], argv + 3);
    fprintf(stderr, "%s: cannot run %s: %s\n", argv[0], argv[3], strerror(errno));
    return 127;
}
