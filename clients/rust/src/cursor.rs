//! A bounds-checked reader of little-endian fields: every read checks
//! the bytes left and fails with a protocol error naming the field, so
//! that no input can make decoding panic.

use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

pub(crate) fn malformed(what: &str, detail: impl std::fmt::Display) -> Error {
    Error::Protocol(format!("{what}: {detail}"))
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Cursor<'a> {
        Cursor { b, pos: 0 }
    }

    pub(crate) fn left(&self) -> usize {
        self.b.len() - self.pos
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.left() {
            return Err(malformed(what, format_args!("{} bytes needed, {} left", n, self.left())));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// The bytes not read yet, consuming them.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.pos..];
        self.pos = self.b.len();
        s
    }

    fn arr<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.arr::<1>(what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.arr(what)?))
    }
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.arr(what)?))
    }
    pub(crate) fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.arr(what)?))
    }
    pub(crate) fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.arr(what)?))
    }
    pub(crate) fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.arr(what)?))
    }
    pub(crate) fn id(&mut self, what: &str) -> Result<[u8; 16]> {
        self.arr(what)
    }

    /// A `str`: u16 length and UTF-8 bytes.
    pub(crate) fn str(&mut self, what: &str) -> Result<&'a str> {
        let n = self.u16(what)? as usize;
        let b = self.take(n, what)?;
        std::str::from_utf8(b).map_err(|_| malformed(what, "not UTF-8"))
    }

    /// A `bytes`: i32 length (−1: null) and the bytes.
    pub(crate) fn bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>> {
        let n = self.i32(what)?;
        if n == -1 {
            return Ok(None);
        }
        if n < 0 {
            return Err(malformed(what, format_args!("length {n}")));
        }
        self.take(n as usize, what).map(Some)
    }

    /// A reserved field of `n` bytes, which must be zero.
    pub(crate) fn reserved(&mut self, n: usize, what: &str) -> Result<()> {
        let b = self.take(n, what)?;
        if b.iter().any(|&x| x != 0) {
            return Err(malformed(what, "reserved bytes are not 0"));
        }
        Ok(())
    }

    /// A minimally encoded uvarint (as Go's encoding/binary, at most 10
    /// bytes, not overflowing 64 bits).
    pub(crate) fn uvarint(&mut self, what: &str) -> Result<u64> {
        let mut x: u64 = 0;
        let mut shift = 0u32;
        for i in 0..10 {
            let Some(&b) = self.b.get(self.pos + i) else {
                return Err(malformed(what, "truncated varint"));
            };
            if b < 0x80 {
                if i == 9 && b > 1 {
                    return Err(malformed(what, "varint overflows 64 bits"));
                }
                if i > 0 && b == 0 {
                    return Err(malformed(what, "varint not minimally encoded"));
                }
                self.pos += i + 1;
                return Ok(x | (u64::from(b) << shift));
            }
            x |= u64::from(b & 0x7f) << shift;
            shift += 7;
        }
        Err(malformed(what, "varint overflows 64 bits"))
    }

    /// A minimally encoded zig-zag varint.
    pub(crate) fn varint(&mut self, what: &str) -> Result<i64> {
        let u = self.uvarint(what)?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    /// A zig-zag varint length (−1: null) and that many bytes.
    pub(crate) fn var_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>> {
        let n = self.varint(what)?;
        if n == -1 {
            return Ok(None);
        }
        if n < 0 || n as u64 > self.left() as u64 {
            return Err(malformed(what, format_args!("length {n}, {} bytes left", self.left())));
        }
        self.take(n as usize, what).map(Some)
    }

    /// Fails unless every byte was read.
    pub(crate) fn finish(&self, what: &str) -> Result<()> {
        if self.left() != 0 {
            return Err(malformed(what, format_args!("{} bytes left over", self.left())));
        }
        Ok(())
    }
}

pub(crate) fn put_uvarint(dst: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        dst.push((x as u8) | 0x80);
        x >>= 7;
    }
    dst.push(x as u8);
}

pub(crate) fn put_varint(dst: &mut Vec<u8>, x: i64) {
    put_uvarint(dst, ((x << 1) ^ (x >> 63)) as u64);
}

pub(crate) fn uvarint_len(x: u64) -> usize {
    (64 - (x | 1).leading_zeros() as usize).div_ceil(7)
}

pub(crate) fn varint_len(x: i64) -> usize {
    uvarint_len(((x << 1) ^ (x >> 63)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_are_strict() {
        for x in [0u64, 1, 127, 128, 300, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_uvarint(&mut b, x);
            assert_eq!(b.len(), uvarint_len(x));
            let mut c = Cursor::new(&b);
            assert_eq!(c.uvarint("x").unwrap(), x);
            assert_eq!(c.left(), 0);
            // every strict prefix is truncated
            for n in 0..b.len() {
                assert!(Cursor::new(&b[..n]).uvarint("x").is_err());
            }
        }
        for x in [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, x);
            assert_eq!(b.len(), varint_len(x));
            assert_eq!(Cursor::new(&b).varint("x").unwrap(), x);
        }
        // non-minimal: 0 as two bytes
        assert!(Cursor::new(&[0x80, 0x00]).uvarint("x").is_err());
        // overflow: 10th byte > 1
        assert!(Cursor::new(&[0xff; 9].iter().copied().chain([2]).collect::<Vec<_>>()).uvarint("x").is_err());
        assert!(Cursor::new(&[0xff; 11]).uvarint("x").is_err());
    }

    #[test]
    fn fields_are_bounds_checked() {
        let mut c = Cursor::new(&[1, 2, 3]);
        assert!(c.u32("x").is_err());
        assert_eq!(c.u16("x").unwrap(), 0x0201);
        assert!(c.finish("x").is_err());
        assert!(Cursor::new(&[5, 0, b'a']).str("s").is_err());
        assert!(Cursor::new(&[2, 0, 0xff, 0xfe]).str("s").is_err());
        assert!(Cursor::new(&(-2i32).to_le_bytes()).bytes("b").is_err());
        assert_eq!(Cursor::new(&(-1i32).to_le_bytes()).bytes("b").unwrap(), None);
        assert!(Cursor::new(&i32::MAX.to_le_bytes()).bytes("b").is_err());
    }
}
