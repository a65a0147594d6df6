//! mdadm.conf, as far as uraid uses it: for `uraid monitor`, the ARRAY lines' spare groups and
//! expected spares, and MAILADDR, MAILFROM, PROGRAM and MONITORDELAY; for the verbs that
//! assemble an array (`--config`), the DEVICE lines and the ARRAY lines' UUIDs. Pure (text
//! in, values out), so that an administrator's existing file serves uraid unchanged and every
//! rule is a unit test.
//!
//! The syntax is mdadm's (mdadm.conf(5)): a line that starts with a blank continues the one
//! before; `#` at the start of a word comments out the rest of the line; quotes group words
//! with blanks; a keyword is matched case-insensitively from its first three letters or more
//! ("ARR" is ARRAY; of two keywords that both begin so, the one mdadm lists first). mdadm
//! warns of what it does not know and goes on; so does this, except for a value it would
//! misread (a UUID that is not one, `spares=` that is not a number): that is an error with its
//! line, since a monitor that ran with a spare group silently dropped would move no spare.

use crate::status::ArrayStatus;
use std::fmt;
use uraid_format::Uuid;

/// mdadm's keywords, in mdadm's order (an abbreviation takes the first that it begins).
const KEYWORDS: [&str; 16] = [
    "devices",
    "array",
    "mailaddr",
    "mailfrom",
    "program",
    "create",
    "homehost",
    "homecluster",
    "auto",
    "policy",
    "part-policy",
    "sysfs",
    "monitordelay",
    "encryption_no_verify",
    "probing",
    "imsm_disable_orom",
];

/// ARRAY words mdadm takes that the monitor has no use for.
const OTHER_ARRAY_WORDS: [&str; 11] = [
    "name=",
    "level=",
    "num-devices=",
    "disks=",
    "metadata=",
    "devices=",
    "super-minor=",
    "bitmap=",
    "auto=",
    "member=",
    "container=",
];

/// One ARRAY line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfArray {
    /// Its line in the file (the first of a continued line).
    pub line: usize,
    /// The device name (`/dev/md0`, `/dev/md/data`), which a uraid array's name matches by
    /// its last part; `<ignore>` matches none.
    pub devname: Option<String>,
    pub uuid: Option<Uuid>,
    /// `spare-group=`: arrays sharing one lend each other their hot spares.
    pub spare_group: Option<String>,
    /// `spares=`: how many hot spares the array should have (SparesMissing below that).
    pub spares: Option<u32>,
}

impl ConfArray {
    /// Whether this line describes `status`'s array: by UUID when the line gives one (it then
    /// decides alone, as it identifies an array wherever it runs), else by device name.
    #[must_use]
    pub fn matches(&self, status: &ArrayStatus) -> bool {
        if let Some(uuid) = self.uuid {
            return status.uuid.parse::<Uuid>().is_ok_and(|u| u == uuid);
        }
        self.names(&status.name)
    }

    /// Whether the device name is `name`'s: `/dev/md/NAME`, `/dev/NAME` or NAME (`<ignore>`
    /// names none).
    #[must_use]
    pub fn names(&self, name: &str) -> bool {
        let Some(devname) = self.devname.as_deref().filter(|d| *d != "<ignore>") else {
            return false;
        };
        let short = devname.strip_prefix("/dev/md/").or_else(|| devname.strip_prefix("/dev/"));
        short.unwrap_or(devname) == name
    }
}

/// What uraid takes from an mdadm.conf.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MdadmConf {
    pub arrays: Vec<ConfArray>,
    /// The DEVICE lines' words, in order: paths and patterns (`/dev/sd*`), `partitions` (every
    /// device in /proc/partitions) and `containers` (none here: uraid has no containers).
    pub devices: Vec<String>,
    /// MAILADDR (mdadm takes the first address and ignores the rest).
    pub mail_addr: Option<String>,
    /// MAILFROM, its words joined by a space.
    pub mail_from: Option<String>,
    /// PROGRAM (the first word).
    pub program: Option<String>,
    /// MONITORDELAY, whole seconds.
    pub monitor_delay: Option<u32>,
    /// What was ignored, with its line: unknown keywords and words, lines that identify no
    /// array, extra addresses.
    pub warnings: Vec<String>,
}

impl MdadmConf {
    /// The first ARRAY line describing `status`'s array, as mdadm takes the first.
    #[must_use]
    pub fn array_for(&self, status: &ArrayStatus) -> Option<&ConfArray> {
        self.arrays.iter().find(|a| a.matches(status))
    }

    /// The spare group `status`'s array is in, if any.
    #[must_use]
    pub fn spare_group(&self, status: &ArrayStatus) -> Option<&str> {
        self.array_for(status)?.spare_group.as_deref()
    }
}

/// A value the monitor would misread, with its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ConfError {}

/// Parses an mdadm.conf's text.
///
/// # Errors
/// A UUID that is not 32 hex digits, `spares=` or MONITORDELAY not a number, a second `uuid=`
/// or `spare-group=` on one line.
pub fn parse(text: &str) -> Result<MdadmConf, ConfError> {
    let mut conf = MdadmConf::default();
    for (line, words) in logical_lines(text) {
        let Some((keyword, rest)) = words.split_first() else { continue };
        let err = |message: String| ConfError { line, message };
        match keyword_of(keyword) {
            Some("array") => array_line(&mut conf, line, rest)?,
            Some("devices") => {
                for word in rest {
                    let keyword =
                        ["partitions", "containers"].iter().find(|k| k.eq_ignore_ascii_case(word));
                    if let Some(keyword) = keyword {
                        conf.devices.push((*keyword).to_owned());
                    } else if word.starts_with('/') {
                        conf.devices.push(word.clone());
                    } else {
                        conf.warnings
                            .push(format!("line {line}: unrecognised word on DEVICE line: {word}"));
                    }
                }
            }
            Some("mailaddr") => {
                conf.mail_addr = conf.mail_addr.take().or_else(|| rest.first().cloned());
                if rest.len() > 1 {
                    let extra = rest[1..].join(" ");
                    conf.warnings.push(format!("line {line}: excess addresses ignored: {extra}"));
                }
            }
            Some("mailfrom") if !rest.is_empty() => conf.mail_from = Some(rest.join(" ")),
            Some("program") => conf.program = conf.program.take().or_else(|| rest.first().cloned()),
            Some("monitordelay") => {
                let text = rest.first().map_or("", String::as_str);
                let delay = text.parse::<u32>().ok().filter(|d| *d > 0);
                let why = || format!("MONITORDELAY {text:?} is not a whole number of seconds");
                conf.monitor_delay = Some(delay.ok_or_else(|| err(why()))?);
            }
            Some(_) => {}
            None => conf.warnings.push(format!("line {line}: unknown keyword {keyword}")),
        }
    }
    Ok(conf)
}

fn array_line(conf: &mut MdadmConf, line: usize, words: &[String]) -> Result<(), ConfError> {
    let err = |message: String| ConfError { line, message };
    let mut array = ConfArray { line, ..ConfArray::default() };
    for word in words {
        let lower = word.to_ascii_lowercase();
        let value = |key: &str| word.get(key.len()..).unwrap_or_default().to_owned();
        if word.starts_with('/') || !word.contains('=') {
            array.devname = Some(word.clone());
        } else if lower.starts_with("uuid=") {
            let uuid = conf_uuid(&value("uuid=")).ok_or_else(|| err(format!("bad {word}")))?;
            if array.uuid.replace(uuid).is_some() {
                return Err(err(format!("a second uuid= ({word})")));
            }
        } else if lower.starts_with("spare-group=") {
            if array.spare_group.replace(value("spare-group=")).is_some() {
                return Err(err(format!("a second spare-group= ({word}): one group an array")));
            }
        } else if lower.starts_with("spares=") {
            let spares = value("spares=").parse().map_err(|_| err(format!("bad {word}")))?;
            array.spares = Some(spares);
        } else if !OTHER_ARRAY_WORDS.iter().any(|w| lower.starts_with(w)) {
            conf.warnings.push(format!("line {line}: unrecognised word on ARRAY line: {word}"));
        }
    }
    if array.uuid.is_none() && array.devname.is_none() {
        let why = "identifies no array uraid can match (no UUID= and no device name)";
        conf.warnings.push(format!("line {line}: ARRAY line ignored: {why}"));
    } else {
        conf.arrays.push(array);
    }
    Ok(())
}

/// The keyword `word` abbreviates (three letters at least), mdadm's way.
fn keyword_of(word: &str) -> Option<&'static str> {
    let word = word.to_ascii_lowercase();
    if word.len() < 3 {
        return None;
    }
    KEYWORDS.iter().copied().find(|k| k.starts_with(&word))
}

/// A UUID as mdadm reads one in its files: 32 hex digits, with ':', '.', ' ' or '-' anywhere
/// between them.
fn conf_uuid(text: &str) -> Option<Uuid> {
    let digits: Vec<u8> = text
        .chars()
        .filter(|c| !":. -".contains(*c))
        .map(|c| c.to_digit(16).map(|d| d as u8))
        .collect::<Option<_>>()?;
    if digits.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
        *byte = pair[0] << 4 | pair[1];
    }
    Some(Uuid(bytes))
}

/// The file's logical lines, each with the number of its first physical line, as words
/// (quotes removed, comments dropped).
fn logical_lines(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut lines: Vec<(usize, Vec<String>)> = Vec::new();
    for (index, physical) in text.lines().enumerate() {
        let words = words_of(physical);
        let continues = physical.starts_with([' ', '\t']);
        match lines.last_mut() {
            Some((_, last)) if continues => last.extend(words),
            _ if !words.is_empty() => lines.push((index + 1, words)),
            _ => {}
        }
    }
    lines
}

/// One physical line's words: blanks separate them unless quoted ('...' or "..."), and a word
/// that starts with `#` starts a comment.
fn words_of(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ' ' || *c == '\t').is_some() {}
        match chars.peek() {
            None | Some('#') => return words,
            Some(_) => {}
        }
        let (mut word, mut quote) = (String::new(), None);
        while let Some(c) = chars.next_if(|c| quote.is_some() || (*c != ' ' && *c != '\t')) {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (None, '\'' | '"') => quote = Some(c),
                _ => word.push(c),
            }
        }
        words.push(word);
    }
}

#[cfg(test)]
mod tests;
