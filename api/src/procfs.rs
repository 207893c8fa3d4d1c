//! What /proc says of a process, for the daemon and the OCF agent alike:
//! both tell etcd from a process that reused its PID by the start time.

/// The fields of /proc/PID/stat that tell a process apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The state letter (`R`, `S`, `T`, `Z`, …).
    pub state: char,
    /// The process group.
    pub pgrp: u32,
    /// The start time, in clock ticks since boot.
    pub start_ticks: u64,
}

impl Stat {
    /// Whether the process still runs code: neither a zombie nor dead.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// /proc/PID/stat of `pid`, if it exists and parses.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether `pid` is still the process that started at `start_ticks`, and
/// alive: a PID alone may have been reused.
pub fn same_process(pid: u32, start_ticks: u64) -> bool {
    stat(pid).is_some_and(|s| s.start_ticks == start_ticks && s.is_alive())
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name may contain spaces and parentheses: split after the
    // last ')'. `rest` starts at field 3 (state).
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_a_strange_name_parses() {
        let line =
            "4242 (etc d) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 9 0 123456 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                state: 'S',
                pgrp: 4242,
                start_ticks: 123_456
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_itself_and_not_another_start() {
        let me = std::process::id();
        let s = stat(me).expect("own stat");
        assert!(same_process(me, s.start_ticks));
        assert!(!same_process(me, s.start_ticks + 1));
        assert!(!same_process(u32::MAX, s.start_ticks));
    }
}
