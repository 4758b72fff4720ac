/*
 * Callees for the call/ family. They live in their own translation unit, compiled without LTO,
 * so the Rust caller cannot inline them: every call in the timed loop is a real call and
 * return with the platform ABI's argument passing.
 */
#include <stdint.h>

struct oscost_s32 {
    int64_t a, b, c, d;
};

__attribute__((noinline)) void oscost_f0(void) {}

__attribute__((noinline)) int oscost_f1(int a) { return a; }

__attribute__((noinline)) int oscost_f2(int a, int b) { return a + b; }

__attribute__((noinline)) double oscost_fd(double x) { return x; }

__attribute__((noinline)) int oscost_f8(int a, int b, int c, int d, int e, int f, int g, int h) {
    return a + b + c + d + e + f + g + h;
}

/* 32 bytes by value: passed in memory on x86-64 SysV, in registers nowhere. */
__attribute__((noinline)) int64_t oscost_fstruct(struct oscost_s32 s) { return s.a + s.d; }

/* 32 bytes returned: the caller passes a hidden pointer. */
__attribute__((noinline)) struct oscost_s32 oscost_fret(int64_t x) {
    struct oscost_s32 s = {x, x, x, x};
    return s;
}
