//! Finding a function the kernel exports through the vDSO, by name, from the vDSO image the
//! kernel maps into every process (`AT_SYSINFO_EHDR`). Read through its program headers and
//! dynamic section, as the dynamic loader reads it: the section headers need not be mapped.
//! Used for calls libc may not route through the vDSO yet (getrandom, 6.11), so a benchmark
//! times the vDSO's function itself rather than whatever the C library does.

/// ELF64 header fields read here (offsets into `Elf64_Ehdr`).
const E_PHOFF: usize = 32;
const E_PHENTSIZE: usize = 54;
const E_PHNUM: usize = 56;
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const DT_NULL: u64 = 0;
const DT_HASH: u64 = 4;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
/// Size of `Elf64_Sym`.
const SYM_SIZE: usize = 24;

/// Read a little-endian or native integer of type `T` at `addr`.
///
/// # Safety
/// `addr` must lie in the mapped vDSO image.
unsafe fn at<T: Copy>(addr: usize) -> T {
    // SAFETY: the caller's; the image is mapped readable for the process's whole life.
    unsafe { std::ptr::read_unaligned(addr as *const T) }
}

/// The address of the vDSO function `name`, or `None` where the process has no vDSO or it
/// does not export that name (an older kernel, an architecture without it).
pub fn symbol(name: &str) -> Option<usize> {
    // SAFETY: getauxval only reads the auxiliary vector.
    let base = unsafe {
        libc::getauxval(33 /* AT_SYSINFO_EHDR */)
    } as usize;
    if base == 0 {
        return None;
    }
    // SAFETY: every address read below is the image's own header, program headers or the
    // tables its dynamic section points to, all inside the mapped image.
    unsafe {
        if at::<[u8; 4]>(base) != *b"\x7fELF" || at::<u8>(base + 4) != 2 {
            return None;
        }
        let phoff = at::<u64>(base + E_PHOFF) as usize;
        let phentsize = at::<u16>(base + E_PHENTSIZE) as usize;
        let phnum = at::<u16>(base + E_PHNUM) as usize;
        let (mut bias, mut dynamic) = (None, None);
        for i in 0..phnum {
            let ph = base + phoff + i * phentsize;
            let (kind, offset, vaddr) = (at::<u32>(ph), at::<u64>(ph + 8), at::<u64>(ph + 16));
            match kind {
                PT_LOAD if bias.is_none() => {
                    bias = Some((base as u64 + offset).wrapping_sub(vaddr) as usize)
                }
                PT_DYNAMIC => dynamic = Some(vaddr),
                _ => {}
            }
        }
        let (bias, dynamic) = (bias?, dynamic? as usize);
        let (mut symtab, mut strtab, mut hash) = (0usize, 0usize, 0usize);
        let mut d = bias.wrapping_add(dynamic);
        loop {
            let (tag, val) = (at::<u64>(d), at::<u64>(d + 8) as usize);
            match tag {
                DT_NULL => break,
                DT_SYMTAB => symtab = bias.wrapping_add(val),
                DT_STRTAB => strtab = bias.wrapping_add(val),
                DT_HASH => hash = bias.wrapping_add(val),
                _ => {}
            }
            d += 16;
        }
        if symtab == 0 || strtab == 0 {
            return None;
        }
        // The symbol count: DT_HASH's chain length, else the table runs up to the strings
        // (where the linker puts them in every vDSO built so far).
        let count = if hash != 0 {
            at::<u32>(hash + 4) as usize
        } else if strtab > symtab {
            (strtab - symtab) / SYM_SIZE
        } else {
            return None;
        };
        for i in 0..count {
            let sym = symtab + i * SYM_SIZE;
            let (name_off, info, shndx, value) = (
                at::<u32>(sym) as usize,
                at::<u8>(sym + 4),
                at::<u16>(sym + 6),
                at::<u64>(sym + 8),
            );
            // A defined function (STT_FUNC).
            if info & 0xf != 2 || shndx == 0 || value == 0 {
                continue;
            }
            let cname = std::ffi::CStr::from_ptr((strtab + name_off) as *const libc::c_char);
            if cname.to_bytes() == name.as_bytes() {
                return Some(bias.wrapping_add(value as usize));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    /// Every Linux vDSO on the architectures oscost builds for exports its clock; a name it
    /// does not is not found.
    #[test]
    fn finds_the_clock_and_not_a_made_up_name() {
        let clock = if cfg!(target_arch = "aarch64") {
            "__kernel_clock_gettime"
        } else {
            "__vdso_clock_gettime"
        };
        assert!(super::symbol(clock).is_some());
        assert!(super::symbol("__vdso_no_such_call").is_none());
    }
}
