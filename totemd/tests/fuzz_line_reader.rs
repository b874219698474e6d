//! Fuzz target for the protocol line reader (issue 9, reliability suite): the daemon's own
//! connection loop (`totemd::server::connection::serve`) over a socket pair, fed arbitrary bytes,
//! lines built from the protocol's pieces (requests, notifications, batches, broken JSON, cut
//! UTF-8, CR line ends), and lines around the 16 MiB limit, written in chunks cut at arbitrary
//! points. After the fuzzed input the client sends one well-formed request. Every answer must be
//! a well-formed JSON-RPC response or error, the request after the fuzzed lines must be answered
//! (no line is lost behind a bad one), and the connection loop must end cleanly, never panic.
//!
//! Case counts are kept small for CI; set `PROPTEST_CASES` for a longer run (the lines around the
//! limit run a hundredth of it), e.g.
//! `PROPTEST_CASES=2000 cargo test --release -p totemd --test fuzz_line_reader`.

use jsonrpsee::RpcModule;
use proptest::prelude::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use totem_protocol::{ErrorCode, MAX_LINE_BYTES};

fn fail(error: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(error.to_string())
}

/// `PROPTEST_CASES` when set, else `default`.
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The request sent after the fuzzed input; its answer proves the line after them was read.
const LAST: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"initialize\",\"params\":{}}\n";

/// Sends `input` cut at `cuts`, then [`LAST`], then closes the writing side; returns every
/// answer line and whether the connection loop ended without a panic.
async fn exchange(input: &[u8], cuts: &[usize]) -> Result<(Vec<Vec<u8>>, bool), TestCaseError> {
    let (client, server) = UnixStream::pair().map_err(fail)?;
    let mut module = RpcModule::new(());
    module
        .register_method("initialize", |_, _, _| "ready")
        .map_err(fail)?;
    let served = tokio::spawn(totemd::server::connection::serve(server, module.into(), 1));
    let (mut read, mut write) = client.into_split();
    let reader = tokio::spawn(async move {
        let mut out = Vec::new();
        read.read_to_end(&mut out).await.map(|_| out)
    });

    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.push(0);
    cuts.push(input.len());
    cuts.sort_unstable();
    cuts.dedup();
    for piece in cuts.windows(2) {
        write
            .write_all(&input[piece[0]..piece[1]])
            .await
            .map_err(fail)?;
        // Let the server read what is there: lines arrive cut where the cut falls.
        tokio::task::yield_now().await;
    }
    // A fuzzed last line without its line end ends here, as a client's would.
    write.write_all(b"\n").await.map_err(fail)?;
    write.write_all(LAST).await.map_err(fail)?;
    write.shutdown().await.map_err(fail)?;
    drop(write);

    let clean = served.await.is_ok();
    let out = reader.await.map_err(fail)?.map_err(fail)?;
    let lines = out
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    Ok((lines, clean))
}

/// Every answer is a JSON-RPC 2.0 response or error; the last request is answered, last.
fn check(lines: &[Vec<u8>], clean: bool) -> Result<Vec<Value>, TestCaseError> {
    prop_assert!(clean, "the connection loop panicked");
    let mut answers = Vec::new();
    for line in lines {
        let answer: Value = serde_json::from_slice(line)
            .map_err(|e| TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(line))))?;
        prop_assert_eq!(&answer["jsonrpc"], "2.0", "{}", answer);
        prop_assert!(answer.get("id").is_some(), "{}", answer);
        match (answer.get("result"), answer.get("error")) {
            (Some(_), None) => {}
            (None, Some(error)) => {
                prop_assert!(error["code"].is_i64(), "{}", answer);
                prop_assert!(
                    error["message"].as_str().is_some_and(|m| !m.is_empty()),
                    "{}",
                    answer
                );
            }
            _ => {
                return Err(TestCaseError::fail(format!(
                    "neither result nor error: {answer}"
                )));
            }
        }
        answers.push(answer);
    }
    let last = answers.iter().filter(|a| a["id"] == "last").count();
    prop_assert!(
        last >= 1,
        "the request after the fuzzed input was lost: {:?}",
        answers
    );
    Ok(answers)
}

fn run(input: &[u8], cuts: &[usize]) -> Result<Vec<Value>, TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(fail)?;
    let (lines, clean) = runtime.block_on(exchange(input, cuts))?;
    check(&lines, clean)
}

/// Pieces of the protocol and of what breaks it, to be strung together in any order.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<&'static [u8]> = vec![
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
        b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"session.list\"}",
        b"{\"jsonrpc\":\"2.0\",\"method\":\"note\"}",
        b"{\"jsonrpc\":\"1.0\",\"id\":2,\"method\":\"x\"}",
        b"{\"id\":3}",
        b"[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\"}]",
        b"{\"jsonrpc\":\"2.0\",\"id\":",
        b"\"\xC3",
        b"\xA9\"",
        b"\xFF\xFE",
        b"\xE2\x82",
        b"\xAC",
        b"null",
        b"{}",
        b"\n",
        b"\r\n",
        b"\r",
        b" \t",
        b"\\u0000",
    ];
    prop_oneof![
        4 => prop::sample::select(fixed).prop_map(<[u8]>::to_vec),
        1 => prop::collection::vec(any::<u8>(), 1..16),
    ]
}

fn cuts() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(any::<usize>(), 0..12)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_bytes_get_clear_answers_and_the_next_line_is_read(
        input in prop::collection::vec(any::<u8>(), 0..2048), cuts in cuts()
    ) {
        run(&input, &cuts)?;
    }

    #[test]
    fn protocol_pieces_in_any_order_get_clear_answers_and_the_next_line_is_read(
        pieces in prop::collection::vec(piece(), 0..40), cuts in cuts()
    ) {
        let input = pieces.concat();
        let answers = run(&input, &cuts)?;
        let lines = input.split(|b| *b == b'\n').count() + 1;
        prop_assert!(answers.len() <= lines, "{} answers to {} lines", answers.len(), lines);
    }
}

proptest! {
    // Four 16 MiB lines a case: a hundredth of the cases the others run.
    #![proptest_config(ProptestConfig { cases: (config(200).cases / 100).max(1), ..config(2) })]

    /// Lines just under, at and just over the limit, cut anywhere: over it a line is refused
    /// with LINE_TOO_LONG and the rest of it skipped; the request after it is answered either way.
    #[test]
    fn lines_around_the_limit_are_refused_or_read_and_the_next_line_is_read(
        filler in prop::sample::select(vec![b'a', b' ', b'{', 0xC3]),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        for length in MAX_LINE_BYTES - 1..=MAX_LINE_BYTES + 2 {
            let mut input = vec![filler; length];
            input.push(b'\n');
            let answers = run(&input, &cuts)?;
            let too_long = answers
                .iter()
                .filter(|a| a["error"]["code"] == ErrorCode::LINE_TOO_LONG.0)
                .count();
            prop_assert_eq!(too_long, usize::from(length > MAX_LINE_BYTES), "{:?}", answers);
        }
    }
}
