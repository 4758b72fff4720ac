//! call/: the cost of a function call and return with various signatures. The callees are C
//! functions in csrc/calls.c, a separate translation unit without LTO, so they cannot be inlined
//! into these loops. The baseline is the same loop with no call (`empty_loop`), so a result is
//! the call, the argument set-up and the return.

use std::ffi::c_int;
use std::hint::black_box;

use crate::catalogue;
use crate::measuring::case::{Case, Measured, Meter};

#[repr(C)]
#[derive(Clone, Copy)]
/// A 32-byte struct passed and returned by value (four registers' worth, so through memory).
pub struct S32 {
    /// First word.
    pub a: i64,
    /// Second word.
    pub b: i64,
    /// Third word.
    pub c: i64,
    /// Fourth word.
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

catalogue! {
    "call/f0" => f0 { ladder: Some("call/f0") }:
        "call and return of void f(void) in C, empty loop subtracted";
    "call/f-int" => f_int:
        "call of int f(int) returning its argument";
    "call/f-int-int" => f_int_int:
        "call of int f(int, int) returning the sum";
    "call/f-double" => f_double:
        "call of double f(double) returning its argument";
    "call/f-8int" => f_8int:
        "call of int f(8 x int) returning the sum (6 in registers, 2 on the stack on x86-64)";
    "call/f-struct" => f_struct:
        "call of f(struct of 4 x int64 by value), passed in memory";
    "call/ret-struct" => ret_struct:
        "call of a function returning a struct of 4 x int64 (hidden result pointer)";
    "call/indirect" => indirect:
        "call of void f(void) through a function pointer the compiler cannot see";
}

// The callees are plain C functions with exactly these signatures in csrc/calls.c; they touch
// nothing but their arguments, which is what each SAFETY comment below relies on.

fn f0(m: &Meter, _: &Case) -> Measured {
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: a C callee of the signature declared above.
            unsafe { oscost_f0() };
        }
    }))
}

fn f_int(m: &Meter, _: &Case) -> Measured {
    Ok(m.batched(&mut |n| {
        for i in 0..n {
            // SAFETY: a C callee of the signature declared above.
            black_box(unsafe { oscost_f1(i as c_int) });
        }
    }))
}

fn f_int_int(m: &Meter, _: &Case) -> Measured {
    Ok(m.batched(&mut |n| {
        for i in 0..n {
            // SAFETY: a C callee of the signature declared above.
            black_box(unsafe { oscost_f2(i as c_int, 7) });
        }
    }))
}

fn f_double(m: &Meter, _: &Case) -> Measured {
    Ok(m.batched(&mut |n| {
        for i in 0..n {
            // SAFETY: a C callee of the signature declared above.
            black_box(unsafe { oscost_fd(i as f64) });
        }
    }))
}

fn f_8int(m: &Meter, _: &Case) -> Measured {
    Ok(m.batched(&mut |n| {
        for i in 0..n {
            let x = i as c_int;
            // SAFETY: a C callee of the signature declared above.
            black_box(unsafe { oscost_f8(x, 1, 2, 3, 4, 5, 6, 7) });
        }
    }))
}

fn f_struct(m: &Meter, _: &Case) -> Measured {
    Ok(m.batched(&mut |n| {
        for i in 0..n {
            let s = S32 {
                a: i as i64,
                b: 1,
                c: 2,
                d: 3,
            };
            // SAFETY: a C callee of the signature declared above.
            black_box(unsafe { oscost_fstruct(s) });
        }
    }))
}

fn ret_struct(m: &Meter, _: &Case) -> Measured {
    Ok(m.batched(&mut |n| {
        for i in 0..n {
            // SAFETY: a C callee of the signature declared above.
            black_box(unsafe { oscost_fret(i as i64) });
        }
    }))
}

fn indirect(m: &Meter, _: &Case) -> Measured {
    // black_box hides the target, so the call stays indirect (`call *%reg`).
    let f: unsafe extern "C" fn() = black_box(oscost_f0 as unsafe extern "C" fn());
    Ok(m.batched(&mut |n| {
        for _ in 0..n {
            // SAFETY: a C callee of the signature declared above.
            unsafe { f() };
        }
    }))
}
