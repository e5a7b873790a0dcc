//! The first bytes of one direction of a TCP flow, in sequence order, whatever order the segments
//! came in: a segment that arrives early waits (bounded) until the gap before it fills, a
//! retransmitted or overlapping one adds only the bytes not yet held (the first copy wins, as a
//! receiving stack does), and nothing past `cap` bytes from the start is kept: at most `cap`
//! contiguous bytes and `cap` waiting. A handshake split over several segments therefore reads as
//! one byte string, once.

/// Segments held ahead of a gap at most, however few bytes they carry; beyond this, or beyond
/// `cap` bytes waiting, more are dropped (a passive capture cannot ask for them again, so a hello
/// in more pieces than this beyond one gap is missed: real stacks reorder far less).
const MAX_PENDING: usize = 64;

#[derive(Debug, Default)]
pub struct Stream {
    /// Sequence number of the first payload byte, once known (SYN + 1, or the first segment's).
    base: Option<u32>,
    /// Contiguous bytes from `base`.
    data: Vec<u8>,
    /// Segments beyond a gap: offset from `base`, bytes.
    pending: Vec<(usize, Vec<u8>)>,
}

impl Stream {
    /// The sender's SYN: its payload starts right after `isn`.
    pub fn syn(&mut self, isn: u32) {
        if self.base.is_none() {
            self.base = Some(isn.wrapping_add(1));
        }
    }

    /// The contiguous bytes from the start of the stream.
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Bytes held, including those waiting beyond a gap.
    pub fn held(&self) -> usize {
        self.data.len() + self.pending.iter().map(|(_, b)| b.len()).sum::<usize>()
    }

    /// Drops everything held; later segments are ignored by whoever stopped reading.
    pub fn release(&mut self) {
        self.data = Vec::new();
        self.pending = Vec::new();
    }

    /// Adds a segment's payload; true when the contiguous bytes grew. Without a SYN seen, the first
    /// segment with payload starts the stream.
    pub fn push(&mut self, seq: u32, payload: &[u8], cap: usize) -> bool {
        if payload.is_empty() {
            return false;
        }
        let base = *self.base.get_or_insert(seq);
        // Offsets are taken modulo 2^32 and read as signed: a retransmission from before the base
        // is negative, and anything beyond 2 GiB ahead is nonsense we drop.
        let offset = seq.wrapping_sub(base) as i32;
        let (offset, payload) = if offset < 0 {
            let skip = offset.unsigned_abs() as usize;
            if skip >= payload.len() {
                return false;
            }
            (0, &payload[skip..])
        } else {
            (offset as usize, payload)
        };
        if offset >= cap {
            return false;
        }
        let payload = &payload[..payload.len().min(cap - offset)];
        if offset > self.data.len() {
            let waiting: usize = self.pending.iter().map(|(_, b)| b.len()).sum();
            if self.pending.len() < MAX_PENDING
                && waiting + payload.len() <= cap
                && !self.pending.iter().any(|(at, _)| *at == offset)
            {
                self.pending.push((offset, payload.to_vec()));
            }
            return false;
        }
        let grew = self.append(offset, payload);
        grew | self.drain_pending()
    }

    /// Appends the part of `payload` (starting at `offset` ≤ the contiguous length) not yet held.
    fn append(&mut self, offset: usize, payload: &[u8]) -> bool {
        let new_from = self.data.len() - offset;
        if new_from >= payload.len() {
            return false;
        }
        self.data.extend_from_slice(&payload[new_from..]);
        true
    }

    /// Moves every waiting segment the contiguous bytes now reach.
    fn drain_pending(&mut self) -> bool {
        let mut grew = false;
        loop {
            let len = self.data.len();
            let Some(i) = self.pending.iter().position(|(at, _)| *at <= len) else { return grew };
            let (at, bytes) = self.pending.swap_remove(i);
            grew |= self.append(at, &bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CAP: usize = 64;

    #[test]
    fn out_of_order_and_retransmitted_segments_read_in_order_once() {
        let mut s = Stream::default();
        s.syn(999);
        assert!(!s.push(1005, b"world", CAP), "ahead of a gap: waits");
        assert!(s.push(1000, b"hello", CAP));
        assert_eq!(s.bytes(), b"helloworld");
        assert!(!s.push(1000, b"hellowo", CAP), "a retransmission adds nothing");
        assert!(s.push(1008, b"ldXYZ", CAP), "an overlap adds only the new bytes");
        assert_eq!(s.bytes(), b"helloworldXYZ");
    }

    #[test]
    fn nothing_past_the_cap_is_kept_and_the_sequence_may_wrap() {
        let mut s = Stream::default();
        s.syn(u32::MAX - 2);
        s.push(u32::MAX - 1, &[7u8; 40], CAP);
        s.push((u32::MAX - 1).wrapping_add(40), &[8u8; 40], CAP);
        assert_eq!(s.bytes().len(), CAP);
        assert!(!s.push(0x7000_0000, b"far away", CAP));
        assert_eq!(s.held(), CAP);
    }

    #[test]
    fn sixty_segments_in_reverse_order_reassemble() {
        let data: Vec<u8> = (0..3000u32).map(|n| n as u8).collect();
        let mut s = Stream::default();
        s.syn(0);
        for (i, piece) in data.chunks(50).enumerate().rev() {
            s.push(1 + (i * 50) as u32, piece, 4096);
        }
        assert_eq!(s.bytes(), &data[..]);
    }

    proptest! {
        /// Any split of a byte string, delivered in any order with duplicates, reads back as the
        /// string (up to the cap), and never more is held than the cap allows.
        #[test]
        fn any_delivery_order_reassembles(
            data in proptest::collection::vec(any::<u8>(), 1..200),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
            order in any::<prop::sample::Index>(),
            isn in any::<u32>(),
        ) {
            let mut points: Vec<usize> = cuts.iter().map(|c| c.index(data.len())).collect();
            points.extend([0, data.len()]);
            points.sort_unstable();
            points.dedup();
            let mut pieces: Vec<(usize, usize)> = points.windows(2).map(|w| (w[0], w[1])).collect();
            let k = order.index(pieces.len());
            pieces.rotate_left(k);
            let again = pieces.clone();
            let mut s = Stream::default();
            s.syn(isn);
            for (from, to) in pieces.into_iter().chain(again) {
                s.push(isn.wrapping_add(1).wrapping_add(from as u32), &data[from..to], CAP);
                prop_assert!(s.held() <= 2 * CAP);
            }
            let want = &data[..data.len().min(CAP)];
            prop_assert_eq!(s.bytes(), want);
        }

        #[test]
        fn arbitrary_segments_never_panic_or_exceed_the_bound(
            segs in proptest::collection::vec((any::<u32>(), proptest::collection::vec(any::<u8>(), 0..100)), 0..50),
        ) {
            let mut s = Stream::default();
            for (seq, payload) in segs {
                s.push(seq, &payload, CAP);
                prop_assert!(s.bytes().len() <= CAP);
                prop_assert!(s.held() <= 2 * CAP);
            }
        }
    }
}
