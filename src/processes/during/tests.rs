use super::*;

#[test]
fn the_keepers_messages_are_read_and_a_broken_one_is_skipped() {
    assert_eq!(parse_event("started"), Some(Event::Started));
    assert_eq!(parse_event("out a b"), Some(Event::Out("a b".into())));
    assert_eq!(parse_event("out "), Some(Event::Out(String::new())));
    assert_eq!(
        parse_event("cpu 1200 0:200,1:1000"),
        Some(Event::Cpu(CpuTime {
            total_ns: 1200,
            by_cpu_ns: vec![(0, 200), (1, 1000)]
        }))
    );
    assert_eq!(
        parse_event("stopped SIGINT 5"),
        Some(Event::Stopped {
            signal: "SIGINT".into(),
            cpu_ns: 5
        })
    );
    assert_eq!(parse_event("cpu x"), None);
    assert_eq!(parse_event("stopped SIGINT"), None);
    assert_eq!(parse_event("hello"), None);
}

#[test]
fn an_output_line_stays_one_line_and_is_cut() {
    assert_eq!(out_line(b"a\rb"), "out a b");
    assert_eq!(out_line(&[b'x'; 10_000]).len(), 4 + LINE_BYTES);
    assert_eq!(out_line(&[0xff, b'a']), "out \u{fffd}a");
}

#[test]
fn a_record_says_its_cpu_share_and_how_it_stopped() {
    let r = DuringRecord {
        blocks: 3,
        ready_s: vec![1.0, 1.2, 1.1],
        ready_by: "what is attached to the system settled",
        cpu_s: 0.5,
        cpu_s_by_cpu: vec![(0, 0.4), (1, 0.1)],
        measured_s: 10.0,
        stopped_by: vec!["SIGINT".into(), "SIGINT".into(), "SIGTERM".into()],
        attached: vec!["BPF programs 0 -> 1: + tracepoint sys_enter".into()],
    };
    assert!((r.cpu_pct() - 5.0).abs() < 1e-9);
    let w = r.words("bpftrace -e x");
    assert!(w.contains("3 block(s)"), "{w}");
    assert!(w.contains("1.10 s on average (1.20 s at most"), "{w}");
    assert!(w.contains("5.0% of one CPU; CPU 0 4.0%, CPU 1 1.0%"), "{w}");
    assert!(w.contains("stopped by SIGINT, SIGTERM"), "{w}");
    assert!(w.contains("attached: BPF programs 0 -> 1"), "{w}");
    assert_eq!(DuringRecord::default().cpu_pct(), 0.0);
}

#[test]
fn the_keepers_cpu_words_are_read_back_by_cpu() {
    let t = CpuTime {
        total_ns: 30,
        by_cpu_ns: vec![(0, 10), (1, 20)],
    };
    assert_eq!(t.words(), "30 0:10,1:20");
    assert_eq!(CpuTime::parse(&t.words()), Some(t.clone()));
    assert_eq!(
        CpuTime::parse("7"),
        Some(CpuTime {
            total_ns: 7,
            by_cpu_ns: vec![]
        })
    );
    let later = CpuTime {
        total_ns: 90,
        by_cpu_ns: vec![(0, 2_000_000_010), (1, 20)],
    };
    assert_eq!(later.by_cpu_s_since(&t), vec![(0, 2.0), (1, 0.0)]);
    let mut r = DuringRecord::default();
    r.add_by_cpu(&[(1, 1.0)]);
    r.add_by_cpu(&[(0, 0.5), (1, 1.0)]);
    assert_eq!(r.cpu_s_by_cpu, vec![(0, 0.5), (1, 2.0)]);
}
