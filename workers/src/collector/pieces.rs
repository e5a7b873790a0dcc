//! Joining the pieces of a line the engine split. Above about 1,000 lines/s podman writes a line as
//! partial records (`P` then `F`), and its API hands each piece over as a frame of its own, stamped,
//! without a newline; Docker does the same past 16 KiB. A line is its pieces up to the one that
//! ends with a newline, stamped when its first piece was (so a follower that resumes from that
//! second reads it whole). A line longer than the bound is cut there once, and the rest of it is
//! dropped up to its end: never joined to the next line.

/// A whole line of a container's output, and whether it was cut at the bound.
#[derive(Debug, PartialEq, Eq)]
pub struct JoinedLine {
    pub ts_nanos: i128,
    pub text: String,
    pub cut: bool,
}

/// What one frame gave: the lines it completed and the pieces that carried no engine stamp.
#[derive(Debug, Default)]
pub struct Joined {
    pub lines: Vec<JoinedLine>,
    pub unstamped: u64,
}

/// The line being put together from the pieces of one container's output stream.
pub struct LineJoiner {
    max_bytes: usize,
    open: Option<OpenLine>,
}

struct OpenLine {
    ts_nanos: i128,
    text: Vec<u8>,
    /// Cut at the bound already: the remaining pieces are dropped up to the line's end.
    cut: bool,
}

impl LineJoiner {
    /// Joins lines of at most `max_bytes` bytes.
    pub fn new(max_bytes: usize) -> LineJoiner {
        LineJoiner { max_bytes, open: None }
    }

    /// Takes one frame of the stream: one or more stamped pieces, each but the last ending with a
    /// newline.
    pub fn push(&mut self, frame: &[u8]) -> Joined {
        let mut joined = Joined::default();
        let mut pieces = frame.split(|b| *b == b'\n').peekable();
        while let Some(piece) = pieces.next() {
            let ends_line = pieces.peek().is_some();
            if piece.is_empty() && !ends_line {
                break;
            }
            let Some((ts_nanos, text)) = stamped(piece) else {
                joined.unstamped += 1;
                continue;
            };
            let open = self.open.get_or_insert_with(|| OpenLine { ts_nanos, text: Vec::new(), cut: false });
            if !open.cut {
                open.text.extend_from_slice(text);
                if open.text.len() > self.max_bytes {
                    open.text.truncate(self.max_bytes);
                    joined.lines.push(JoinedLine { ts_nanos: open.ts_nanos, text: text_of(&open.text), cut: true });
                    open.text = Vec::new();
                    open.cut = true;
                }
            }
            if ends_line && let Some(open) = self.open.take().filter(|open| !open.cut) {
                joined.lines.push(JoinedLine { ts_nanos: open.ts_nanos, text: text_of(&open.text), cut: false });
            }
        }
        joined
    }
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim_end().to_string()
}

/// Splits `2026-11-23T23:50:44.123456789Z text` into the stamp (nanoseconds) and the text.
pub fn stamped(piece: &[u8]) -> Option<(i128, &[u8])> {
    let space = piece.iter().position(|b| *b == b' ')?;
    let stamp = std::str::from_utf8(&piece[..space]).ok()?;
    let at = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
    let nanos = i128::from(at.timestamp()) * 1_000_000_000 + i128::from(at.timestamp_subsec_nanos());
    Some((nanos, &piece[space + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-11-23T23:50:44Z";
    const T1: &str = "2026-11-23T23:50:45Z";
    const T0_NANOS: i128 = 1_795_477_844_000_000_000;

    fn line(ts_nanos: i128, text: &str, cut: bool) -> JoinedLine {
        JoinedLine { ts_nanos, text: text.into(), cut }
    }

    #[test]
    fn engine_stamps_split_from_the_line() {
        let (ts, text) = stamped(b"2026-11-23T23:50:44Z <13>1 - d ssh - - hi").unwrap();
        assert_eq!((ts, text), (T0_NANOS, &b"<13>1 - d ssh - - hi"[..]));
        let (ts, _) = stamped(b"2026-11-23T23:50:44.000000123Z x").unwrap();
        assert_eq!(ts, T0_NANOS + 123);
        assert!(stamped(b"no stamp here").is_none());
    }

    #[test]
    fn whole_lines_pass_one_by_one_and_several_to_a_frame() {
        let mut joiner = LineJoiner::new(100);
        assert_eq!(joiner.push(format!("{T0} one\n").as_bytes()).lines, [line(T0_NANOS, "one", false)]);
        let both = joiner.push(format!("{T0} two\n{T1} three\n").as_bytes()).lines;
        assert_eq!(both, [line(T0_NANOS, "two", false), line(T0_NANOS + 1_000_000_000, "three", false)]);
    }

    #[test]
    fn partial_pieces_join_into_one_line_stamped_by_its_first_piece() {
        let mut joiner = LineJoiner::new(100);
        assert!(joiner.push(format!("{T0} <13>1 - web http - request [x path=\"/se").as_bytes()).lines.is_empty());
        assert!(joiner.push(format!("{T1} q/7/en").as_bytes()).lines.is_empty());
        let joined = joiner.push(format!("{T1} d\"]\n{T1} next\n").as_bytes());
        assert_eq!(
            joined.lines,
            [
                line(T0_NANOS, "<13>1 - web http - request [x path=\"/seq/7/end\"]", false),
                line(T0_NANOS + 1_000_000_000, "next", false)
            ]
        );
        assert_eq!(joined.unstamped, 0);
    }

    #[test]
    fn a_line_over_the_bound_is_cut_once_and_never_joined_to_the_next() {
        let mut joiner = LineJoiner::new(8);
        let first = joiner.push(format!("{T0} 0123456").as_bytes()).lines;
        assert!(first.is_empty());
        assert_eq!(joiner.push(format!("{T0} 789abc").as_bytes()).lines, [line(T0_NANOS, "01234567", true)]);
        assert!(joiner.push(format!("{T0} more and more").as_bytes()).lines.is_empty());
        let rest = joiner.push(format!("{T0} end\n{T0} next\n").as_bytes()).lines;
        assert_eq!(rest, [line(T0_NANOS, "next", false)]);
    }

    #[test]
    fn unstamped_pieces_are_counted_and_skipped() {
        let mut joiner = LineJoiner::new(100);
        let joined = joiner.push(format!("garbage\n{T0} ok\n").as_bytes());
        assert_eq!((joined.unstamped, joined.lines), (1, vec![line(T0_NANOS, "ok", false)]));
    }
}
