//! A small Debug Adapter Protocol client (Content-Length framed JSON over
//! TCP), enough to attach to debugpy, finish the configuration, and
//! continue from where the program stopped.

#![allow(dead_code)] // each test binary uses its own share

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The project the debug tests run: a line to stop before, a value to check.
pub(crate) const WORK_PY: &str = r#"
def square(x):
    y = x * x
    return y
"#;

/// The `bin` of the venv `scripts/test.sh` builds, whose `python3` has
/// debugpy; the test fails saying so when it is missing.
pub(crate) fn venv_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/python-venv/bin");
    let python = bin.join("python3");
    let ok = std::process::Command::new(&python)
        .args(["-c", "import debugpy"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} with debugpy is needed: run scripts/test.sh (it builds the venv with debugpy from PyPI)",
        python.display()
    );
    bin.canonicalize().unwrap()
}

/// The launch configuration `kinetic jobs debug` prints: pretty JSON
/// ending with a lone `}`.
pub(crate) fn read_launch(out: impl Read) -> Value {
    let mut text = String::new();
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        text.push_str(&line);
        text.push('\n');
        if line == "}" {
            break;
        }
    }
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("no launch configuration ({e}): {text:?}"))
}

/// One DAP connection.
pub(crate) struct Dap {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    seq: u64,
}

impl Dap {
    pub(crate) fn connect(addr: impl ToSocketAddrs, timeout: Duration) -> Self {
        let stream = TcpStream::connect(addr).expect("connect to the forwarded debug port");
        stream.set_read_timeout(Some(timeout)).unwrap();
        Self {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
            seq: 0,
        }
    }

    /// Send a request; gives its sequence number.
    pub(crate) fn request(&mut self, command: &str, arguments: Value) -> u64 {
        self.seq += 1;
        let body =
            json!({"seq": self.seq, "type": "request", "command": command, "arguments": arguments})
                .to_string();
        write!(self.writer, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.writer.flush().unwrap();
        self.seq
    }

    /// The next message, or `None` when the connection closed.
    pub(crate) fn next(&mut self) -> Option<Value> {
        let mut length = None;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).expect("read a DAP header") == 0 {
                return None;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(n) = line.strip_prefix("Content-Length:") {
                length = Some(n.trim().parse::<usize>().expect("a Content-Length"));
            }
        }
        let mut body = vec![0; length.expect("a Content-Length header")];
        self.reader.read_exact(&mut body).expect("read a DAP body");
        Some(serde_json::from_slice(&body).expect("a DAP message is JSON"))
    }
}

/// Attach to the debugger at `addr` as VS Code does (`initialize`,
/// `attach`, `configurationDone` once `initialized` came), wait for the
/// program to stop, `continue` it, and read on until the debugger goes
/// away. Gives the `stopped` event's body, `None` when it never stopped.
pub(crate) fn attach_and_continue(addr: impl ToSocketAddrs, limit: Duration) -> Option<Value> {
    let deadline = Instant::now() + limit;
    let mut dap = Dap::connect(addr, limit);
    dap.request(
        "initialize",
        json!({"clientID": "kinetic-test", "adapterID": "debugpy", "linesStartAt1": true,
               "columnsStartAt1": true, "pathFormat": "path"}),
    );
    dap.request("attach", json!({"justMyCode": false}));
    let mut stopped = None;
    while let Some(message) = dap.next() {
        assert!(
            Instant::now() < deadline,
            "the debug session took longer than {limit:?}"
        );
        match (message["type"].as_str(), message["event"].as_str()) {
            (Some("event"), Some("initialized")) => {
                dap.request("configurationDone", json!({}));
            }
            (Some("event"), Some("stopped")) if stopped.is_none() => {
                let thread = message["body"]["threadId"].clone();
                stopped = Some(message["body"].clone());
                dap.request("continue", json!({"threadId": thread}));
            }
            (Some("event"), Some("terminated" | "exited")) => break,
            (Some("response"), _) if message["success"] == false => {
                panic!("the debugger refused a request: {message}");
            }
            _ => {}
        }
    }
    stopped
}
