//! Adaptive binary range coder (the LZMA design, carry-propagating 64-bit `low`, with
//! 15-bit probabilities whose adaptation shift grows with the bits they have seen, up
//! to 6) and the integer binarisation used for all
//! residuals: zero flag, sign, adaptive Elias-gamma prefix, raw mantissa bits.
//!
//! Everything is integer arithmetic below 2^53, so the JavaScript decoder reproduces it
//! exactly with plain numbers.

use super::CodecError;
use super::format::{
    HINTS, MAX_PREFIX, PROB_BITS, PROB_COUNT_SHIFT, PROB_INIT, PROB_SHIFT, RANGE_TOP,
    SIGN_CONTEXTS, ZERO_CONTEXTS,
};

/// An adaptive probability of a 0 bit: its state, as [`PROB_COUNT_SHIFT`] lays it out.
pub(crate) type Prob = u32;

/// The probability of a 0 bit in state `s`, in units of 2^-[`PROB_BITS`] (in
/// [1, 2^PROB_BITS − 1]).
#[inline(always)]
fn probability(s: Prob) -> u32 {
    s & ((1 << PROB_COUNT_SHIFT) - 1)
}

/// Moves state `s` towards the bit just coded, by the shift its count of bits seen
/// gives ([`PROB_SHIFT`]).
#[inline(always)]
fn adapt(s: &mut Prob, bit: bool) {
    let p = probability(*s);
    let n = *s >> PROB_COUNT_SHIFT;
    // (n ≤ PROB_COUNT_LAST < 64: a table lookup, cheaper than counting leading zeros)
    let shift = u32::from(ADAPT_SHIFT[n as usize & 63]);
    let p = if bit {
        p - (p >> shift)
    } else {
        p + (((1 << PROB_BITS) - p) >> shift)
    };
    *s = p | ((n + u32::from(n < PROB_COUNT_LAST)) << PROB_COUNT_SHIFT);
}

/// The count at which the shift reaches [`PROB_SHIFT`]: 2^PROB_SHIFT − 2.
const PROB_COUNT_LAST: u32 = (1 << PROB_SHIFT) - 2;

/// The adaptation shift after n bits: ⌊log2(n + 2)⌋, at most [`PROB_SHIFT`].
const ADAPT_SHIFT: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut n = 0;
    while n < 64 {
        let s = 31 - (n as u32 + 2).leading_zeros();
        t[n] = if s < PROB_SHIFT {
            s as u8
        } else {
            PROB_SHIFT as u8
        };
        n += 1;
    }
    t
};

/// Adaptive model of one stream of signed integers.
#[derive(Clone, Debug)]
pub(crate) struct IntModel {
    zero: [Prob; ZERO_CONTEXTS],
    sign: [Prob; SIGN_CONTEXTS],
    prefix: [Prob; MAX_PREFIX + 1],
}

impl Default for IntModel {
    fn default() -> Self {
        Self {
            zero: [PROB_INIT; ZERO_CONTEXTS],
            sign: [PROB_INIT; SIGN_CONTEXTS],
            prefix: [PROB_INIT; MAX_PREFIX + 1],
        }
    }
}

/// The contexts a coded integer's zero flag and sign are read in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx {
    zero: usize,
    sign: usize,
}

/// The context of a value from the magnitude of the previous value of the same stream
/// (the bones').
#[inline]
pub(crate) fn zero_context(previous: i32) -> Ctx {
    Ctx {
        zero: (previous.unsigned_abs() as usize).min(2),
        sign: 0,
    }
}

/// The context of axis `k` of a vertex's residual: `prev` is the previous vertex's
/// residual, `cur` this vertex's (axes before `k` already set), `hint` the prediction
/// hint of this axis (< [`HINTS`]; see [`super::format::HINTS`]).
#[inline]
pub(crate) fn coord_context(prev: &[i32; 3], cur: &[i32; 3], k: usize, hint: u8) -> Ctx {
    let busy = if k == 0 {
        prev.iter().any(|&e| e != 0)
    } else {
        cur[..k].iter().any(|&e| e != 0)
    };
    debug_assert!(usize::from(hint) < HINTS);
    let hint = usize::from(hint);
    let m = zero_context(prev[k]).zero + if busy { 3 } else { 0 };
    Ctx {
        zero: m * HINTS + hint,
        sign: hint,
    }
}

/// Range encoder writing into a caller's buffer (cleared first, capacity reused).
///
/// `low` and `range` change at every bit and the output only every eighth or so, so
/// the output side lives in its own [`Sink`], reached through a call that is not
/// inlined: then `low` and `range` stay in registers in the callers' loops, where
/// [`RangeEncoder::bit`] and [`RangeEncoder::int`] are inlined.
pub(crate) struct RangeEncoder<'a> {
    low: u64,
    range: u32,
    sink: Sink<'a>,
}

/// The carry-propagating output of a [`RangeEncoder`].
struct Sink<'a> {
    cache: u8,
    cache_size: u64,
    out: &'a mut Vec<u8>,
}

impl Sink<'_> {
    /// Emits the top byte of `low` (resolving any pending carry) and returns `low`
    /// shifted by a byte.
    #[inline(never)]
    fn shift_low(&mut self, low: u64) -> u64 {
        if (low as u32) < 0xFF00_0000 || (low >> 32) != 0 {
            let carry = (low >> 32) as u8;
            let mut temp = self.cache;
            loop {
                self.out.push(temp.wrapping_add(carry));
                temp = 0xFF;
                self.cache_size -= 1;
                if self.cache_size == 0 {
                    break;
                }
            }
            self.cache = ((low >> 24) & 0xFF) as u8;
        }
        self.cache_size += 1;
        (low & 0x00FF_FFFF) << 8
    }
}

impl<'a> RangeEncoder<'a> {
    pub(crate) fn new(out: &'a mut Vec<u8>) -> Self {
        Self {
            low: 0,
            range: u32::MAX,
            sink: Sink {
                cache: 0,
                cache_size: 1,
                out,
            },
        }
    }

    #[inline(always)]
    fn normalize(&mut self) {
        while self.range < RANGE_TOP {
            self.range <<= 8;
            self.low = self.sink.shift_low(self.low);
        }
    }

    /// Encodes one bit with an adaptive probability.
    #[inline(always)]
    pub(crate) fn bit(&mut self, p: &mut Prob, bit: bool) {
        let bound = (self.range >> PROB_BITS) * probability(*p);
        if bit {
            self.low += u64::from(bound);
            self.range -= bound;
        } else {
            self.range = bound;
        }
        adapt(p, bit);
        self.normalize();
    }

    /// Encodes the low `count` bits of `value` with probability ½ each, high bit first.
    #[inline(always)]
    pub(crate) fn direct(&mut self, value: u32, count: u32) {
        for i in (0..count).rev() {
            self.range >>= 1;
            if (value >> i) & 1 == 1 {
                self.low += u64::from(self.range);
            }
            self.normalize();
        }
    }

    /// Encodes a signed integer (|value| < 2^[`MAX_PREFIX`]) with `model` in the
    /// contexts `ctx`.
    #[inline(always)]
    pub(crate) fn int(&mut self, m: &mut IntModel, ctx: Ctx, value: i32) {
        self.bit(&mut m.zero[ctx.zero], value != 0);
        if value == 0 {
            return;
        }
        self.bit(&mut m.sign[ctx.sign], value < 0);
        let mag = value.unsigned_abs();
        // Elias gamma of mag (≥ 1): k = floor(log2 mag) unary, then k raw bits
        let k = 31 - mag.leading_zeros();
        for i in 0..k {
            self.bit(&mut m.prefix[i as usize], true);
        }
        if (k as usize) < MAX_PREFIX {
            self.bit(&mut m.prefix[k as usize], false);
        }
        self.direct(mag, k);
    }

    /// Flushes; the buffer then holds the whole coded stream.
    pub(crate) fn finish(mut self) {
        for _ in 0..5 {
            self.low = self.sink.shift_low(self.low);
        }
    }
}

/// Range decoder over a byte slice; reading past its end is an error, and
/// [`RangeDecoder::finish`] checks that every byte was used.
pub(crate) struct RangeDecoder<'a> {
    code: u32,
    range: u32,
    data: &'a [u8],
    pos: usize,
}

impl<'a> RangeDecoder<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Result<Self, CodecError> {
        if data.len() < 5 {
            return Err(CodecError::Truncated {
                what: "range-coded payload",
            });
        }
        if data[0] != 0 {
            return Err(CodecError::Corrupt {
                what: "range coder start byte",
            });
        }
        let code = u32::from_be_bytes([data[1], data[2], data[3], data[4]]);
        Ok(Self {
            code,
            range: u32::MAX,
            data,
            pos: 5,
        })
    }

    #[inline]
    fn normalize(&mut self) -> Result<(), CodecError> {
        while self.range < RANGE_TOP {
            let byte = *self.data.get(self.pos).ok_or(CodecError::Truncated {
                what: "range-coded payload",
            })?;
            self.pos += 1;
            self.range <<= 8;
            self.code = (self.code << 8) | u32::from(byte);
        }
        Ok(())
    }

    #[inline]
    pub(crate) fn bit(&mut self, p: &mut Prob) -> Result<bool, CodecError> {
        let bound = (self.range >> PROB_BITS) * probability(*p);
        let bit = if self.code < bound {
            self.range = bound;
            false
        } else {
            self.code -= bound;
            self.range -= bound;
            true
        };
        adapt(p, bit);
        self.normalize()?;
        Ok(bit)
    }

    #[inline]
    pub(crate) fn direct(&mut self, count: u32) -> Result<u32, CodecError> {
        let mut v = 0u32;
        for _ in 0..count {
            self.range >>= 1;
            let bit = self.code >= self.range;
            if bit {
                self.code -= self.range;
            }
            v = (v << 1) | u32::from(bit);
            self.normalize()?;
        }
        Ok(v)
    }

    /// Decodes a signed integer coded by [`RangeEncoder::int`]. The zero flag (most
    /// residuals are zero) is decoded inline; the rest of a non-zero value out of line.
    #[inline(always)]
    pub(crate) fn int(&mut self, m: &mut IntModel, ctx: Ctx) -> Result<i32, CodecError> {
        if !self.bit(&mut m.zero[ctx.zero])? {
            return Ok(0);
        }
        self.nonzero(m, ctx.sign)
    }

    /// The sign and magnitude of a value whose zero flag said non-zero.
    #[inline(never)]
    fn nonzero(&mut self, m: &mut IntModel, sign: usize) -> Result<i32, CodecError> {
        let negative = self.bit(&mut m.sign[sign])?;
        let mut k = 0usize;
        while k < MAX_PREFIX && self.bit(&mut m.prefix[k])? {
            k += 1;
        }
        let low = self.direct(k as u32)?;
        let mag = (1u32 << k) | low;
        // k < MAX_PREFIX ≤ 30, so mag < 2^31
        let mag = mag as i32;
        Ok(if negative { -mag } else { mag })
    }

    /// Checks that the payload was used exactly.
    pub(crate) fn finish(self) -> Result<(), CodecError> {
        if self.pos != self.data.len() {
            return Err(CodecError::TrailingBytes {
                extra: self.data.len() - self.pos,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn integers_round_trip(values in proptest::collection::vec(-(1i32 << 24)..(1 << 24), 0..400), skew in 0u32..6) {
            let values: Vec<i32> = values.iter().map(|v| v >> skew).collect();
            let mut buf = Vec::new();
            let mut enc = RangeEncoder::new(&mut buf);
            let mut m = IntModel::default();
            let mut prev = 0;
            for &v in &values {
                enc.int(&mut m, zero_context(prev), v);
                prev = v;
            }
            enc.finish();
            let mut dec = RangeDecoder::new(&buf).expect("header");
            let mut m = IntModel::default();
            let mut prev = 0;
            for &v in &values {
                let got = dec.int(&mut m, zero_context(prev)).expect("decodes");
                prop_assert_eq!(got, v);
                prev = got;
            }
            dec.finish().expect("exact length");
        }
    }

    /// Every residual context lies within the models, and each hint has zero-flag and
    /// sign contexts of its own.
    #[test]
    fn coordinate_contexts_are_in_range_and_separate_the_hints() {
        let mut seen = std::collections::HashSet::new();
        for prev in [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, -2, 5], [7, 7, 7]] {
            for cur in [[0, 0, 0], [1, 0, 0], [0, 3, 0]] {
                for k in 0..3 {
                    for hint in 0..HINTS as u8 {
                        let c = coord_context(&prev, &cur, k, hint);
                        assert!(c.zero < ZERO_CONTEXTS && c.sign < SIGN_CONTEXTS);
                        assert_eq!(c.sign, usize::from(hint));
                        assert_eq!(c.zero % HINTS, usize::from(hint));
                        seen.insert(c.zero);
                    }
                }
            }
        }
        assert_eq!(
            seen.len(),
            ZERO_CONTEXTS,
            "every zero-flag context is reachable"
        );
    }

    /// A probability fed one bit value forever settles within the bounds that
    /// [`super::super::format::max_frame_bytes`] counts on (63 units of 2^-15 from
    /// either end: under [`DECISION_BITS`] bits a decision), and its first bits move it
    /// as a running count would: half way, then by a third or a quarter.
    #[test]
    fn probabilities_warm_up_and_stay_within_the_size_bound() {
        use super::super::format::DECISION_BITS;
        for bit in [false, true] {
            let mut s = PROB_INIT;
            adapt(&mut s, bit);
            let p = probability(s);
            assert_eq!(p, if bit { 1 << 13 } else { 3 << 13 });
            let mut extreme = p;
            for _ in 0..10_000 {
                adapt(&mut s, bit);
                extreme = probability(s);
            }
            assert_eq!(
                s >> PROB_COUNT_SHIFT,
                62,
                "the count stops once the shift is 6"
            );
            let least = if bit {
                extreme
            } else {
                (1 << PROB_BITS) - extreme
            };
            assert_eq!(least, 63, "the extreme probability");
            let bits = f64::from(PROB_BITS) - f64::from(least).log2();
            assert!(bits + 0.01 < DECISION_BITS as f64, "{bits} bits");
        }
        // the unlikely bit after a run: still codable, and the state recovers
        let mut s = PROB_INIT;
        for _ in 0..100 {
            adapt(&mut s, true);
        }
        adapt(&mut s, false);
        assert!(probability(s) > 63);
    }

    #[test]
    fn skewed_bits_compress() {
        let mut buf = Vec::new();
        let mut enc = RangeEncoder::new(&mut buf);
        let mut p = PROB_INIT;
        for i in 0..10_000 {
            enc.bit(&mut p, i % 50 == 0);
        }
        enc.finish();
        // entropy of p = 0.02 is 0.14 bit: 10k bits → ~180 bytes
        assert!(buf.len() < 260, "{} bytes", buf.len());
    }
}
