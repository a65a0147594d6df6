//! 16-byte md UUIDs and the text form mdadm prints: four groups of eight hex digits separated
//! by ':' in byte order, e.g. `eb42de13:44e23c33:a6be9334:ca81223a` (r5-bitmap's array UUID,
//! stored as bytes eb 42 de 13 44 e2 ... at superblock offset 16).

use std::fmt;
use std::str::FromStr;

use crate::error::UuidParseError;

/// An md array or device UUID, as stored on disk (no byte swapping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Uuid(pub [u8; 16]);

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, byte) in self.0.iter().enumerate() {
            if index > 0 && index % 4 == 0 {
                write!(f, ":")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl FromStr for Uuid {
    type Err = UuidParseError;

    /// Parses mdadm's form; separators other than ':' are not accepted.
    fn from_str(text: &str) -> Result<Uuid, UuidParseError> {
        let malformed = || UuidParseError::Malformed { text: text.to_owned() };
        let groups: Vec<&str> = text.split(':').collect();
        if groups.len() != 4 || groups.iter().any(|group| group.len() != 8) {
            return Err(malformed());
        }
        let digits: String = groups.concat();
        // from_str_radix alone would accept a '+' sign inside a pair.
        if !digits.bytes().all(|digit| digit.is_ascii_hexdigit()) {
            return Err(malformed());
        }
        let mut bytes = [0u8; 16];
        for (index, byte) in bytes.iter_mut().enumerate() {
            let pair = digits.get(index * 2..index * 2 + 2).ok_or_else(malformed)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| malformed())?;
        }
        Ok(Uuid(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mdadm_text_roundtrip() {
        let text = "eb42de13:44e23c33:a6be9334:ca81223a";
        let uuid: Uuid = text.parse().unwrap();
        assert_eq!(uuid.0[0..4], [0xeb, 0x42, 0xde, 0x13]);
        assert_eq!(uuid.to_string(), text);
        assert!("eb42de13-44e23c33-a6be9334-ca81223a".parse::<Uuid>().is_err());
        assert!("eb42de13:44e23c33:a6be9334:ca81223g".parse::<Uuid>().is_err());
        assert!("eb42de13:+4e23c33:a6be9334:ca81223a".parse::<Uuid>().is_err());
    }
}
