//! tests/common/mod.rs: what the tests share: a small reader of pprof's
//! profile.proto (only the fields the tests check) and gunzip through
//! gzip(1), which every Debian system has.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

/// Decompress a gzip stream with `gzip -dc`.
pub fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("gzip")
        .arg("-dc")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip -dc");
    let mut stdin = child.stdin.take().unwrap();
    let input = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("gzip output");
    writer.join().unwrap().expect("write to gzip");
    assert!(out.status.success(), "gzip -dc failed: the dump is not a valid gzip stream");
    out.stdout
}

/// One field of a protobuf message: number and either a varint or bytes.
pub enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        assert!(*pos < buf.len(), "truncated varint");
        let b = buf[*pos];
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
        assert!(shift < 64, "varint too long");
    }
}

/// Every field of a message, in order; panics on wire types the profile
/// does not use or on truncation.
pub fn fields(buf: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos);
        let (num, wt) = (key >> 3, key & 7);
        match wt {
            0 => out.push((num, Field::Varint(varint(buf, &mut pos)))),
            2 => {
                let len = varint(buf, &mut pos) as usize;
                assert!(pos + len <= buf.len(), "truncated field {num}");
                out.push((num, Field::Bytes(&buf[pos..pos + len])));
                pos += len;
            }
            1 => pos += 8,
            5 => pos += 4,
            _ => panic!("wire type {wt} in field {num}"),
        }
    }
    out
}

/// A repeated integer field, packed or not.
fn push_ints(f: &Field<'_>, out: &mut Vec<u64>) {
    match f {
        Field::Varint(v) => out.push(*v),
        Field::Bytes(b) => {
            let mut p = 0;
            while p < b.len() {
                out.push(varint(b, &mut p));
            }
        }
    }
}

pub struct Sample {
    pub location_ids: Vec<u64>,
    pub values: Vec<i64>,
}

pub struct Location {
    pub id: u64,
    pub address: u64,
    pub function_ids: Vec<u64>,
}

#[derive(Default)]
pub struct Profile {
    pub sample_types: Vec<(String, String)>,
    pub samples: Vec<Sample>,
    pub locations: Vec<Location>,
    /// (id, name)
    pub functions: Vec<(u64, String)>,
    pub strings: Vec<String>,
    pub period: i64,
}

impl Profile {
    pub fn function_name(&self, id: u64) -> Option<&str> {
        self.functions.iter().find(|f| f.0 == id).map(|f| f.1.as_str())
    }

    pub fn location(&self, id: u64) -> Option<&Location> {
        self.locations.iter().find(|l| l.id == id)
    }

    /// The function names of a sample's stack, leaf first (one per line
    /// entry; inlined frames give several per location).
    pub fn stack_names(&self, s: &Sample) -> Vec<String> {
        let mut names = Vec::new();
        for id in &s.location_ids {
            if let Some(l) = self.location(*id) {
                for f in &l.function_ids {
                    if let Some(n) = self.function_name(*f) {
                        names.push(n.to_string());
                    }
                }
            }
        }
        names
    }

    pub fn value_index(&self, ty: &str) -> usize {
        self.sample_types.iter().position(|t| t.0 == ty).unwrap_or_else(|| panic!("no sample type {ty}"))
    }
}

/// Decode an uncompressed profile.proto.
pub fn parse_profile(buf: &[u8]) -> Profile {
    let mut p = Profile::default();
    let mut types_raw = Vec::new();
    for (num, f) in fields(buf) {
        match (num, &f) {
            (1, Field::Bytes(b)) => {
                let mut t = (0, 0);
                for (n, g) in fields(b) {
                    if let Field::Varint(v) = g {
                        if n == 1 {
                            t.0 = v;
                        } else if n == 2 {
                            t.1 = v;
                        }
                    }
                }
                types_raw.push(t);
            }
            (2, Field::Bytes(b)) => {
                let mut locs = Vec::new();
                let mut vals = Vec::new();
                for (n, g) in fields(b) {
                    match n {
                        1 => push_ints(&g, &mut locs),
                        2 => push_ints(&g, &mut vals),
                        _ => {}
                    }
                }
                p.samples.push(Sample { location_ids: locs, values: vals.into_iter().map(|v| v as i64).collect() });
            }
            (4, Field::Bytes(b)) => {
                let mut l = Location { id: 0, address: 0, function_ids: Vec::new() };
                for (n, g) in fields(b) {
                    match (n, g) {
                        (1, Field::Varint(v)) => l.id = v,
                        (3, Field::Varint(v)) => l.address = v,
                        (4, Field::Bytes(line)) => {
                            for (ln, lg) in fields(line) {
                                if let (1, Field::Varint(fid)) = (ln, lg) {
                                    l.function_ids.push(fid);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                p.locations.push(l);
            }
            (5, Field::Bytes(b)) => {
                let (mut id, mut name) = (0, 0);
                for (n, g) in fields(b) {
                    if let Field::Varint(v) = g {
                        if n == 1 {
                            id = v;
                        } else if n == 2 {
                            name = v;
                        }
                    }
                }
                p.functions.push((id, name.to_string()));
            }
            (6, Field::Bytes(b)) => p.strings.push(String::from_utf8_lossy(b).into_owned()),
            (12, Field::Varint(v)) => p.period = *v as i64,
            _ => {}
        }
    }
    let s = |i: u64| p.strings.get(i as usize).cloned().unwrap_or_default();
    p.sample_types = types_raw.iter().map(|t| (s(t.0), s(t.1))).collect();
    // Function names were string indices until the table was read.
    let names: Vec<(u64, String)> = p.functions.iter().map(|(id, n)| (*id, s(n.parse().unwrap()))).collect();
    p.functions = names;
    p
}
