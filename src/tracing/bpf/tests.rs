//! Unit tests of `bpf`.

use super::*;

#[test]
fn instructions_are_encoded_as_the_kernel_reads_them() {
    // mov r0, 0: opcode 0xb7, no registers, no offset, no immediate.
    assert_eq!(insn(0xb7, 0, 0, 0, 0), 0xb7);
    // r2 += -4: dst 2 in the low nibble of byte 1, imm -4 in the high word.
    assert_eq!(insn(0x07, 2, 0, 0, -4), 0xffff_fffc_0000_0207);
    // *(u32 *)(r10 - 4) = 0: dst 10, offset -4.
    assert_eq!(insn(0x62, 10, 0, -4, 0), 0x0000_0000_fffc_0a62);
    // A map load is two slots, src 1 (a map descriptor), the fd in the first's immediate.
    assert_eq!(ld_map(7), [0x0000_0007_0000_1118, 0]);
}

#[test]
fn this_process_finds_getppid_in_its_libc_and_the_kernel_btf_when_there_is_one() {
    // The benchmark calls glibc's getppid: it is in the dynamic symbols of the libc mapped.
    let (path, offset) = library_function("libc.so", "getppid").unwrap();
    assert!(offset > 0, "{}", path.display());
    if let Ok(btf) = std::fs::read("/sys/kernel/btf/vmlinux") {
        assert!(vmlinux_function_id(getppid_function()).is_ok());
        assert!(btf_function_id(&btf, "no_such_function_here").is_none());
    }
    assert_eq!(btf_function_id(b"not btf", "x"), None);
    assert_eq!(elf_function_offset(b"not elf", "x"), None);
}

#[test]
fn the_counter_skips_its_increment_when_the_lookup_fails() {
    let p = increment(3);
    // The jump's offset lands just past the three instructions of the increment.
    let jeq = p[6];
    assert_eq!(jeq & 0xff, 0x15);
    assert_eq!(((jeq >> 16) & 0xffff) as i16, 3);
    assert_eq!(p.len(), 10);
    // bpftrace's count: the value starts at 0 when the lookup fails (skip the load), and
    // the update helper is the last instruction.
    let b = count_like_bpftrace(3);
    assert_eq!(b[7] & 0xff, 0x15);
    assert_eq!(((b[7] >> 16) & 0xffff) as i16, 1);
    assert_eq!((b[b.len() - 1] >> 32) as i32, HELPER_MAP_UPDATE_ELEM);
}
