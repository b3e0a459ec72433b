//! Record output formats of `strata consume --format` and `strata produce --format`, with
//! rpk's and kcat's letters: `%t` topic, `%p` partition, `%o` offset, `%k` key, `%v` value,
//! `%T` timestamp (ms since the epoch), `%h` headers (`key=value` pairs, comma-separated),
//! `%%` a percent sign; `\n`, `\t` and `\\` escapes.

/// One record as printed.
pub struct Printed<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(String, Option<Vec<u8>>)],
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    Timestamp,
    Headers,
}

/// A parsed format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format(Vec<Piece>);

impl Format {
    pub fn parse(format: &str) -> Result<Format, String> {
        let mut pieces = Vec::new();
        let mut text = Vec::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            let piece = match c {
                '%' => match chars.next() {
                    Some('t') => Piece::Topic,
                    Some('p') => Piece::Partition,
                    Some('o') => Piece::Offset,
                    Some('k') => Piece::Key,
                    Some('v') => Piece::Value,
                    Some('T') => Piece::Timestamp,
                    Some('h') => Piece::Headers,
                    Some('%') => {
                        text.push(b'%');
                        continue;
                    }
                    other => {
                        return Err(format!(
                            "--format: %{} is not one of %t %p %o %k %v %T %h %%",
                            other.map(String::from).unwrap_or_default()
                        ))
                    }
                },
                '\\' => {
                    match chars.next() {
                        Some('n') => text.push(b'\n'),
                        Some('t') => text.push(b'\t'),
                        Some('\\') => text.push(b'\\'),
                        Some(other) => {
                            text.push(b'\\');
                            let mut buffer = [0u8; 4];
                            text.extend_from_slice(other.encode_utf8(&mut buffer).as_bytes());
                        }
                        None => text.push(b'\\'),
                    }
                    continue;
                }
                other => {
                    let mut buffer = [0u8; 4];
                    text.extend_from_slice(other.encode_utf8(&mut buffer).as_bytes());
                    continue;
                }
            };
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(piece);
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Format(pieces))
    }

    /// Appends `record` as this format prints it.
    pub fn render(&self, record: &Printed<'_>, out: &mut Vec<u8>) {
        for piece in &self.0 {
            match piece {
                Piece::Text(text) => out.extend_from_slice(text),
                Piece::Topic => out.extend_from_slice(record.topic.as_bytes()),
                Piece::Partition => out.extend_from_slice(record.partition.to_string().as_bytes()),
                Piece::Offset => out.extend_from_slice(record.offset.to_string().as_bytes()),
                Piece::Timestamp => out.extend_from_slice(record.timestamp.to_string().as_bytes()),
                Piece::Key => out.extend_from_slice(record.key.unwrap_or_default()),
                Piece::Value => out.extend_from_slice(record.value.unwrap_or_default()),
                Piece::Headers => {
                    for (index, (key, value)) in record.headers.iter().enumerate() {
                        if index > 0 {
                            out.push(b',');
                        }
                        out.extend_from_slice(key.as_bytes());
                        out.push(b'=');
                        out.extend_from_slice(value.as_deref().unwrap_or_default());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpk_letters_and_escapes_render_each_field() {
        let headers = vec![("h1".to_string(), Some(b"x".to_vec())), ("h2".to_string(), None)];
        let record = Printed {
            topic: "t",
            partition: 3,
            offset: 42,
            timestamp: 1700000000000,
            key: Some(b"k"),
            value: Some(b"v"),
            headers: &headers,
        };
        let mut out = Vec::new();
        Format::parse("%t %p %o %k=%v %T [%h] 100%%\\t.\\n").unwrap().render(&record, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "t 3 42 k=v 1700000000000 [h1=x,h2=] 100%\t.\n"
        );
        assert!(Format::parse("%x").is_err());
        assert!(Format::parse("%").is_err());
    }
}
