//! Benchmark memory: one page-aligned allocation cut into stripes of `data` blocks plus P, Q and
//! two scratch blocks, filled with random bytes. Working on many stripes in turn makes a
//! streaming (memory-bound) run; working on one makes a cache-resident run.

/// Blocks per stripe besides the data: P, Q and two scratch blocks.
const EXTRA_BLOCKS: usize = 4;
const ALIGN: usize = 4096;

pub struct Arena {
    buf: Vec<u8>,
    offset: usize,
    pub data_blocks: usize,
    pub block_bytes: usize,
    pub stripes: usize,
}

/// One stripe's blocks, borrowed disjointly.
pub struct StripeBufs<'a> {
    pub data: Vec<&'a [u8]>,
    /// `data` as syndrome inputs, built once so that no run allocates.
    pub present: Vec<Option<&'a [u8]>>,
    pub p: &'a mut [u8],
    pub q: &'a mut [u8],
    pub scratch: [&'a mut [u8]; 2],
}

impl Arena {
    /// Enough stripes to cover `bytes` (at least one), with random contents.
    #[must_use]
    pub fn new(data_blocks: usize, block_bytes: usize, bytes: usize, seed: u64) -> Arena {
        let stride = (data_blocks + EXTRA_BLOCKS) * block_bytes;
        let stripes = bytes.div_ceil(stride).max(1);
        let mut buf = vec![0u8; stripes * stride + ALIGN];
        let offset = buf.as_ptr().align_offset(ALIGN);
        fill_random(&mut buf[offset..], seed);
        Arena { buf, offset, data_blocks, block_bytes, stripes }
    }

    #[must_use]
    pub fn bytes(&self) -> usize {
        self.buf.len() - ALIGN
    }

    /// Every stripe's blocks.
    pub fn stripes(&mut self) -> Vec<StripeBufs<'_>> {
        let (n, len) = (self.data_blocks, self.block_bytes);
        let stride = (n + EXTRA_BLOCKS) * len;
        let end = self.offset + self.stripes * stride;
        self.buf[self.offset..end]
            .chunks_exact_mut(stride)
            .map(|stripe| {
                let (data, rest) = stripe.split_at_mut(n * len);
                let (p, rest) = rest.split_at_mut(len);
                let (q, rest) = rest.split_at_mut(len);
                let (s0, s1) = rest.split_at_mut(len);
                let data: &[u8] = data;
                let data: Vec<&[u8]> = data.chunks_exact(len).collect();
                let present = data.iter().map(|d| Some(*d)).collect();
                StripeBufs { data, present, p, q, scratch: [s0, &mut s1[..len]] }
            })
            .collect()
    }

    /// Whole arena as one slice (for measuring the memory bus).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let end = self.buf.len() - ALIGN + self.offset;
        &mut self.buf[self.offset..end]
    }
}

/// xorshift64*: fast and good enough for benchmark payloads.
pub fn fill_random(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let v = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}
