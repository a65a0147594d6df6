//! Flags and value parsers shared between verbs.

use anyhow::{Context, bail};

/// Parses a size the way mdadm does: a bare number is KiB; suffixes `K`, `M`, `G`, `T` are
/// binary multiples, `s` is 512-byte sectors and `b` is bytes. Returns bytes.
///
/// Examples: `64` and `64K` are 65536; `1M` is 1048576; `2048s` is 1048576; `4T` is 4 TiB.
pub fn parse_size(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    if digits.is_empty() {
        bail!("size {text:?} does not start with a number (examples: 64K, 1M, 2048s, 4T)");
    }
    let value: u64 = digits.parse().with_context(|| format!("size {text:?} is too large"))?;
    let multiplier: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "k" | "kib" => 1 << 10,
        "b" => 1,
        "s" => 512,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        _ => bail!("size {text:?} has an unknown unit {suffix:?} (use K, M, G, T, s or b)"),
    };
    value.checked_mul(multiplier).with_context(|| format!("size {text:?} overflows 64 bits"))
}

/// mdadm's --bitmap-chunk: bytes of member data a bit covers, a power of two from 4K to 1G.
pub fn parse_bitmap_chunk(text: &str) -> anyhow::Result<u32> {
    let chunk = parse_size(text)?;
    anyhow::ensure!(
        chunk.is_power_of_two() && (4096..=1 << 30).contains(&chunk),
        "--bitmap-chunk {text}: must be a power of two from 4K to 1G"
    );
    Ok(u32::try_from(chunk).expect("at most 1G"))
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_parse_like_mdadm() {
        assert_eq!(parse_size("64").unwrap(), 65536);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("2048s").unwrap(), 1 << 20);
        assert_eq!(parse_size("4T").unwrap(), 4 << 40);
        assert_eq!(parse_size("512b").unwrap(), 512);
        assert!(parse_size("K").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999999999999T").is_err());
        assert!(parse_size("16777216T").is_err());
    }
}
