//! call/: the cost of a function call and return with various signatures. The callees are C
//! functions in csrc/calls.c, a separate translation unit without LTO, so they cannot be inlined
//! into these loops. The baseline is the same loop with no call (`empty_loop`), so a result is
//! the call, the argument set-up and the return.

use std::ffi::c_int;
use std::hint::black_box;

use super::{BenchError, Benchmark, Ctx, Outcome};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct S32 {
    pub a: i64,
    pub b: i64,
    pub c: i64,
    pub d: i64,
}

unsafe extern "C" {
    fn oscost_f0();
    fn oscost_f1(a: c_int) -> c_int;
    fn oscost_f2(a: c_int, b: c_int) -> c_int;
    fn oscost_fd(x: f64) -> f64;
    #[allow(clippy::too_many_arguments)]
    fn oscost_f8(
        a: c_int,
        b: c_int,
        c: c_int,
        d: c_int,
        e: c_int,
        f: c_int,
        g: c_int,
        h: c_int,
    ) -> c_int;
    fn oscost_fstruct(s: S32) -> i64;
    fn oscost_fret(x: i64) -> S32;
}

pub static BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        id: "call/f0",
        definition: "call and return of void f(void) in C, empty loop subtracted",
        default: true,
        run: f0,
    },
    Benchmark {
        id: "call/f-int",
        definition: "call of int f(int) returning its argument",
        default: true,
        run: f_int,
    },
    Benchmark {
        id: "call/f-int-int",
        definition: "call of int f(int, int) returning the sum",
        default: true,
        run: f_int_int,
    },
    Benchmark {
        id: "call/f-double",
        definition: "call of double f(double) returning its argument",
        default: true,
        run: f_double,
    },
    Benchmark {
        id: "call/f-8int",
        definition: "call of int f(8 x int) returning the sum (6 in registers, 2 on the stack on x86-64)",
        default: true,
        run: f_8int,
    },
    Benchmark {
        id: "call/f-struct",
        definition: "call of f(struct of 4 x int64 by value), passed in memory",
        default: true,
        run: f_struct,
    },
    Benchmark {
        id: "call/ret-struct",
        definition: "call of a function returning a struct of 4 x int64 (hidden result pointer)",
        default: true,
        run: ret_struct,
    },
    Benchmark {
        id: "call/indirect",
        definition: "call of void f(void) through a function pointer the compiler cannot see",
        default: true,
        run: indirect,
    },
];

type R = Result<Vec<Outcome>, BenchError>;

// SAFETY (all unsafe blocks below): the callees are plain C functions with exactly these
// signatures in csrc/calls.c; they touch nothing but their arguments.

fn f0(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![ctx.batched(b, &mut |n| {
        for _ in 0..n {
            unsafe { oscost_f0() };
        }
    })])
}

fn f_int(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![ctx.batched(b, &mut |n| {
        for i in 0..n {
            black_box(unsafe { oscost_f1(i as c_int) });
        }
    })])
}

fn f_int_int(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![ctx.batched(b, &mut |n| {
        for i in 0..n {
            black_box(unsafe { oscost_f2(i as c_int, 7) });
        }
    })])
}

fn f_double(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![ctx.batched(b, &mut |n| {
        for i in 0..n {
            black_box(unsafe { oscost_fd(i as f64) });
        }
    })])
}

fn f_8int(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![ctx.batched(b, &mut |n| {
        for i in 0..n {
            let x = i as c_int;
            black_box(unsafe { oscost_f8(x, 1, 2, 3, 4, 5, 6, 7) });
        }
    })])
}

fn f_struct(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![ctx.batched(b, &mut |n| {
        for i in 0..n {
            let s = S32 {
                a: i as i64,
                b: 1,
                c: 2,
                d: 3,
            };
            black_box(unsafe { oscost_fstruct(s) });
        }
    })])
}

fn ret_struct(ctx: &Ctx, b: &Benchmark) -> R {
    Ok(vec![ctx.batched(b, &mut |n| {
        for i in 0..n {
            black_box(unsafe { oscost_fret(i as i64) });
        }
    })])
}

fn indirect(ctx: &Ctx, b: &Benchmark) -> R {
    // black_box hides the target, so the call stays indirect (`call *%reg`).
    let f: unsafe extern "C" fn() = black_box(oscost_f0 as unsafe extern "C" fn());
    Ok(vec![ctx.batched(b, &mut |n| {
        for _ in 0..n {
            unsafe { f() };
        }
    })])
}
