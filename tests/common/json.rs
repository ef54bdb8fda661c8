//! A small JSON reader for the golden test data (objects, arrays, numbers, strings, bools,
//! null). The data files are ours and well-formed; errors panic with the byte offset.

use std::collections::BTreeMap;

/// A parsed JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(BTreeMap<String, Json>),
}

impl Json {
    /// Parses a whole document.
    pub fn parse(text: &str) -> Json {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            pos: 0,
        };
        let value = parser.value();
        parser.skip_whitespace();
        assert_eq!(
            parser.pos,
            parser.bytes.len(),
            "json: trailing data at byte {}",
            parser.pos
        );
        value
    }

    /// The member `key` of an object.
    #[track_caller]
    pub fn get(&self, key: &str) -> &Json {
        match self {
            Json::Object(map) => map
                .get(key)
                .unwrap_or_else(|| panic!("json: no member {key:?}")),
            other => panic!("json: {other:?} is not an object"),
        }
    }

    /// The members of an object, in key order.
    #[track_caller]
    pub fn members(&self) -> &BTreeMap<String, Json> {
        match self {
            Json::Object(map) => map,
            other => panic!("json: {other:?} is not an object"),
        }
    }

    /// The elements of an array.
    #[track_caller]
    pub fn items(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            other => panic!("json: {other:?} is not an array"),
        }
    }

    /// A number.
    #[track_caller]
    pub fn number(&self) -> f64 {
        match self {
            Json::Number(n) => *n,
            other => panic!("json: {other:?} is not a number"),
        }
    }

    /// A string.
    #[track_caller]
    pub fn string(&self) -> &str {
        match self {
            Json::String(s) => s,
            other => panic!("json: {other:?} is not a string"),
        }
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_whitespace(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> u8 {
        self.skip_whitespace();
        *self
            .bytes
            .get(self.pos)
            .unwrap_or_else(|| panic!("json: unexpected end"))
    }

    fn expect(&mut self, byte: u8) {
        assert_eq!(
            self.peek(),
            byte,
            "json: expected {:?} at byte {}",
            byte as char,
            self.pos
        );
        self.pos += 1;
    }

    fn value(&mut self) -> Json {
        match self.peek() {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => Json::String(self.string()),
            b't' => self.literal("true", Json::Bool(true)),
            b'f' => self.literal("false", Json::Bool(false)),
            b'n' => self.literal("null", Json::Null),
            _ => self.number(),
        }
    }

    fn literal(&mut self, word: &str, value: Json) -> Json {
        assert!(
            self.bytes[self.pos..].starts_with(word.as_bytes()),
            "json: bad literal at byte {}",
            self.pos
        );
        self.pos += word.len();
        value
    }

    fn object(&mut self) -> Json {
        self.expect(b'{');
        let mut map = BTreeMap::new();
        if self.peek() == b'}' {
            self.pos += 1;
            return Json::Object(map);
        }
        loop {
            let key = self.string();
            self.expect(b':');
            map.insert(key, self.value());
            match self.peek() {
                b',' => self.pos += 1,
                _ => {
                    self.expect(b'}');
                    return Json::Object(map);
                }
            }
        }
    }

    fn array(&mut self) -> Json {
        self.expect(b'[');
        let mut items = Vec::new();
        if self.peek() == b']' {
            self.pos += 1;
            return Json::Array(items);
        }
        loop {
            items.push(self.value());
            match self.peek() {
                b',' => self.pos += 1,
                _ => {
                    self.expect(b']');
                    return Json::Array(items);
                }
            }
        }
    }

    fn string(&mut self) -> String {
        self.expect(b'"');
        let mut out = String::new();
        loop {
            let c = self.bytes[self.pos];
            self.pos += 1;
            match c {
                b'"' => return out,
                b'\\' => {
                    let escaped = self.bytes[self.pos];
                    self.pos += 1;
                    match escaped {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'u' => {
                            let hex = std::str::from_utf8(&self.bytes[self.pos..self.pos + 4])
                                .expect("ascii");
                            let code = u32::from_str_radix(hex, 16).expect("json: bad \\u escape");
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                            self.pos += 4;
                        }
                        other => out.push(other as char),
                    }
                }
                _ => {
                    let start = self.pos - 1;
                    let len = utf8_len(c);
                    out.push_str(
                        std::str::from_utf8(&self.bytes[start..start + len]).expect("utf-8"),
                    );
                    self.pos = start + len;
                }
            }
        }
    }

    fn number(&mut self) -> Json {
        let start = self.pos;
        while self.pos < self.bytes.len()
            && matches!(
                self.bytes[self.pos],
                b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
            )
        {
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.bytes[start..self.pos]).expect("ascii");
        Json::Number(
            text.parse()
                .unwrap_or_else(|_| panic!("json: bad number {text:?} at byte {start}")),
        )
    }
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xf0..=0xff => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}
