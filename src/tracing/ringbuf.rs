//! The ftrace ring buffer's pages as `trace_pipe_raw` hands them out, turned into records:
//! each event's timestamp (the page's time plus the deltas before it) and its data, which
//! begins with the event's common fields as its `format` file lays them out. Pure, so it is
//! tested on pages built here with exact answers.
//!
//! The page header (`events/header_page`: the page's timestamp, then `commit`, the bytes of
//! data, whose bits 30 and 31 flag events lost before the page, then the data) and the event
//! header (`events/header_event`: one 32-bit word of a 5-bit type and a 27-bit time delta)
//! are the kernel's (kernel/trace/ring_buffer.c). Types 1-28 are data of 4 x type bytes;
//! 0 is data whose length is in the next word; 29 padding (a discarded event, or with no
//! delta the rest of the page); 30 extends the next delta; 31 is an absolute time stamp.
//! No maintained crate reads these pages (libtraceevent's kbuffer is C), hence by hand.

/// Where the page header's fields lie (from `events/header_page`; these are 64-bit values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// Offset of the commit field (bytes used on the page).
    pub commit_offset: usize,
    /// Size of the commit field.
    pub commit_size: usize,
    /// Offset of the first event.
    pub data_offset: usize,
}

impl Default for PageLayout {
    fn default() -> Self {
        PageLayout {
            commit_offset: 8,
            commit_size: 8,
            data_offset: 16,
        }
    }
}

impl PageLayout {
    /// Read `events/header_page`: `field: local_t commit; offset:8; size:8; ...`.
    pub fn parse(text: &str) -> PageLayout {
        let mut l = PageLayout::default();
        for line in text.lines() {
            if let Some((name, off, size)) = super::tracefs::parse_field_line(line) {
                match name.as_str() {
                    "commit" => (l.commit_offset, l.commit_size) = (off, size),
                    "data" => l.data_offset = off,
                    _ => {}
                }
            }
        }
        l
    }
}

/// One event: its time in the trace clock's units and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEvent<'a> {
    /// When, in the trace clock's units.
    pub time: u64,
    /// The event's payload.
    pub data: &'a [u8],
}

const PADDING: u32 = 29;
const TIME_EXTEND: u32 = 30;
const TIME_STAMP: u32 = 31;
/// Flags in `commit`: events were lost before this page (and their count stored at its end).
const MISSED_FLAGS: u64 = (1 << 31) | (1 << 30);
/// An absolute time stamp carries the low 59 bits of the time.
const TS_LOW_BITS: u64 = (1 << 59) - 1;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize, size: usize) -> Option<u64> {
    match size {
        4 => u32_at(b, at).map(u64::from),
        8 => Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?)),
        _ => None,
    }
}

/// The records of one page, in order; a page that ends early (a cut read) yields what it
/// holds whole.
pub fn page_records(page: &[u8], layout: PageLayout) -> Vec<RawEvent<'_>> {
    let mut out = Vec::new();
    let (Some(mut time), Some(commit)) = (
        u64_at(page, 0, 8),
        u64_at(page, layout.commit_offset, layout.commit_size),
    ) else {
        return out;
    };
    let len = (commit & !MISSED_FLAGS) as usize;
    let Some(data) = page.get(layout.data_offset..(layout.data_offset + len).min(page.len()))
    else {
        return out;
    };
    let mut pos = 0;
    while let Some(word) = u32_at(data, pos) {
        let (kind, delta) = (word & 0x1f, u64::from(word >> 5));
        let array0 = u32_at(data, pos + 4).map(u64::from);
        match kind {
            PADDING => {
                // No delta: the rest of the page is padding.
                let Some(skip) = array0.filter(|_| delta != 0) else {
                    break;
                };
                pos += 4 + skip as usize;
            }
            TIME_EXTEND => {
                let Some(hi) = array0 else { break };
                time += (hi << 27) | delta;
                pos += 8;
            }
            TIME_STAMP => {
                let Some(hi) = array0 else { break };
                time = (time & !TS_LOW_BITS) | (((hi << 27) | delta) & TS_LOW_BITS);
                pos += 8;
            }
            0 => {
                // The length word counts itself.
                let Some(n) = array0.and_then(|n| (n as usize).checked_sub(4)) else {
                    break;
                };
                let Some(d) = data.get(pos + 8..pos + 8 + n) else {
                    break;
                };
                time += delta;
                out.push(RawEvent { time, data: d });
                pos += 8 + n;
            }
            small => {
                let n = small as usize * 4;
                let Some(d) = data.get(pos + 4..pos + 4 + n) else {
                    break;
                };
                time += delta;
                out.push(RawEvent { time, data: d });
                pos += 4 + n;
            }
        }
    }
    out
}

/// Every record of consecutive pages of `size` bytes each (as `trace_pipe_raw` reads them).
pub fn records(pages: &[u8], size: usize, layout: PageLayout) -> Vec<RawEvent<'_>> {
    if size == 0 {
        return Vec::new();
    }
    pages
        .chunks(size)
        .flat_map(|p| page_records(p, layout))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of `size` bytes: time stamp, commit, then the event words given.
    fn page(time: u64, words: &[u32], flags: u64, size: usize) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend(time.to_ne_bytes());
        p.extend(((words.len() as u64 * 4) | flags).to_ne_bytes());
        for w in words {
            p.extend(w.to_ne_bytes());
        }
        p.resize(size, 0);
        p
    }

    fn header(kind: u32, delta: u32) -> u32 {
        kind | (delta << 5)
    }

    #[test]
    fn small_and_long_records_take_their_deltas_in_order() {
        let p = page(
            1000,
            &[
                header(2, 5), // 8 bytes of data at 1005
                0xaaaa_aaaa,
                0xbbbb_bbbb,
                header(0, 7), // length word 12 (itself and 8 bytes) at 1012
                12,
                0xcccc_cccc,
                0xdddd_dddd,
                header(1, 3), // 4 bytes at 1015
                0xeeee_eeee,
            ],
            0,
            4096,
        );
        let r = page_records(&p, PageLayout::default());
        let times: Vec<u64> = r.iter().map(|x| x.time).collect();
        assert_eq!(times, [1005, 1012, 1015]);
        assert_eq!(
            r[0].data,
            [0xaa; 4]
                .iter()
                .chain(&[0xbb; 4])
                .copied()
                .collect::<Vec<_>>()
        );
        assert_eq!(r[1].data.len(), 8);
        assert_eq!(r[2].data, [0xee; 4]);
    }

    #[test]
    fn a_time_extend_adds_its_high_bits_and_padding_adds_nothing() {
        let p = page(
            0,
            &[
                header(TIME_EXTEND, 1),
                2, // + (2 << 27) + 1
                header(PADDING, 9),
                4, // a discarded 4-byte event (its data word now the length): skipped
                header(1, 10),
                7,
            ],
            0,
            4096,
        );
        let r = page_records(&p, PageLayout::default());
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].time, (2 << 27) + 1 + 10);
        assert_eq!(r[0].data, 7u32.to_ne_bytes());
    }

    #[test]
    fn an_absolute_stamp_replaces_the_low_bits_and_undelta_padding_ends_the_page() {
        let p = page(
            (5 << 59) | 77,
            &[
                header(TIME_STAMP, 3),
                1, // (1 << 27) | 3
                header(1, 2),
                1,
                header(PADDING, 0),
                header(1, 2), // never read
                1,
            ],
            0,
            4096,
        );
        let r = page_records(&p, PageLayout::default());
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].time, (5 << 59) + (1 << 27) + 3 + 2);
    }

    #[test]
    fn lost_event_flags_do_not_count_as_data_and_pages_split_by_size() {
        let mut two = page(100, &[header(1, 1), 1], 1 << 31, 64);
        two.extend(page(200, &[header(1, 2), 2, header(1, 3), 3], 0, 64));
        let r = records(&two, 64, PageLayout::default());
        let times: Vec<u64> = r.iter().map(|x| x.time).collect();
        assert_eq!(times, [101, 202, 205]);
        // A page cut short yields only whole records.
        let cut = &two[64..64 + 16 + 8 + 4];
        assert_eq!(page_records(cut, PageLayout::default()).len(), 1);
        assert!(records(&two, 0, PageLayout::default()).is_empty());
    }

    #[test]
    fn the_layout_is_read_from_header_page() {
        let text = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
                    \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
                    \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
                    \tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";
        assert_eq!(PageLayout::parse(text), PageLayout::default());
        let l = PageLayout::parse(
            "\tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n\tfield: char data;\toffset:12;\tsize:4084;\tsigned:1;\n",
        );
        assert_eq!((l.commit_size, l.data_offset), (4, 12));
    }
}
